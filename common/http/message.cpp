#include "common/http/server.h"
#include "common/http/text.h"

#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cstring>
#include <ctime>

// Requests and responses, status lines, dates and ranges: everything of
// HTTP/1.1 that is not the connection handling (server.cpp).
namespace tributary::http {

OpenFile::~OpenFile() {
  if (fd >= 0) {
    ::close(fd);
  }
}

const std::string* Request::header(std::string_view lower_name) const {
  for (const auto& [k, v] : headers) {
    if (k == lower_name) {
      return &v;
    }
  }
  return nullptr;
}

std::string Request::header_value(std::string_view lower_name) const {
  const std::string* v = header(lower_name);
  return v ? *v : std::string();
}

void Response::set_header(std::string name, std::string value) {
  headers.emplace_back(std::move(name), std::move(value));
}

void Response::set_body(std::string text, std::string content_type) {
  body = std::move(text);
  shared.reset();
  file.reset();
  set_header("Content-Type", std::move(content_type));
}

void Response::set_shared(std::shared_ptr<const std::string> bytes, std::string content_type) {
  length = bytes->size();
  offset = 0;
  shared = std::move(bytes);
  set_header("Content-Type", std::move(content_type));
}

void Response::set_file(std::shared_ptr<const OpenFile> f, size_t size, std::string content_type, size_t at) {
  file = std::move(f);
  offset = at;
  length = size;
  set_header("Content-Type", std::move(content_type));
}

size_t Response::body_size() const { return shared || file ? length : body.size(); }

std::string_view reason_phrase(int status) {
  switch (status) {
  case 200: return "OK";
  case 201: return "Created";
  case 202: return "Accepted";
  case 204: return "No Content";
  case 206: return "Partial Content";
  case 301: return "Moved Permanently";
  case 302: return "Found";
  case 304: return "Not Modified";
  case 400: return "Bad Request";
  case 401: return "Unauthorized";
  case 403: return "Forbidden";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 408: return "Request Timeout";
  case 409: return "Conflict";
  case 410: return "Gone";
  case 411: return "Length Required";
  case 413: return "Content Too Large";
  case 414: return "URI Too Long";
  case 416: return "Range Not Satisfiable";
  case 422: return "Unprocessable Content";
  case 429: return "Too Many Requests";
  case 431: return "Request Header Fields Too Large";
  case 500: return "Internal Server Error";
  case 501: return "Not Implemented";
  case 503: return "Service Unavailable";
  case 505: return "HTTP Version Not Supported";
  default: return "Status";
  }
}

std::string http_date(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return buf;
}

std::optional<std::time_t> parse_http_date(const std::string& s) {
  std::tm tm{};
  const char* end = strptime(s.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (!end || *end != '\0') {
    return std::nullopt;
  }
  return timegm(&tm);
}

namespace detail {

bool parse_size(std::string_view s, size_t& out) {
  if (s.empty() || s.size() > 19) {
    return false;
  }
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool is_token_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

} // namespace detail

using detail::parse_size;
using detail::trim;

std::optional<ByteRange> parse_range(std::string_view value, size_t size) {
  value = trim(value);
  if (value.substr(0, 6) != "bytes=") {
    return std::nullopt;
  }
  value.remove_prefix(6);
  if (value.find(',') != std::string_view::npos) {
    return std::nullopt; // several ranges: we send the whole body (RFC 9110 14.2 allows it)
  }
  const size_t dash = value.find('-');
  if (dash == std::string_view::npos) {
    return std::nullopt;
  }
  const std::string_view a = trim(value.substr(0, dash));
  const std::string_view b = trim(value.substr(dash + 1));
  size_t first = 0;
  size_t last = 0;
  if (a.empty()) { // suffix: the last b bytes
    size_t n = 0;
    if (!parse_size(b, n)) {
      return std::nullopt;
    }
    if (n == 0 || size == 0) {
      return ByteRange{0, 0, false};
    }
    n = std::min(n, size);
    return ByteRange{size - n, n, true};
  }
  if (!parse_size(a, first)) {
    return std::nullopt;
  }
  if (b.empty()) {
    last = size == 0 ? 0 : size - 1;
  } else if (!parse_size(b, last) || last < first) {
    return std::nullopt;
  }
  if (first >= size) {
    return ByteRange{0, 0, false};
  }
  last = std::min(last, size - 1);
  return ByteRange{first, last - first + 1, true};
}

} // namespace tributary::http

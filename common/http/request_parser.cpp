// Reading one HTTP/1.1 request from what a connection received: the
// request line, the header fields and a body of a given Content-Length.
// Untrusted input (fuzzed: tests/fuzz).
#include "common/http/server.h"
#include "common/http/text.h"
#include "common/text.h"

#include <algorithm>

namespace tributary::http {

using detail::is_safe_header_value;
using detail::is_token_char;
using detail::parse_size;
using detail::trim;

int parse_request(std::string_view data, size_t max_header_bytes, size_t max_body_bytes, Request& req, size_t& consumed) {
  size_t start = 0;
  while (start + 1 < data.size() && data[start] == '\r' && data[start + 1] == '\n') {
    start += 2; // RFC 9112 2.2: ignore empty lines before a request
  }
  const size_t end = data.find("\r\n\r\n", start);
  if (end == std::string_view::npos) {
    return data.size() > max_header_bytes ? 431 : -1;
  }
  if (end - start > max_header_bytes) {
    return 431;
  }
  std::string_view head = data.substr(start, end - start);
  const size_t line_end = head.find("\r\n");
  const std::string_view line = head.substr(0, line_end);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return 400;
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (method.empty() || !std::all_of(method.begin(), method.end(), is_token_char) || target.empty()) {
    return 400;
  }
  if (version == "HTTP/1.1") {
    req.minor_version = 1;
  } else if (version == "HTTP/1.0") {
    req.minor_version = 0;
  } else if (version.substr(0, 5) == "HTTP/") {
    return 505;
  } else {
    return 400;
  }
  for (char ch : target) {
    if (static_cast<unsigned char>(ch) <= 0x20 || ch == 0x7f) {
      return 400;
    }
  }
  req.method.assign(method);
  req.target.assign(target);
  const size_t q = target.find('?');
  req.path.assign(target.substr(0, q));
  if (q != std::string_view::npos) {
    req.query.assign(target.substr(q + 1));
  }
  std::optional<size_t> content_length;
  std::string_view rest = line_end == std::string_view::npos ? std::string_view() : head.substr(line_end + 2);
  while (!rest.empty()) {
    const size_t e = rest.find("\r\n");
    const std::string_view h = rest.substr(0, e);
    rest = e == std::string_view::npos ? std::string_view() : rest.substr(e + 2);
    if (h.empty() || h.front() == ' ' || h.front() == '\t') {
      return 400; // obsolete line folding
    }
    const size_t colon = h.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return 400;
    }
    const std::string_view name = h.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), is_token_char)) {
      return 400;
    }
    std::string lname = to_lower(name);
    const std::string_view value = trim(h.substr(colon + 1));
    if (!is_safe_header_value(value)) {
      return 400; // a bare CR or LF, or a NUL (RFC 9110 5.5)
    }
    if (lname == "content-length") {
      size_t n = 0;
      if (!parse_size(value, n) || (content_length && *content_length != n)) {
        return 400;
      }
      content_length = n;
    } else if (lname == "transfer-encoding") {
      return 501; // request bodies come with Content-Length here
    }
    req.headers.emplace_back(std::move(lname), std::string(value));
  }
  if (req.minor_version == 1 && !req.header("host")) {
    return 400; // RFC 9112 3.2
  }
  const size_t body_start = end + 4;
  const size_t body_len = content_length.value_or(0);
  if (body_len > max_body_bytes) {
    return 413;
  }
  if (body_len > 0 && req.method != "POST" && req.method != "PUT" && req.method != "PATCH") {
    return 413; // no route here reads the body of a GET, HEAD, DELETE...: none is buffered
  }
  if (data.size() - body_start < body_len) {
    return -1;
  }
  req.body.assign(data.substr(body_start, body_len));
  consumed = body_start + body_len;
  return 0;
}

} // namespace tributary::http

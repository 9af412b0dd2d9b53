// Reading HTTP/1.1 responses from bytes (see http1_response.h).
#include "sync_engine/http1_response.h"

#include "common/text.h"

namespace tributary::sync::http1 {

// A response head at the start of `buf` (RFC 9112 4, 5), strictly: what a
// server that pipelines correctly sends. Anything else is `bad`, and the
// request goes the ordinary way.
Parse parse_head(std::string_view buf, Head& h, std::string& why) {
  const size_t end = buf.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    if (buf.size() > k_max_head) {
      why = "response head longer than 64 KiB";
      return Parse::bad;
    }
    return Parse::more;
  }
  h = Head{};
  h.length = end + 4;
  std::string_view lines = buf.substr(0, end + 2);
  size_t eol = lines.find("\r\n");
  std::string_view status_line = lines.substr(0, eol);
  lines.remove_prefix(eol + 2);
  const bool v11 = status_line.substr(0, 9) == "HTTP/1.1 ";
  const bool v10 = status_line.substr(0, 9) == "HTTP/1.0 ";
  if ((!v11 && !v10) || status_line.size() < 12 || (status_line.size() > 12 && status_line[12] != ' ')) {
    why = "not an HTTP/1.x status line";
    return Parse::bad;
  }
  for (size_t i = 9; i < 12; ++i) {
    if (status_line[i] < '0' || status_line[i] > '9') {
      why = "not an HTTP/1.x status line";
      return Parse::bad;
    }
    h.status = h.status * 10 + (status_line[i] - '0');
  }
  bool keep_alive = false;
  while (!lines.empty()) {
    eol = lines.find("\r\n");
    std::string_view line = lines.substr(0, eol);
    lines.remove_prefix(eol + 2);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0 || line.front() == ' ' || line.front() == '\t') {
      why = "malformed header line";
      return Parse::bad;
    }
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = trim_ows(line.substr(colon + 1));
    if (iequals(name, "content-length")) {
      if (value.empty() || value.size() > 18 || value.find_first_not_of("0123456789") != std::string_view::npos) {
        why = "malformed Content-Length";
        return Parse::bad;
      }
      const uint64_t n = std::stoull(std::string(value));
      if (h.content_length && *h.content_length != n) {
        why = "conflicting Content-Length";
        return Parse::bad;
      }
      h.content_length = n;
    } else if (iequals(name, "transfer-encoding")) {
      if (!iequals(value, "chunked") || h.chunked) {
        why = "transfer coding other than chunked";
        return Parse::bad;
      }
      h.chunked = true;
    } else if (iequals(name, "connection")) {
      h.close = h.close || lists_token(value, "close");
      keep_alive = keep_alive || lists_token(value, "keep-alive");
    } else if (iequals(name, "content-type")) {
      h.content_type = std::string(value);
    } else if (iequals(name, "content-encoding")) {
      h.content_encoding = std::string(value);
    } else if (iequals(name, "retry-after")) {
      h.retry_after = std::string(value);
    }
  }
  if (h.chunked && h.content_length) {
    h.close = true; // RFC 9112 6.3: framing by the coding, and the connection is not reused
    h.content_length.reset();
  }
  if (v10 && !keep_alive) {
    h.close = true;
  }
  return Parse::ok;
}

// The framing of a chunked body at the start of `buf` (RFC 9112 7.1):
// `ok` with `framed` (bytes of framing and data, trailers included) and the
// data appended to `out` when `out` is given; `bad` past `max` bytes of data.
Parse parse_chunked(std::string_view buf, uint64_t max, size_t& framed, std::string* out, std::string& why) {
  size_t at = 0;
  uint64_t total = 0;
  for (;;) {
    const size_t eol = buf.find("\r\n", at);
    if (eol == std::string_view::npos) {
      return buf.size() - at > 1024 ? (why = "malformed chunk size", Parse::bad) : Parse::more;
    }
    std::string_view size_line = buf.substr(at, eol - at);
    size_line = size_line.substr(0, size_line.find(';'));
    size_line = trim_ows(size_line);
    if (size_line.empty() || size_line.size() > 15 ||
        size_line.find_first_not_of("0123456789abcdefABCDEF") != std::string_view::npos) {
      why = "malformed chunk size";
      return Parse::bad;
    }
    const uint64_t n = std::stoull(std::string(size_line), nullptr, 16);
    at = eol + 2;
    if (n == 0) {
      // Trailer fields, then the blank line.
      for (;;) {
        const size_t t = buf.find("\r\n", at);
        if (t == std::string_view::npos) {
          return buf.size() - at > k_max_head ? (why = "trailer too long", Parse::bad) : Parse::more;
        }
        const bool blank = t == at;
        at = t + 2;
        if (blank) {
          framed = at;
          return Parse::ok;
        }
      }
    }
    total += n;
    if (total > max) {
      why = "body larger than " + std::to_string(max) + " bytes";
      return Parse::bad;
    }
    if (buf.size() < at + n + 2) {
      return Parse::more;
    }
    if (buf.substr(at + n, 2) != "\r\n") {
      why = "chunk not followed by CRLF";
      return Parse::bad;
    }
    if (out) {
      out->append(buf.data() + at, n);
    }
    at += n + 2;
  }
}

} // namespace tributary::sync::http1

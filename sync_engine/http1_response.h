#pragma once

// Reading HTTP/1.1 responses from bytes already received (RFC 9112): the
// head, and a chunked body's framing. No I/O: the pipelined fetcher feeds
// it what a connection received. Strict: what a server that pipelines
// correctly sends; anything else is `bad`, and the request goes the
// ordinary way (cpp-httplib).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tributary::sync::http1 {

// A response head longer than this is not what a static resource sends.
constexpr size_t k_max_head = 64 * 1024;

struct Head {
  int status = 0;
  size_t length = 0; // bytes of the head, blank line included
  std::optional<uint64_t> content_length;
  bool chunked = false;
  bool close = false; // the connection ends after this response
  std::string content_type;
  std::string content_encoding;
  std::string retry_after;
};

enum class Parse { more, ok, bad };

// A response head at the start of `buf`: `more` until its blank line has
// come, `ok` with `h` filled in, `bad` with `why`.
Parse parse_head(std::string_view buf, Head& h, std::string& why);

// The framing of a chunked body at the start of `buf` (RFC 9112 7.1): `ok`
// with `framed` (bytes of framing and data, trailers included) and the data
// appended to `out` when `out` is given; `bad` past `max` bytes of data.
Parse parse_chunked(std::string_view buf, uint64_t max, size_t& framed, std::string* out, std::string& why);

} // namespace tributary::sync::http1

#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace tributary {

// a == b: sizes, then bytes with a memcmp the compiler expands in line
// when one side is a short literal. (std::string_view's == calls an
// out-of-line compare() under GCC 12 at -O3 whenever the sizes match: 1.6%
// of reading a Change List, element names and attribute names.)
inline bool same(std::string_view a, std::string_view b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

// ASCII lower case (host names, header names, tokens).
std::string to_lower(std::string_view s);

// "12.0 KiB", "3.4 MiB": sizes for people.
std::string human_bytes(uint64_t n);
// "45 s", "12 min", "3 h 20 min", "2 d 4 h": a duration for people.
std::string human_duration(int64_t seconds);

// Header text (RFC 9110), for our server (common/http) and the pipelined
// client (sync_engine/http1_response): without leading and trailing spaces
// and tabs; equal ignoring ASCII case; whether a comma-separated value
// lists `token` (case-insensitive).
std::string_view trim_ows(std::string_view s);
bool iequals(std::string_view a, std::string_view b);
bool lists_token(std::string_view value, std::string_view token);

// The code point of the UTF-8 sequence at `p` and its length in bytes;
// length 0 when the bytes there are not well-formed UTF-8 (a stray
// continuation byte, a sequence cut short, an overlong form, a surrogate,
// past U+10FFFF). For the log's escapes and the OAI-PMH reader's scan.
struct CodePoint {
  uint32_t value = 0;
  size_t length = 0;
};
CodePoint decode_utf8(std::string_view s, size_t p);

} // namespace tributary

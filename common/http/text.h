#pragma once

// Internal to common/http: small parsers of header text shared by the
// message code (message.cpp) and the connection code (server.cpp).

#include <cstddef>
#include <string_view>

#include "common/text.h"

namespace tributary::http::detail {

// A decimal size of at most 19 digits, nothing else.
bool parse_size(std::string_view s, size_t& out);
// Without leading and trailing spaces and tabs.
inline std::string_view trim(std::string_view s) { return trim_ows(s); }
// RFC 9110 tchar.
bool is_token_char(char c);
// No CR, LF or NUL: what may stand in a header line.
inline bool is_safe_header_value(std::string_view v) { return v.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos; }
using tributary::iequals;
using tributary::lists_token;

} // namespace tributary::http::detail

#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tributary {

// Percent-encodes everything but RFC 3986 unreserved characters.
std::string percent_encode(std::string_view s);
// Decodes %XX escapes; nullopt for a malformed one.
std::optional<std::string> percent_decode(std::string_view s);

} // namespace tributary

#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tributary {

// Percent-encodes everything but RFC 3986 unreserved characters.
std::string percent_encode(std::string_view s);
// Decodes %XX escapes; nullopt for a malformed one.
std::optional<std::string> percent_decode(std::string_view s);
// An application/x-www-form-urlencoded text ('+' is a space, %XX escapes):
// its (name, value) pairs in order, repeats kept; nullopt for a malformed
// escape.
std::optional<std::vector<std::pair<std::string, std::string>>> form_pairs(std::string_view form);

} // namespace tributary

#pragma once

#include "common/result.h"

#include <string>
#include <string_view>

namespace tributary {

// Resolves `reference` against `base` per RFC 3986 section 5 (liburiparser).
// Fails (invalid_document) if either does not parse.
Result<std::string> resolve_reference(std::string_view base, std::string_view reference);

} // namespace tributary

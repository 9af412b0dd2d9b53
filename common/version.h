#pragma once

#include <string_view>

namespace tributary {

// The release version, also sent as the HTTP User-Agent `tributary/<version>`.
std::string_view version();

} // namespace tributary

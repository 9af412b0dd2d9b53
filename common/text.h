#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tributary {

// ASCII lower case (host names, header names, tokens).
std::string to_lower(std::string_view s);

// "12.0 KiB", "3.4 MiB": sizes for people.
std::string human_bytes(uint64_t n);

} // namespace tributary

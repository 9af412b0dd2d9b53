#include "common/text.h"

#include <cstdio>

namespace tributary {

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) {
    if (c >= 'A' && c <= 'Z') {
      c = static_cast<char>(c - 'A' + 'a');
    }
  }
  return out;
}

std::string human_bytes(uint64_t n) {
  static constexpr const char* k_units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (n < 1024) {
    return std::to_string(n) + " B";
  }
  double v = static_cast<double>(n) / 1024.0;
  size_t unit = 0;
  while (v >= 1024.0 && unit + 1 < sizeof k_units / sizeof k_units[0]) {
    v /= 1024.0;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, k_units[unit]);
  return buf;
}

} // namespace tributary

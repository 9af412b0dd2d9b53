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

std::string human_duration(int64_t seconds) {
  const int64_t s = seconds < 0 ? 0 : seconds;
  if (s < 60) {
    return std::to_string(s) + " s";
  }
  if (s < 3600) {
    return std::to_string(s / 60) + " min";
  }
  if (s < 86400) {
    return std::to_string(s / 3600) + " h" + (s % 3600 >= 60 ? " " + std::to_string(s % 3600 / 60) + " min" : "");
  }
  return std::to_string(s / 86400) + " d" + (s % 86400 >= 3600 ? " " + std::to_string(s % 86400 / 3600) + " h" : "");
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    const auto x = static_cast<unsigned char>(a[i]);
    const auto y = static_cast<unsigned char>(b[i]);
    if ((x >= 'A' && x <= 'Z' ? x + 32 : x) != (y >= 'A' && y <= 'Z' ? y + 32 : y)) {
      return false;
    }
  }
  return true;
}

bool lists_token(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    if (iequals(trim_ows(value.substr(0, comma)), token)) {
      return true;
    }
    if (comma == std::string_view::npos) {
      break;
    }
    value.remove_prefix(comma + 1);
  }
  return false;
}

CodePoint decode_utf8(std::string_view s, size_t p) {
  const auto c = static_cast<unsigned char>(s[p]);
  if (c < 0x80) {
    return {c, 1};
  }
  size_t n = 0;
  uint32_t cp = 0;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return {};
  }
  if (p + n > s.size()) {
    return {};
  }
  for (size_t i = 1; i < n; ++i) {
    const auto b = static_cast<unsigned char>(s[p + i]);
    if ((b & 0xC0) != 0x80) {
      return {};
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  const bool overlong = (n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
  if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return {};
  }
  return {cp, n};
}

} // namespace tributary

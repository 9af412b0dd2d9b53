#include "common/percent.h"

namespace tributary {

namespace {

bool unreserved(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_' || c == '~';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

} // namespace

std::string percent_encode(std::string_view s) {
  static constexpr char k_hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() * 3 / 2);
  for (char c : s) {
    if (unreserved(c)) {
      out.push_back(c);
    } else {
      const auto u = static_cast<unsigned char>(c);
      out.push_back('%');
      out.push_back(k_hex[u >> 4]);
      out.push_back(k_hex[u & 15]);
    }
  }
  return out;
}

std::optional<std::string> percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    if (i + 2 >= s.size()) {
      return std::nullopt;
    }
    const int hi = hex_value(s[i + 1]);
    const int lo = hex_value(s[i + 2]);
    if (hi < 0 || lo < 0) {
      return std::nullopt;
    }
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

std::optional<std::vector<std::pair<std::string, std::string>>> form_pairs(std::string_view form) {
  auto decode = [](std::string_view part) {
    std::string plus(part);
    for (char& c : plus) {
      if (c == '+') {
        c = ' ';
      }
    }
    return percent_decode(plus);
  };
  std::vector<std::pair<std::string, std::string>> out;
  while (!form.empty()) {
    const size_t amp = form.find('&');
    const std::string_view pair = form.substr(0, amp);
    form = amp == std::string_view::npos ? std::string_view() : form.substr(amp + 1);
    if (pair.empty()) {
      continue;
    }
    const size_t eq = pair.find('=');
    auto name = decode(pair.substr(0, eq));
    auto value = decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1));
    if (!name || !value) {
      return std::nullopt;
    }
    out.emplace_back(std::move(*name), std::move(*value));
  }
  return out;
}

} // namespace tributary

#include "republisher/url_scheme.h"

namespace tributary::pub {

namespace {

constexpr std::string_view k_sets = "/sets/";
constexpr std::string_view k_resources = "/resources/";

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
    int hi = hex_value(s[i + 1]);
    int lo = hex_value(s[i + 2]);
    if (hi < 0 || lo < 0) {
      return std::nullopt;
    }
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

UrlScheme::UrlScheme(std::string public_url) : m_base(std::move(public_url)) {
  while (!m_base.empty() && m_base.back() == '/') {
    m_base.pop_back();
  }
}

std::string UrlScheme::source_description() const { return m_base + "/.well-known/resourcesync"; }

std::string UrlScheme::capability_list(std::string_view set) const {
  return m_base + std::string(k_sets) + std::string(set) + "/capabilitylist.xml";
}

std::string UrlScheme::resource_list(std::string_view set) const {
  return m_base + std::string(k_sets) + std::string(set) + "/resourcelist.xml";
}

std::string UrlScheme::resource_list_part(std::string_view set, size_t n) const {
  return m_base + std::string(k_sets) + std::string(set) + "/resourcelist-" + std::to_string(n) + ".xml";
}

std::string UrlScheme::change_list(std::string_view set) const {
  return m_base + std::string(k_sets) + std::string(set) + "/changelist.xml";
}

std::string UrlScheme::change_list_part(std::string_view set, size_t n) const {
  return m_base + std::string(k_sets) + std::string(set) + "/changelist-" + std::to_string(n) + ".xml";
}

std::string UrlScheme::resource(std::string_view set, std::string_view original_uri) const {
  return m_base + std::string(k_sets) + std::string(set) + std::string(k_resources) + percent_encode(original_uri);
}

std::string UrlScheme::path_of(const std::string& url) const {
  // Our URLs all start with the base; its own path (behind a proxy) is the
  // server's too only if the proxy does not strip it, so return the part
  // after the origin.
  size_t scheme = url.find("://");
  size_t slash = scheme == std::string::npos ? 0 : url.find('/', scheme + 3);
  return slash == std::string::npos ? "/" : url.substr(slash);
}

std::optional<std::pair<std::string, std::string>> UrlScheme::parse_resource_path(std::string_view path) {
  size_t sets = path.find(k_sets);
  if (sets == std::string_view::npos) {
    return std::nullopt;
  }
  std::string_view rest = path.substr(sets + k_sets.size());
  size_t res = rest.find(k_resources);
  if (res == std::string_view::npos || res == 0) {
    return std::nullopt;
  }
  std::string set(rest.substr(0, res));
  if (set.find('/') != std::string::npos) {
    return std::nullopt;
  }
  std::string_view encoded = rest.substr(res + k_resources.size());
  if (encoded.empty() || encoded.find('/') != std::string_view::npos) {
    return std::nullopt;
  }
  auto uri = percent_decode(encoded);
  if (!uri) {
    return std::nullopt;
  }
  return std::make_pair(std::move(set), std::move(*uri));
}

} // namespace tributary::pub

#include "republisher/url_scheme.h"

#include "common/percent.h"

namespace tributary::pub {

namespace {

constexpr std::string_view k_sets = "/sets/";
constexpr std::string_view k_resources = "/resources/";

} // namespace

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

std::string UrlScheme::change_list_archive(std::string_view set) const {
  return m_base + std::string(k_sets) + std::string(set) + "/changelist-archive.xml";
}

std::string UrlScheme::resource_list_archive(std::string_view set) const {
  return m_base + std::string(k_sets) + std::string(set) + "/resourcelist-archive.xml";
}

std::string UrlScheme::change_dump_archive(std::string_view set) const {
  return m_base + std::string(k_sets) + std::string(set) + "/changedump-archive.xml";
}

std::string UrlScheme::archived_change_dump(std::string_view set, size_t n) const {
  return m_base + std::string(k_sets) + std::string(set) + "/archive/changedump-" + std::to_string(n) + ".xml";
}

std::string UrlScheme::archived_resource_list(std::string_view set, std::string_view snapshot) const {
  return m_base + std::string(k_sets) + std::string(set) + "/archive/" + std::string(snapshot) + "/resourcelist.xml";
}

std::string UrlScheme::archived_resource_list_part(std::string_view set, std::string_view snapshot, size_t n) const {
  return m_base + std::string(k_sets) + std::string(set) + "/archive/" + std::string(snapshot) + "/resourcelist-" +
         std::to_string(n) + ".xml";
}

std::string UrlScheme::change_notification(std::string_view set) const {
  return m_base + std::string(k_sets) + std::string(set) + "/notification/changelist";
}

std::string UrlScheme::hub() const { return m_base + "/hub"; }

std::string UrlScheme::framework_notification(std::string_view set) const {
  return m_base + std::string(k_sets) + std::string(set) + "/notification/framework";
}

std::optional<std::string> UrlScheme::notification_set(std::string_view url, bool* framework) const {
  const std::string head = m_base + std::string(k_sets);
  for (const bool fw : {false, true}) {
    const std::string_view tail = fw ? "/notification/framework" : "/notification/changelist";
    if (url.size() <= head.size() + tail.size() || url.substr(0, head.size()) != head ||
        url.substr(url.size() - tail.size()) != tail) {
      continue;
    }
    std::string set(url.substr(head.size(), url.size() - head.size() - tail.size()));
    if (set.empty() || set.find('/') != std::string::npos) {
      return std::nullopt;
    }
    if (framework) {
      *framework = fw;
    }
    return set;
  }
  return std::nullopt;
}

std::string UrlScheme::change_list(std::string_view set) const {
  return m_base + std::string(k_sets) + std::string(set) + "/changelist.xml";
}

std::string UrlScheme::change_list_part(std::string_view set, size_t n) const {
  return m_base + std::string(k_sets) + std::string(set) + "/changelist-" + std::to_string(n) + ".xml";
}

std::string UrlScheme::change_list_index(std::string_view set) const {
  return m_base + std::string(k_sets) + std::string(set) + "/changelist-index.xml";
}

std::string UrlScheme::resource_dump(std::string_view set) const {
  return m_base + std::string(k_sets) + std::string(set) + "/resourcedump.xml";
}

std::string UrlScheme::resource_dump_package(std::string_view set, std::string_view generation, size_t n) const {
  return m_base + std::string(k_sets) + std::string(set) + "/resourcedump/" + std::string(generation) + "/" +
         std::to_string(n) + ".zip";
}

std::string UrlScheme::change_dump(std::string_view set) const {
  return m_base + std::string(k_sets) + std::string(set) + "/changedump.xml";
}

std::string UrlScheme::change_dump_package(std::string_view set, size_t n) const {
  return m_base + std::string(k_sets) + std::string(set) + "/changedump/" + std::to_string(n) + ".zip";
}

std::string UrlScheme::change_dump_manifest(std::string_view set, size_t n) const {
  return m_base + std::string(k_sets) + std::string(set) + "/changedump/" + std::to_string(n) + "-manifest.xml";
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

std::string UrlScheme::url_of(std::string_view path) const {
  const size_t scheme = m_base.find("://");
  const size_t slash = scheme == std::string::npos ? std::string::npos : m_base.find('/', scheme + 3);
  return (slash == std::string::npos ? m_base : m_base.substr(0, slash)) + std::string(path);
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

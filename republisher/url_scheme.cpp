#include "republisher/url_scheme.h"

#include "common/percent.h"

namespace tributary::pub {

namespace {

constexpr std::string_view k_sets = "/sets/";
constexpr std::string_view k_resources = "/resources/";
constexpr std::string_view k_activity = "/activity/";

// "<digits><suffix>" → the digits; nullopt when `name` is not that.
std::optional<std::string> numbered(std::string_view name, std::string_view head, std::string_view suffix) {
  if (name.size() <= head.size() + suffix.size() || name.substr(0, head.size()) != head ||
      name.substr(name.size() - suffix.size()) != suffix) {
    return std::nullopt;
  }
  std::string_view digits = name.substr(head.size(), name.size() - head.size() - suffix.size());
  if (digits.find_first_not_of("0123456789") != std::string_view::npos) {
    return std::nullopt;
  }
  return std::string(digits);
}

// The kinds named by the one segment under /sets/<set>/.
struct Leaf {
  std::string_view name;
  RouteKind kind;
};
constexpr Leaf k_leaves[] = {
    {"capabilitylist.xml", RouteKind::capability_list},
    {"resourcelist.xml", RouteKind::resource_list},
    {"resourcelist-archive.xml", RouteKind::resource_list_archive},
    {"changelist.xml", RouteKind::change_list},
    {"changelist-index.xml", RouteKind::change_list_index},
    {"changelist-archive.xml", RouteKind::change_list_archive},
    {"resourcedump.xml", RouteKind::resource_dump},
    {"changedump.xml", RouteKind::change_dump},
    {"changedump-archive.xml", RouteKind::change_dump_archive},
};

// What `name` (after .../activity/) names.
void route_activity(std::string_view name, Route& r) {
  if (name == "collection.json") {
    r.kind = RouteKind::activity_collection;
  } else if (auto n = numbered(name, "page-", ".json")) {
    r.kind = RouteKind::activity_page;
    r.part = *n;
  }
}

// What `rest` (decoded, after /sets/<set>/) names.
void route_in_set(std::string_view rest, Route& r) {
  for (const auto& leaf : k_leaves) {
    if (rest == leaf.name) {
      r.kind = leaf.kind;
      return;
    }
  }
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos) {
    if (auto n = numbered(rest, "resourcelist-", ".xml")) {
      r.kind = RouteKind::resource_list_part;
      r.part = *n;
    } else if (auto m = numbered(rest, "changelist-", ".xml")) {
      r.kind = RouteKind::change_list_part;
      r.part = *m;
    }
    return;
  }
  const std::string_view folder = rest.substr(0, slash);
  const std::string_view tail = rest.substr(slash + 1);
  if (folder == "activity") {
    route_activity(tail, r);
  } else if (folder == "notification") {
    if (tail == "changelist") {
      r.kind = RouteKind::change_notification;
    } else if (tail == "framework") {
      r.kind = RouteKind::framework_notification;
    }
  } else if (folder == "changedump") {
    if (auto n = numbered(tail, "", ".zip")) {
      r.kind = RouteKind::change_dump_package;
      r.part = *n;
    } else if (auto m = numbered(tail, "", "-manifest.xml")) {
      r.kind = RouteKind::change_dump_manifest;
      r.part = *m;
    }
  } else if (folder == "resourcedump") {
    const size_t at = tail.find('/');
    if (at != std::string_view::npos && at > 0) {
      if (auto n = numbered(tail.substr(at + 1), "", ".zip")) {
        r.kind = RouteKind::resource_dump_package;
        r.part = std::string(tail.substr(0, at)) + "/" + *n;
      }
    }
  } else if (folder == "archive") {
    if (auto n = numbered(tail, "changedump-", ".xml")) {
      r.kind = RouteKind::archived_change_dump;
      r.part = *n;
      return;
    }
    const size_t at = tail.find('/');
    if (at == std::string_view::npos || at == 0) {
      return;
    }
    const std::string_view snapshot = tail.substr(0, at);
    const std::string_view name = tail.substr(at + 1);
    if (name == "resourcelist.xml") {
      r.kind = RouteKind::archived_resource_list;
      r.part = std::string(snapshot);
    } else if (auto n = numbered(name, "resourcelist-", ".xml")) {
      r.kind = RouteKind::archived_resource_list_part;
      r.part = std::string(snapshot) + "/" + *n;
    }
  }
}

} // namespace

std::string_view route_kind_name(RouteKind kind) {
  switch (kind) {
  case RouteKind::unknown: return "unknown";
  case RouteKind::malformed: return "malformed";
  case RouteKind::source_description: return "source_description";
  case RouteKind::robots: return "robots";
  case RouteKind::hub: return "hub";
  case RouteKind::oai: return "oai";
  case RouteKind::api_catalog: return "api_catalog";
  case RouteKind::activity_collection: return "activity_collection";
  case RouteKind::activity_page: return "activity_page";
  case RouteKind::capability_list: return "capability_list";
  case RouteKind::resource_list: return "resource_list";
  case RouteKind::resource_list_part: return "resource_list_part";
  case RouteKind::change_list: return "change_list";
  case RouteKind::change_list_part: return "change_list_part";
  case RouteKind::change_list_index: return "change_list_index";
  case RouteKind::resource_dump: return "resource_dump";
  case RouteKind::resource_dump_package: return "resource_dump_package";
  case RouteKind::change_dump: return "change_dump";
  case RouteKind::change_dump_package: return "change_dump_package";
  case RouteKind::change_dump_manifest: return "change_dump_manifest";
  case RouteKind::change_list_archive: return "change_list_archive";
  case RouteKind::resource_list_archive: return "resource_list_archive";
  case RouteKind::change_dump_archive: return "change_dump_archive";
  case RouteKind::archived_change_dump: return "archived_change_dump";
  case RouteKind::archived_resource_list: return "archived_resource_list";
  case RouteKind::archived_resource_list_part: return "archived_resource_list_part";
  case RouteKind::change_notification: return "change_notification";
  case RouteKind::framework_notification: return "framework_notification";
  case RouteKind::resource: return "resource";
  }
  return "unknown";
}

Route UrlScheme::route(std::string_view raw_path) const {
  Route r;
  // A resource's original URI is percent-encoded into one segment: parsed
  // from the raw path, before decoding could put slashes in it.
  if (raw_path.substr(0, m_prefix.size()) == m_prefix) {
    if (auto res = parse_resource_path(raw_path.substr(m_prefix.size()));
        res && raw_path.substr(m_prefix.size(), k_sets.size()) == k_sets) {
      r.kind = RouteKind::resource;
      r.set = std::move(res->first);
      r.part = std::move(res->second);
      r.path = percent_decode(raw_path).value_or(std::string(raw_path));
      return r;
    }
  }
  auto decoded = percent_decode(raw_path);
  if (!decoded) {
    r.kind = RouteKind::malformed;
    return r;
  }
  r.path = std::move(*decoded);
  const std::string_view path = r.path;
  if (path == "/robots.txt") {
    r.kind = RouteKind::robots;
    return r;
  }
  if (path.substr(0, m_prefix.size()) != m_prefix) {
    return r;
  }
  const std::string_view under = path.substr(m_prefix.size());
  if (under == "/.well-known/resourcesync") {
    r.kind = RouteKind::source_description;
  } else if (under == "/hub") {
    r.kind = RouteKind::hub;
  } else if (under == "/oai") {
    r.kind = RouteKind::oai;
  } else if (under == "/.well-known/api-catalog") {
    r.kind = RouteKind::api_catalog;
  } else if (under.substr(0, k_activity.size()) == k_activity) {
    route_activity(under.substr(k_activity.size()), r);
  } else if (under.substr(0, k_sets.size()) == k_sets) {
    const std::string_view rest = under.substr(k_sets.size());
    const size_t slash = rest.find('/');
    if (slash == std::string_view::npos || slash == 0) {
      return r;
    }
    r.set = std::string(rest.substr(0, slash));
    route_in_set(rest.substr(slash + 1), r);
  }
  return r;
}

UrlScheme::UrlScheme(std::string public_url) : m_base(std::move(public_url)) {
  while (!m_base.empty() && m_base.back() == '/') {
    m_base.pop_back();
  }
  m_prefix = path_of(m_base + "/");
  m_prefix.pop_back();
}

std::string UrlScheme::oai() const { return m_base + "/oai"; }

std::string UrlScheme::activity_collection(std::string_view set) const {
  return activity_folder(set) + "collection.json";
}

std::string UrlScheme::activity_page(std::string_view set, size_t n) const {
  return activity_folder(set) + "page-" + std::to_string(n) + ".json";
}

std::string UrlScheme::activity_folder(std::string_view set) const {
  // "/sets/<set>" + "/activity/"; the stream of everything at the root.
  std::string out = m_base;
  if (!set.empty()) {
    out += k_sets;
    out += set;
  }
  return out + std::string(k_activity);
}

std::string UrlScheme::api_catalog() const { return m_base + "/.well-known/api-catalog"; }

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

#pragma once

#include "sync_engine/fetcher.h"

#include <string>
#include <vector>

namespace tributary::sync {

struct DiscoveryResult {
  std::string source_description;            // empty when none was found
  std::vector<std::string> capability_lists; // the sets found, in document order
  // Found when no Capability List was: Resource Lists (or indexes) and
  // plain sitemaps to follow on their own, by polling.
  std::vector<std::string> resource_lists;
  // "resourcesync", "resource-list-only" or "plain-sitemap".
  std::string kind;
  std::vector<std::string> trail; // how they were found, one step a line
};

// Finds the Capability List(s) from any entry URL: a Source Description, a
// Capability List, a Resource/Change List or index (climbing rel="up"), an
// HTML page (<link rel="resourcesync">), any response with a
// `Link: <...>; rel="resourcesync"` header, or a site: the well-known URI
// /.well-known/resourcesync at the URL's path base and at the host root, then
// robots.txt `Sitemap:` lines. When none leads to a Capability List, the
// Resource Lists and plain sitemaps met on the way (the entry URL itself, a
// robots.txt `Sitemap:`, then /sitemap.xml) are followed on their own. Fails
// (not_found) with the trail when nothing is found.
Result<DiscoveryResult> discover(Fetcher& fetcher, const std::string& entry_url, const FetchOptions& options);

// Parses an HTTP Link header; returns the targets whose rel includes `rel`,
// resolved against `base`.
std::vector<std::string> link_header_targets(const std::string& header, const std::string& rel,
                                             const std::string& base);
// Finds <link rel="..."> targets with `rel` in an HTML page, resolved against
// `base`.
std::vector<std::string> html_link_targets(const std::string& html, const std::string& rel, const std::string& base);
// A robots.txt (its first 512 KiB); fails with "HTTP <status>" for any
// answer but 200, or with the transport's error.
Result<std::string> fetch_robots(Fetcher& fetcher, const std::string& robots_url, const FetchOptions& options);
// The `Sitemap:` URLs of a robots.txt.
std::vector<std::string> robots_sitemaps(const std::string& robots, const std::string& base);

} // namespace tributary::sync

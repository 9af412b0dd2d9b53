#include "sync_engine/discovery.h"

#include "sync_engine/fetch_error_text.h"
#include "sync_engine/document_fetch.h"
#include "common/url_resolve.h"

#include "common/text.h"

#include <algorithm>
#include <regex>
#include <set>

namespace tributary::sync {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

// Whether a space-separated rel list contains `token` (case-insensitive).
bool rel_has(std::string_view rels, std::string_view token) {
  const std::string l = to_lower(rels);
  const std::string t = to_lower(token);
  size_t i = 0;
  while (i < l.size()) {
    while (i < l.size() && is_space(l[i])) {
      ++i;
    }
    size_t start = i;
    while (i < l.size() && !is_space(l[i])) {
      ++i;
    }
    if (l.compare(start, i - start, t) == 0 && i - start == t.size()) {
      return true;
    }
  }
  return false;
}

void add_unique(std::vector<std::string>& v, const std::string& s) {
  if (std::find(v.begin(), v.end(), s) == v.end()) {
    v.push_back(s);
  }
}

// Keeps entries only for the two small document kinds discovery reads.
struct DiscoveryHandler : rs::DocumentHandler {
  std::optional<rs::Capability> capability;
  rs::Document document;
  void on_header(const rs::DocumentHeader& h) override {
    document.header = h;
    capability = h.capability();
  }
  void on_entry(rs::Entry&& e, uint64_t) override {
    if ((capability == rs::Capability::description || capability == rs::Capability::capabilitylist) &&
        document.entries.size() < 10000) {
      document.entries.push_back(std::move(e));
    }
  }
  void reset() { *this = DiscoveryHandler{}; }
};

// A fetch error's words, naming `url` unless they name it (or its
// authority) already.
std::string names_url(const std::string& words, const std::string& url) {
  if (words.find(url) != std::string::npos) {
    return words;
  }
  if (auto u = parse_url(url); u && words.find(authority_of(u->host, u->port)) != std::string::npos) {
    return words;
  }
  return words + " (" + url + ")";
}

class Discoverer {
public:
  Discoverer(Fetcher& f, const FetchOptions& o) : m_fetcher(f), m_options(o) {}

  bool from_url(const std::string& url, int depth) {
    if (depth > 5 || m_fetches >= 16 || !m_visited.insert(url).second) {
      return false;
    }
    if (skip_down(url)) {
      return false;
    }
    ++m_fetches;
    DiscoveryHandler h;
    auto got = fetch_document(m_fetcher, url, m_options, h, [&] { h.reset(); });
    if (!got) {
      note(names_url(got.error().message, url));
      mark_if_down(url, got.error());
      return false;
    }
    const std::string& final_url = got->response.final_url.empty() ? url : got->response.final_url;
    bool found = false;
    for (const auto& t : link_header_targets(got->response.header("link"), "resourcesync", final_url)) {
      note(final_url + ": Link header rel=\"resourcesync\" -> " + t);
      found = from_url(t, depth + 1) || found;
    }
    if (h.capability) {
      return handle_document(final_url, h, depth) || found;
    }
    if (got->summary.header) {
      note(final_url + ": a Sitemap whose capability is not known");
      return found;
    }
    const std::string prefix = to_lower(got->body_prefix.substr(0, 2048));
    if (prefix.find("<html") != std::string::npos || prefix.find("<!doctype html") != std::string::npos) {
      for (const auto& t : html_link_targets(got->body_prefix, "resourcesync", final_url)) {
        note(final_url + ": HTML <link rel=\"resourcesync\"> -> " + t);
        found = from_url(t, depth + 1) || found;
      }
      if (!found) {
        note(final_url + ": HTML page without <link rel=\"resourcesync\">");
      }
    } else if (!found) {
      note(final_url + ": not a ResourceSync document");
    }
    return found;
  }

  bool handle_document(const std::string& url, const DiscoveryHandler& h, int depth) {
    const auto cap = *h.capability;
    if (cap == rs::Capability::description) {
      m_result.source_description = url;
      bool any = false;
      for (const auto& e : h.document.entries) {
        if (e.md && e.md->capability_kind() == rs::Capability::capabilitylist) {
          auto abs = resolve_reference(url, e.loc);
          if (abs) {
            add_unique(m_result.capability_lists, *abs);
            any = true;
          }
        }
      }
      note(url + ": Source Description listing " + std::to_string(m_result.capability_lists.size()) +
           " Capability List(s)");
      return any;
    }
    if (cap == rs::Capability::capabilitylist) {
      add_unique(m_result.capability_lists, url);
      if (const auto* up = h.document.header.find_link("up"); up && m_result.source_description.empty()) {
        if (auto abs = resolve_reference(url, up->href)) {
          m_result.source_description = *abs;
        }
      }
      note(url + ": Capability List");
      return true;
    }
    if (const auto* up = h.document.header.find_link("up")) {
      auto abs = resolve_reference(url, up->href);
      if (abs) {
        note(url + ": " + std::string(rs::to_string(cap)) + ", rel=\"up\" -> " + *abs);
        if (from_url(*abs, depth + 1)) {
          return true;
        }
        list_found(url, h);
        return false;
      }
    }
    if (const auto* index = h.document.header.find_link("index")) {
      auto abs = resolve_reference(url, index->href);
      if (abs) {
        note(url + ": " + std::string(rs::to_string(cap)) + ", rel=\"index\" -> " + *abs);
        return from_url(*abs, depth + 1);
      }
    }
    list_found(url, h);
    return false;
  }

  // A Resource List (or plain sitemap) that leads to no Capability List:
  // followed on its own if nothing better is found.
  void list_found(const std::string& url, const DiscoveryHandler& h) {
    if (h.capability != rs::Capability::resourcelist) {
      note(url + ": " + std::string(rs::to_string(*h.capability)) + " without rel=\"up\"");
      return;
    }
    const bool plain = h.document.header.plain_sitemap;
    note(url + ": " + (plain ? std::string("a plain Sitemap") : std::string("a Resource List")) +
         (h.document.header.root == rs::RootElement::sitemapindex ? " Index" : "") +
         " without a Capability List: followed on its own");
    if (std::find(m_lists.begin(), m_lists.end(), url) == m_lists.end()) {
      m_lists.push_back(url);
      m_plain = m_plain && plain;
    }
  }

  // The lists met, when no Capability List was found.
  const std::vector<std::string>& lists() const { return m_lists; }
  bool all_plain() const { return m_plain; }

  bool try_sitemap_xml(const std::string& entry) {
    auto u = parse_url(entry);
    if (!u || (u->scheme != "http" && u->scheme != "https")) {
      return false;
    }
    return from_url(u->origin() + "/sitemap.xml", 1);
  }

  bool fallbacks(const std::string& entry) {
    auto u = parse_url(entry);
    if (!u || (u->scheme != "http" && u->scheme != "https")) {
      return false;
    }
    std::string path = u->target.substr(0, u->target.find('?'));
    std::string dir = path.substr(0, path.rfind('/') + 1);
    std::vector<std::string> well_known;
    if (dir != "/") {
      well_known.push_back(u->origin() + dir + ".well-known/resourcesync");
    }
    well_known.push_back(u->origin() + "/.well-known/resourcesync");
    for (const auto& w : well_known) {
      if (from_url(w, 1)) {
        return true;
      }
    }
    const std::string robots_url = u->origin() + "/robots.txt";
    if (skip_down(robots_url)) {
      return false;
    }
    ++m_fetches;
    auto robots = fetch_robots(m_fetcher, robots_url, m_options);
    if (!robots) {
      note(names_url(robots.error().message, robots_url));
      return false;
    }
    bool found = false;
    for (const auto& s : robots_sitemaps(*robots, robots_url)) {
      note(robots_url + ": Sitemap: " + s);
      found = from_url(s, 1) || found;
    }
    return found;
  }

  void note(std::string s) { m_result.trail.push_back(std::move(s)); }

  // A host that gave no HTTP answer at all (refused, unreachable, timed out,
  // each already retried) is not asked for the other places discovery
  // looks: each would cost the same retries again (45 s a run for a closed
  // port before). A host that answered, even 5xx, is asked everywhere.
  void mark_if_down(const std::string& url, const Error& e) {
    static const std::regex k_http_status(": HTTP [0-9]{3}");
    auto u = parse_url(url);
    if (u && e.kind == ErrorKind::transient && !std::regex_search(e.message, k_http_status)) {
      m_down.insert(u->origin());
    }
  }
  bool skip_down(const std::string& url) {
    auto u = parse_url(url);
    if (u && m_down.count(u->origin()) > 0) {
      note(url + ": not tried, " + u->origin() + " did not answer");
      return true;
    }
    return false;
  }
  DiscoveryResult& result() { return m_result; }

private:
  Fetcher& m_fetcher;
  FetchOptions m_options;
  DiscoveryResult m_result;
  std::set<std::string> m_visited;
  std::set<std::string> m_down; // origins that gave no answer
  int m_fetches = 0;
  std::vector<std::string> m_lists; // Resource Lists and sitemaps met
  bool m_plain = true;
};

} // namespace

std::vector<std::string> link_header_targets(const std::string& header, const std::string& rel,
                                             const std::string& base) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < header.size()) {
    size_t lt = header.find('<', i);
    if (lt == std::string::npos) {
      break;
    }
    size_t gt = header.find('>', lt);
    if (gt == std::string::npos) {
      break;
    }
    std::string target = header.substr(lt + 1, gt - lt - 1);
    // Parameters run to the next comma that is outside quotes.
    size_t j = gt + 1;
    bool quoted = false;
    while (j < header.size() && (quoted || header[j] != ',')) {
      if (header[j] == '"') {
        quoted = !quoted;
      }
      ++j;
    }
    std::string params = header.substr(gt + 1, j - gt - 1);
    // Find rel=... (quoted or token).
    std::string lp = to_lower(params);
    size_t r = lp.find("rel");
    while (r != std::string::npos) {
      size_t k = r + 3;
      while (k < lp.size() && is_space(lp[k])) {
        ++k;
      }
      if (k < lp.size() && lp[k] == '=') {
        ++k;
        while (k < lp.size() && is_space(lp[k])) {
          ++k;
        }
        std::string value;
        if (k < lp.size() && params[k] == '"') {
          size_t end = params.find('"', k + 1);
          value = params.substr(k + 1, end == std::string::npos ? std::string::npos : end - k - 1);
        } else {
          size_t end = params.find(';', k);
          value = params.substr(k, end == std::string::npos ? std::string::npos : end - k);
        }
        if (rel_has(value, rel)) {
          if (auto abs = resolve_reference(base, target)) {
            add_unique(out, *abs);
          }
        }
        break;
      }
      r = lp.find("rel", r + 3);
    }
    i = j + 1;
  }
  return out;
}

std::vector<std::string> html_link_targets(const std::string& html, const std::string& rel, const std::string& base) {
  std::vector<std::string> out;
  const std::string l = to_lower(html);
  size_t pos = 0;
  while ((pos = l.find("<link", pos)) != std::string::npos) {
    size_t end = l.find('>', pos);
    if (end == std::string::npos) {
      break;
    }
    // Attributes: name=value with "..." or '...' or bare values.
    std::string rel_value;
    std::string href;
    size_t i = pos + 5;
    while (i < end) {
      while (i < end && (is_space(l[i]) || l[i] == '/')) {
        ++i;
      }
      size_t ns = i;
      while (i < end && l[i] != '=' && !is_space(l[i]) && l[i] != '/') {
        ++i;
      }
      std::string name = l.substr(ns, i - ns);
      while (i < end && is_space(l[i])) {
        ++i;
      }
      std::string value;
      if (i < end && l[i] == '=') {
        ++i;
        while (i < end && is_space(l[i])) {
          ++i;
        }
        if (i < end && (l[i] == '"' || l[i] == '\'')) {
          char q = l[i];
          size_t close = html.find(q, i + 1);
          if (close == std::string::npos || close > end) {
            close = end;
          }
          value = html.substr(i + 1, close - i - 1);
          i = close + 1;
        } else {
          size_t vs = i;
          while (i < end && !is_space(l[i])) {
            ++i;
          }
          value = html.substr(vs, i - vs);
        }
      }
      if (name == "rel") {
        rel_value = value;
      } else if (name == "href") {
        href = value;
      }
      if (name.empty()) {
        ++i;
      }
    }
    if (!href.empty() && rel_has(rel_value, rel)) {
      // The few entities a URL in an attribute is likely to carry.
      std::string decoded;
      for (size_t k = 0; k < href.size(); ++k) {
        if (href.compare(k, 5, "&amp;") == 0) {
          decoded.push_back('&');
          k += 4;
        } else {
          decoded.push_back(href[k]);
        }
      }
      if (auto abs = resolve_reference(base, decoded)) {
        add_unique(out, *abs);
      }
    }
    pos = end;
  }
  return out;
}

Result<std::string> fetch_robots(Fetcher& fetcher, const std::string& robots_url, const FetchOptions& options) {
  std::string robots;
  auto r = fetcher.fetch(robots_url, options, [&](const char* d, size_t n) {
    if (robots.size() < 512 * 1024) {
      robots.append(d, n);
    }
    return true;
  });
  if (!r) {
    return tl::unexpected(r.error());
  }
  if (r->status != 200) {
    return make_error(r->status == 404 || r->status == 410 ? ErrorKind::not_found : ErrorKind::transient,
                      http_status_words(r->status, robots_url));
  }
  return robots;
}

std::vector<std::string> robots_sitemaps(const std::string& robots, const std::string& base) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < robots.size()) {
    size_t eol = robots.find('\n', i);
    if (eol == std::string::npos) {
      eol = robots.size();
    }
    std::string line = robots.substr(i, eol - i);
    i = eol + 1;
    if (size_t hash = line.find('#'); hash != std::string::npos) {
      line.resize(hash);
    }
    size_t colon = line.find(':');
    if (colon == std::string::npos) {
      continue;
    }
    std::string key = to_lower(line.substr(0, colon));
    while (!key.empty() && is_space(key.back())) {
      key.pop_back();
    }
    while (!key.empty() && is_space(key.front())) {
      key.erase(0, 1);
    }
    if (key != "sitemap") {
      continue;
    }
    std::string value = line.substr(colon + 1);
    while (!value.empty() && is_space(value.back())) {
      value.pop_back();
    }
    while (!value.empty() && is_space(value.front())) {
      value.erase(0, 1);
    }
    if (!value.empty()) {
      // Only a web URL: a robots.txt is the host's, and a file: or ftp:
      // URL in it is nothing we would fetch (the fuzzer's first finding).
      if (auto abs = resolve_reference(base, value)) {
        if (auto u = parse_url(*abs); u && (u->scheme == "http" || u->scheme == "https")) {
          add_unique(out, *abs);
        }
      }
    }
  }
  return out;
}

Result<DiscoveryResult> discover(Fetcher& fetcher, const std::string& entry_url, const FetchOptions& options) {
  Discoverer d(fetcher, options);
  bool found = d.from_url(entry_url, 0);
  // A list named as the entry is taken as it is (the operator's choice);
  // otherwise the site is searched for a Capability List, then for
  // sitemaps.
  if (!found && d.lists().empty()) {
    found = d.fallbacks(entry_url);
    if (!found && d.lists().empty()) {
      d.try_sitemap_xml(entry_url);
    }
  }
  if (found) {
    d.result().kind = "resourcesync";
  } else if (!d.lists().empty()) {
    d.result().resource_lists = d.lists();
    d.result().kind = d.all_plain() ? "plain-sitemap" : "resource-list-only";
    found = true;
  }
  if (!found) {
    // The cause first (why the first thing tried failed), then what else
    // was tried, on one line.
    const auto& trail = d.result().trail;
    std::string message = trail.empty() ? std::string() : trail.front() + "; ";
    const bool named = !trail.empty() && trail.front().find(entry_url) != std::string::npos;
    message += named ? "no Capability List found there" : "no Capability List found from " + entry_url;
    for (size_t i = 1; i < trail.size(); ++i) {
      message += (i == 1 ? " (also tried: " : "; ") + trail[i];
    }
    if (trail.size() > 1) {
      message += ")";
    }
    return make_error(ErrorKind::not_found, message);
  }
  return std::move(d.result());
}

} // namespace tributary::sync

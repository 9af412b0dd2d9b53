#include "aggregator/cli/explore.h"

#include "aggregator/cli/document_json.h"
#include "aggregator/cli/inspect.h"
#include "common/text.h"
#include "common/url_resolve.h"
#include "resourcesync/reader.h"
#include "sync_engine/discovery.h"
#include "sync_engine/net_policy.h"

#include <filesystem>
#include <map>
#include <memory>
#include <ostream>
#include <set>

namespace tributary::agg {

namespace {

constexpr int k_max_depth = 8;
constexpr size_t k_diagnostics_shown = 5; // per document, in the tree

// A notification channel a Capability List offers (shown, not followed).
struct Channel {
  std::string capability;
  std::string topic;
  std::string hub;
};

// A document to read, as its parent named it.
struct Child {
  std::string url;
  std::string expected; // the capability the parent said it has
};

// What was learnt of one document.
struct Node {
  std::string url;
  std::string expected;
  int depth = 0;
  std::string problem; // unreachable, refused, or not what the parent said
  bool read = false;
  std::optional<rs::DocumentHeader> header;
  rs::ReadSummary summary;
  size_t changes[3] = {0, 0, 0};
  std::optional<rs::Timestamp> first, last; // change times (or lastmod) seen
  size_t packages = 0;
  std::vector<Channel> channels;
  std::vector<Child> children;

  std::string capability() const {
    return header && header->md && header->md->capability ? *header->md->capability : std::string();
  }
  bool sound() const { return read && problem.empty() && summary.valid(); }
};

// What a capability's entries are, when they are documents of their own.
std::string child_capability(const std::string& archive) {
  static const std::map<std::string, std::string> k_of = {{"resourcelist-archive", "resourcelist"},
                                                          {"changelist-archive", "changelist"},
                                                          {"resourcedump-archive", "resourcedump"},
                                                          {"changedump-archive", "changedump"}};
  auto it = k_of.find(archive);
  return it == k_of.end() ? std::string() : it->second;
}

bool is_followed_capability(const std::string& c) {
  static const std::set<std::string> k_followed = {"resourcelist",         "changelist",
                                                   "resourcedump",         "changedump",
                                                   "resourcelist-archive", "changelist-archive",
                                                   "resourcedump-archive", "changedump-archive",
                                                   "capabilitylist",       "description"};
  return k_followed.count(c) > 0;
}

// Reads a document's entries into a Node: counts, times, and the documents
// it leads to.
class ExploreHandler : public rs::DocumentHandler {
public:
  explicit ExploreHandler(Node& node) : m_node(node) {}

  void on_header(const rs::DocumentHeader& h) override { m_node.header = h; }

  void on_entry(rs::Entry&& e, uint64_t) override { take(e); }
  void on_rejected_entry(rs::Entry&& e, uint64_t, const std::string&) override { take(e); }

private:
  void take(const rs::Entry& e) {
    if (auto c = e.change()) {
      ++m_node.changes[static_cast<size_t>(*c)];
    }
    if (auto t = e.change_time()) {
      m_node.first = m_node.first ? std::min(*m_node.first, *t) : *t;
      m_node.last = m_node.last ? std::max(*m_node.last, *t) : *t;
    }
    if (e.loc.empty() || !m_node.header) {
      return;
    }
    const std::string cap = m_node.capability();
    const std::string entry_cap = e.md && e.md->capability ? *e.md->capability : std::string();
    if (m_node.header->root == rs::RootElement::sitemapindex) {
      m_node.children.push_back({e.loc, cap}); // the index's parts
    } else if (cap == "description") {
      m_node.children.push_back({e.loc, entry_cap.empty() ? "capabilitylist" : entry_cap});
    } else if (cap == "capabilitylist") {
      if (entry_cap == "changelist-notification" || entry_cap == "framework-notification") {
        Channel ch{entry_cap, e.loc, {}};
        for (const auto& l : e.links) {
          if (l.rel == "hub") {
            ch.hub = l.href;
          }
        }
        m_node.channels.push_back(std::move(ch));
      } else if (is_followed_capability(entry_cap)) {
        m_node.children.push_back({e.loc, entry_cap});
      }
    } else if (auto inner = child_capability(cap); !inner.empty()) {
      m_node.children.push_back({e.loc, inner});
    } else if (cap == "resourcedump" || cap == "changedump") {
      ++m_node.packages; // a ZIP: not downloaded; its manifest copy is read
      for (const auto& l : e.links) {
        if (l.rel == "contents") {
          m_node.children.push_back({l.href, cap + "-manifest"});
        }
      }
    }
  }

  Node& m_node;
};

// By its scheme, case-insensitively as every URL's scheme is (RFC 3986
// 3.1): "FILE:///etc/passwd" in a remote document once passed for remote
// and was read.
bool is_file(const std::string& url) { return to_lower(std::string_view(url).substr(0, 5)) == "file:"; }

class Explorer {
public:
  Explorer(const ExploreOptions& o, sync::Fetcher& f)
      : m_options(o), m_fetcher(f), m_fetch_options(explore_fetch_options(o)) {}

  void walk(const std::string& url, const std::string& expected, int depth, const std::string& parent) {
    if (m_nodes.size() >= m_options.max_documents) {
      m_limited = true;
      return;
    }
    if (!m_seen.insert(url).second) {
      return; // reached before (an index naming itself, a loop)
    }
    m_nodes.push_back(Node{});
    const size_t i = m_nodes.size() - 1;
    m_nodes[i].url = url;
    m_nodes[i].expected = expected;
    m_nodes[i].depth = depth;
    read(m_nodes[i], parent);
    std::vector<Child> children = m_nodes[i].children;
    if (depth + 1 > k_max_depth) {
      if (!children.empty()) {
        m_nodes[i].problem = "deeper than " + std::to_string(k_max_depth) + " levels: not followed";
      }
      return;
    }
    for (const auto& c : children) {
      auto abs = resolve_reference(url, c.url);
      if (!abs) {
        m_nodes[i].problem = "entry " + c.url + " is not a URL";
        continue;
      }
      walk(*abs, c.expected, depth + 1, url);
    }
  }

  const std::vector<Node>& nodes() const { return m_nodes; }
  bool limited() const { return m_limited; }

private:
  std::string mapped(const std::string& url) const {
    for (const auto& [prefix, to] : m_options.map) {
      if (url.compare(0, prefix.size(), prefix) == 0) {
        return target_url(to) + url.substr(prefix.size());
      }
    }
    return url;
  }

  void read(Node& n, const std::string& parent) {
    // Where the documents are read from (after --map, which the operator
    // gives) decides: a remote one never leads to a local file.
    const std::string from = mapped(n.url);
    if (!parent.empty() && is_file(mapped(parent)) != is_file(from)) {
      n.problem = "refused: " + std::string(is_file(mapped(parent)) ? "a file" : "a remote document") +
                  " links to " + (is_file(from) ? "a local file" : "a remote URL");
      return;
    }
    rs::ReaderOptions ro;
    ro.base_url = n.url; // relative references stay in the document's own space (then --map applies)
    rs::Reader reader(handler_for(n), ro);
    auto fetched = m_fetcher.fetch(from, m_fetch_options, [&](const char* data, size_t size) {
      return reader.feed(data, size);
    });
    if (!fetched) {
      n.problem = "unreachable: " + fetched.error().message;
      return;
    }
    if (fetched->status < 200 || fetched->status > 299) {
      n.problem = "unreachable: HTTP " + std::to_string(fetched->status);
      return;
    }
    n.summary = reader.finish();
    n.read = true;
    if (!n.header && n.summary.header) {
      n.header = n.summary.header;
    }
    const std::string cap = n.capability();
    if (!n.expected.empty() && cap != n.expected) {
      n.problem = "its parent names a " + n.expected + ", it says " + (cap.empty() ? "no capability" : cap);
    }
  }

  rs::DocumentHandler& handler_for(Node& n) {
    m_handler = std::make_unique<ExploreHandler>(n);
    return *m_handler;
  }

  const ExploreOptions& m_options;
  sync::Fetcher& m_fetcher;
  sync::FetchOptions m_fetch_options;
  std::vector<Node> m_nodes;
  std::set<std::string> m_seen;
  std::unique_ptr<ExploreHandler> m_handler;
  bool m_limited = false;
};

std::string entries_text(const Node& n) {
  std::string s = std::to_string(n.summary.entries) + (n.summary.entries == 1 ? " entry" : " entries");
  if (n.changes[0] + n.changes[1] + n.changes[2] > 0) {
    s += " (created " + std::to_string(n.changes[0]) + ", updated " + std::to_string(n.changes[1]) +
         ", deleted " + std::to_string(n.changes[2]) + ")";
  }
  if (n.packages > 0) {
    s += ", " + std::to_string(n.packages) + (n.packages == 1 ? " package" : " packages");
  }
  return s;
}

std::string times_text(const Node& n) {
  std::string s;
  if (n.header && n.header->md) {
    const auto& md = *n.header->md;
    const std::pair<const char*, const std::optional<rs::Timestamp>*> times[] = {
        {"at", &md.at}, {"completed", &md.completed}, {"from", &md.from}, {"until", &md.until}};
    for (const auto& [label, t] : times) {
      if (*t) {
        s += std::string("  ") + label + " " + rs::format_w3c_datetime(**t);
      }
    }
  }
  if (n.first && n.changes[0] + n.changes[1] + n.changes[2] > 0) {
    s += "  changes " + rs::format_w3c_datetime(*n.first) + " .. " + rs::format_w3c_datetime(*n.last);
  }
  return s;
}

void print_tree(std::ostream& out, const Explorer& x) {
  for (const auto& n : x.nodes()) {
    const std::string indent(static_cast<size_t>(2 * n.depth), ' ');
    std::string cap = n.read ? n.capability() : n.expected;
    if (n.read && n.header && n.header->root == rs::RootElement::sitemapindex) {
      cap += " index";
    }
    if (n.read && n.header && n.header->plain_sitemap) {
      cap += " (plain sitemap)";
    }
    out << indent << (cap.empty() ? "?" : cap) << "  " << n.url;
    if (n.read) {
      out << "  " << entries_text(n) << times_text(n);
      out << "  [" << (n.summary.valid() ? "valid" : "INVALID");
      if (n.summary.dropped_values > 0) {
        out << ", " << n.summary.dropped_values << " unusable value(s) dropped";
      }
      if (n.summary.warnings > 0) {
        out << ", " << n.summary.warnings << (n.summary.warnings == 1 ? " warning" : " warnings");
      }
      if (n.summary.errors > 0) {
        out << ", " << n.summary.errors << (n.summary.errors == 1 ? " error" : " errors");
      }
      out << "]";
    }
    out << '\n';
    if (!n.problem.empty()) {
      out << indent << "  error: " << n.problem << '\n';
    }
    size_t shown = 0;
    for (const auto& d : n.summary.diagnostics) {
      if (shown++ == k_diagnostics_shown) {
        out << indent << "  (" << (n.summary.diagnostics.size() - k_diagnostics_shown) << " more)\n";
        break;
      }
      out << indent << "  " << (d.severity == rs::Severity::error ? "error" : "warning") << " line " << d.line
          << ": " << d.message << '\n';
    }
    for (const auto& c : n.channels) {
      out << indent << "  " << c.capability << "  topic " << c.topic << "  hub "
          << (c.hub.empty() ? "(none named)" : c.hub) << "  (not followed)\n";
    }
  }
}

struct Totals {
  size_t valid = 0, invalid = 0, unreachable = 0;
  uint64_t entries = 0, warnings = 0, errors = 0;
};

Totals totals(const Explorer& x) {
  Totals t;
  for (const auto& n : x.nodes()) {
    if (!n.read) {
      ++t.unreachable;
      continue;
    }
    (n.sound() ? t.valid : t.invalid) += 1;
    t.entries += n.summary.entries;
    t.warnings += n.summary.warnings;
    t.errors += n.summary.errors;
  }
  return t;
}

nlohmann::json to_json_tree(const Explorer& x, const Totals& t) {
  nlohmann::json docs = nlohmann::json::array();
  for (const auto& n : x.nodes()) {
    nlohmann::json d;
    d["url"] = n.url;
    d["depth"] = n.depth;
    d["expected"] = n.expected.empty() ? nlohmann::json() : nlohmann::json(n.expected);
    d["read"] = n.read;
    d["problem"] = n.problem.empty() ? nlohmann::json() : nlohmann::json(n.problem);
    d["root"] = n.header ? nlohmann::json(std::string(rs::to_string(n.header->root))) : nlohmann::json();
    d["capability"] = n.read && !n.capability().empty() ? nlohmann::json(n.capability()) : nlohmann::json();
    d["md"] = n.header && n.header->md ? to_json(*n.header->md) : nlohmann::json::object();
    d["entries"] = n.summary.entries;
    d["changes"] = {{"created", n.changes[0]}, {"updated", n.changes[1]}, {"deleted", n.changes[2]}};
    d["first_change"] = n.first ? nlohmann::json(rs::format_w3c_datetime(*n.first)) : nlohmann::json();
    d["last_change"] = n.last ? nlohmann::json(rs::format_w3c_datetime(*n.last)) : nlohmann::json();
    d["packages"] = n.packages;
    d["valid"] = n.sound();
    d["warnings"] = nlohmann::json::array();
    d["errors"] = nlohmann::json::array();
    for (const auto& diag : n.summary.diagnostics) {
      d[diag.severity == rs::Severity::error ? "errors" : "warnings"].push_back(to_json(diag));
    }
    d["channels"] = nlohmann::json::array();
    for (const auto& c : n.channels) {
      d["channels"].push_back({{"capability", c.capability}, {"topic", c.topic},
                               {"hub", c.hub.empty() ? nlohmann::json() : nlohmann::json(c.hub)}});
    }
    docs.push_back(std::move(d));
  }
  return {{"documents", docs},
          {"summary",
           {{"documents", x.nodes().size()},
            {"valid", t.valid},
            {"invalid", t.invalid},
            {"unreachable", t.unreachable},
            {"entries", t.entries},
            {"warnings", t.warnings},
            {"errors", t.errors},
            {"limit_reached", x.limited()}}}};
}

// An http(s) URL naming no document: the Source's well-known description.
std::string entry_point(const std::string& target) {
  std::string url = target_url(target);
  const auto scheme_end = url.find("://");
  if (is_file(url) || scheme_end == std::string::npos) {
    return url;
  }
  const auto path = url.find('/', scheme_end + 3);
  if (path == std::string::npos) {
    return url + "/.well-known/resourcesync";
  }
  if (path == url.size() - 1) {
    return url + ".well-known/resourcesync";
  }
  return url;
}

} // namespace

// What every request of explore may reach, as a source's may: public
// addresses, plus those of the hosts the operator named (the entry point,
// --map targets), checked on the resolved address at every redirect hop. A
// remote Capability List once made explore GET loopback and private
// addresses, then read an internal document's own entries (#35).
sync::FetchOptions explore_fetch_options(const ExploreOptions& o) {
  std::set<std::string> permitted;
  auto permit = [&](const std::string& target) {
    if (auto u = sync::parse_url(target_url(target)); u && (u->scheme == "http" || u->scheme == "https")) {
      for (const auto& a : sync::resolve_host(u->host)) {
        permitted.insert(a);
      }
    }
  };
  permit(o.target);
  for (const auto& [prefix, to] : o.map) {
    permit(to);
  }
  sync::FetchOptions f;
  f.addresses = std::make_shared<const sync::AddressPolicy>(std::move(permitted));
  return f;
}

int run_explore(const ExploreOptions& options, sync::Fetcher& fetcher, std::ostream& out, std::ostream& err) {
  if (options.kind == "oai-pmh") {
    return run_explore_oai(options, fetcher, out, err);
  }
  if (options.kind == "iiif-discovery") {
    return run_explore_iiif(options, fetcher, out, err);
  }
  const std::string start = entry_point(options.target);
  auto explorer = std::make_unique<Explorer>(options, fetcher);
  explorer->walk(start, {}, 0, {});
  if ((explorer->nodes().empty() || !explorer->nodes().front().read) && start != target_url(options.target)) {
    // No Source Description at the origin: what a repository that publishes
    // plain sitemaps offers instead, as a source's discovery looks for it.
    const std::string origin = start.substr(0, start.find("/.well-known/"));
    auto robots = sync::fetch_robots(fetcher, origin + "/robots.txt", explore_fetch_options(options));
    std::vector<std::string> maps;
    if (robots) {
      maps = sync::robots_sitemaps(*robots, origin + "/robots.txt");
    }
    if (maps.empty()) {
      maps.push_back(origin + "/sitemap.xml");
    }
    auto sitemaps = std::make_unique<Explorer>(options, fetcher);
    for (const auto& m : maps) {
      sitemaps->walk(m, "resourcelist", 0, {});
    }
    if (!sitemaps->nodes().empty() && sitemaps->nodes().front().read) {
      err << "tributary explore: no Source Description at " << start << " ("
          << explorer->nodes().front().problem << "); read the sitemaps "
          << (robots && !robots->empty() ? "robots.txt names" : "at /sitemap.xml") << '\n';
      explorer = std::move(sitemaps);
    }
  }
  const Explorer& x = *explorer;
  const auto& nodes = x.nodes();
  if (nodes.empty() || !nodes.front().read) {
    // The cause first, then the document once (as the runs and the CLI say it).
    err << "tributary explore: " << (nodes.empty() ? std::string("not read") : nodes.front().problem) << " (" << start
        << ")\n";
    return 2;
  }
  const Totals t = totals(x);
  if (options.json) {
    out << to_json_tree(x, t).dump(2) << '\n';
  } else {
    print_tree(out, x);
    out << "explored " << nodes.size() << " documents: " << t.valid << " valid, " << t.invalid << " invalid, "
        << t.unreachable << " unreachable; " << t.entries << " entries, " << t.warnings << " warnings, "
        << t.errors << " errors";
    if (x.limited()) {
      out << "; stopped at --max-documents " << options.max_documents;
    }
    out << '\n';
  }
  return t.invalid + t.unreachable == 0 && !x.limited() ? 0 : 1;
}

} // namespace tributary::agg

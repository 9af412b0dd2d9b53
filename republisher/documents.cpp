#include "republisher/documents.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <map>

namespace tributary::pub {

rs::Timestamp now() {
  return std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
}

rs::Link link(std::string rel, std::string href) {
  rs::Link l;
  l.rel = std::move(rel);
  l.href = std::move(href);
  return l;
}

rs::Document capability_document(const char* capability) {
  rs::Document d;
  d.header.md = rs::Metadata{};
  d.header.md->capability = capability;
  return d;
}

namespace {

rs::Entry capability_entry(std::string loc, const char* capability) {
  rs::Entry e;
  e.loc = std::move(loc);
  e.md = rs::Metadata{};
  e.md->capability = capability;
  return e;
}

// Whether the set holds a live resource (asked only for describedby and
// describes links, which are rare).

} // namespace

std::function<bool(const std::string&)> held_in(store::StoreReader& reader, const PublishedSet& set) {
  return [&reader, &set](const std::string& uri) {
    for (int64_t f : set.feeds) {
      auto r = reader.resource(f, uri);
      if (r && *r && (*r)->state == store::ResourceState::live) {
        return true;
      }
    }
    return false;
  };
}

std::vector<PublishedSet> published_sets(const std::vector<store::FeedInfo>& feeds,
                                         const std::vector<NamedSet>& named) {
  std::vector<PublishedSet> out = default_sets(feeds);
  for (const auto& n : named) {
    bool taken = false;
    for (const auto& s : out) {
      taken = taken || s.name == n.name;
    }
    if (taken) {
      continue;
    }
    PublishedSet s;
    s.name = n.name;
    for (const auto& f : feeds) {
      if (std::find(n.sources.begin(), n.sources.end(), f.source_name) != n.sources.end()) {
        s.feeds.push_back(f.feed_id);
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<PublishedSet> default_sets(const std::vector<store::FeedInfo>& feeds) {
  std::vector<PublishedSet> out;
  std::map<std::string, int> seen;
  for (const auto& f : feeds) {
    const int n = ++seen[f.source_name];
    PublishedSet s;
    s.name = n == 1 ? f.source_name : f.source_name + "-" + std::to_string(n);
    s.feeds = {f.feed_id};
    out.push_back(std::move(s));
  }
  return out;
}

rs::Entry resource_entry(const UrlScheme& urls, const std::string& set, const store::ResourceRecord& r,
                         const std::function<bool(const std::string& uri)>& held) {
  rs::Entry e;
  e.loc = urls.resource(set, r.uri);
  e.lastmod = r.lastmod;
  e.md = rs::Metadata{};
  e.md->hash = r.hashes;
  e.md->length = r.length;
  e.md->type = r.type;
  e.md->encoding = r.encoding;

  const rs::Link* upstream_via = nullptr;
  std::vector<const rs::Link*> mirrors;
  for (const auto& l : r.links) {
    if (l.rel == "via" && !upstream_via) {
      upstream_via = &l;
    } else if (l.rel == "duplicate") {
      mirrors.push_back(&l);
    }
  }
  if (upstream_via) {
    e.links.push_back(*upstream_via); // the original, not the intermediary
  } else {
    rs::Link via = link("via", r.uri);
    via.modified = r.lastmod;
    via.hash = r.hashes;
    via.length = r.length;
    via.type = r.type;
    e.links.push_back(std::move(via));
  }
  // After our copy (loc): where we synced it from, then the upstream's own
  // mirrors in their relative order.
  std::stable_sort(mirrors.begin(), mirrors.end(),
                   [](const rs::Link* a, const rs::Link* b) { return a->effective_pri() < b->effective_pri(); });
  uint32_t pri = 1;
  // The URI we synced it from serves these bytes, unless they came inline
  // (an OAI-PMH record's metadata: its URI answers with an envelope).
  if (!r.fetched_from || r.fetched_from->rfind(store::k_inline_prefix, 0) != 0) {
    rs::Link from = link("duplicate", r.uri);
    from.pri = pri++;
    e.links.push_back(std::move(from));
  }
  for (const auto* m : mirrors) {
    if (m->href == r.uri) {
      continue;
    }
    rs::Link d = link("duplicate", m->href);
    d.pri = pri++;
    e.links.push_back(std::move(d));
  }
  for (const auto& l : r.links) {
    if (l.rel == "via" || l.rel == "duplicate" || l.rel == "collection" || l.rel == "canonical") {
      continue;
    }
    rs::Link copy = l;
    if ((l.rel == "describedby" || l.rel == "describes") && held && held(l.href)) {
      copy.href = urls.resource(set, l.href); // both ends are ours: point at our copy
    }
    e.links.push_back(std::move(copy));
  }
  return e;
}

std::string render_api_catalog(const UrlScheme& urls, bool oai, const std::vector<PublishedSet>& sets) {
  // Our own URLs only: JSON strings that need no escaping but '"' and '\\',
  // which a URL built by UrlScheme percent-encodes.
  std::string out = "{\"linkset\":[{\"anchor\":\"" + urls.api_catalog() + "\",\"item\":[";
  out += "{\"href\":\"" + urls.source_description() +
         "\",\"type\":\"application/xml\",\"title\":\"ResourceSync Source Description\"}";
  if (oai) {
    out += ",{\"href\":\"" + urls.oai() + "\",\"type\":\"text/xml\",\"title\":\"OAI-PMH 2.0 data provider\"}";
  }
  const std::string stream = "\",\"type\":\"application/ld+json\",\"profile\":\"http://iiif.io/api/discovery/1/\"";
  out += ",{\"href\":\"" + urls.activity_collection("") + stream +
         ",\"title\":\"IIIF Change Discovery 1.0: everything\"}";
  for (const auto& s : sets) {
    out += ",{\"href\":" + nlohmann::json(urls.activity_collection(s.name)).dump() + stream.substr(1) +
           ",\"title\":" + nlohmann::json("IIIF Change Discovery 1.0: set " + s.name).dump() + "}";
  }
  out += "]}]}\n";
  return out;
}

std::string render_source_description(const UrlScheme& urls, const std::vector<PublishedSet>& sets, bool oai) {
  rs::Document d = capability_document("description");
  // The same aggregate in the other protocols we serve, and the catalog of
  // them all (RFC 9727).
  rs::Link catalog = link("api-catalog", urls.api_catalog());
  catalog.type = "application/linkset+json";
  d.header.links.push_back(std::move(catalog));
  if (oai) {
    rs::Link l = link("alternate", urls.oai());
    l.type = "text/xml";
    d.header.links.push_back(std::move(l));
  }
  rs::Link stream = link("alternate", urls.activity_collection(""));
  stream.type = "application/ld+json";
  d.header.links.push_back(std::move(stream));
  for (const auto& s : sets) {
    d.entries.push_back(capability_entry(urls.capability_list(s.name), "capabilitylist"));
  }
  return rs::write_document(d);
}

std::string render_capability_list(const UrlScheme& urls, const PublishedSet& set, bool resource_dump,
                                   bool change_dump, const std::string& hub, bool archives,
                                   bool change_dump_archive) {
  rs::Document d = capability_document("capabilitylist");
  d.header.links.push_back(link("up", urls.source_description()));
  d.entries.push_back(capability_entry(urls.resource_list(set.name), "resourcelist"));
  if (resource_dump) {
    d.entries.push_back(capability_entry(urls.resource_dump(set.name), "resourcedump"));
  }
  d.entries.push_back(capability_entry(urls.change_list(set.name), "changelist"));
  if (change_dump) {
    d.entries.push_back(capability_entry(urls.change_dump(set.name), "changedump"));
  }
  if (archives) {
    d.entries.push_back(capability_entry(urls.resource_list_archive(set.name), "resourcelist-archive"));
    d.entries.push_back(capability_entry(urls.change_list_archive(set.name), "changelist-archive"));
    if (change_dump_archive) {
      d.entries.push_back(capability_entry(urls.change_dump_archive(set.name), "changedump-archive"));
    }
  }
  if (!hub.empty()) {
    rs::Entry e = capability_entry(urls.change_notification(set.name), "changelist-notification");
    e.links.push_back(link("hub", hub));
    d.entries.push_back(std::move(e));
    rs::Entry f = capability_entry(urls.framework_notification(set.name), "framework-notification");
    f.links.push_back(link("hub", hub));
    d.entries.push_back(std::move(f));
  }
  return rs::write_document(d);
}

rs::Entry list_entry(const ArchivedList& l) {
  rs::Entry e;
  e.loc = l.url;
  e.md = rs::Metadata{};
  e.md->from = l.from;
  e.md->until = l.until;
  e.md->at = l.at;
  e.md->completed = l.completed;
  return e;
}

std::string render_archive(const UrlScheme& urls, const std::string& set, const char* capability,
                           const std::vector<ArchivedList>& lists) {
  rs::Document d = capability_document(capability);
  d.header.links.push_back(link("up", urls.capability_list(set)));
  for (const auto& l : lists) {
    d.entries.push_back(list_entry(l));
  }
  return rs::write_document(d);
}

Result<std::vector<rs::WrittenPart>> render_resource_list(store::StoreReader& reader, const UrlScheme& urls,
                                                          const PublishedSet& set, rs::Timestamp at,
                                                          const rs::PartitionLimits& limits) {
  rs::DocumentHeader h;
  h.md = rs::Metadata{};
  h.md->capability = "resourcelist";
  h.md->at = at;
  h.links.push_back(link("up", urls.capability_list(set.name)));
  std::vector<rs::WrittenPart> parts;
  rs::PartitionedWriter w(
      h, urls.resource_list(set.name), [&](size_t n) { return urls.resource_list_part(set.name, n); },
      [&](rs::WrittenPart&& p) { parts.push_back(std::move(p)); }, limits);
  const auto held = held_in(reader, set);
  for (int64_t feed : set.feeds) {
    std::string after;
    for (;;) {
      auto page = reader.live_resources(feed, after, 5000);
      if (!page) {
        return tl::unexpected(page.error());
      }
      for (const auto& r : *page) {
        w.add(resource_entry(urls, set.name, r, held));
      }
      if (page->size() < 5000) {
        break;
      }
      after = page->back().uri;
    }
  }
  const rs::Timestamp completed = std::max(at, now());
  w.update_header([&](rs::DocumentHeader& hd) { hd.md->completed = completed; });
  w.finish();
  return parts;
}

rs::Entry change_entry(const UrlScheme& urls, const std::string& set, const store::LoggedChange& c,
                       std::optional<rs::Timestamp> previous, const std::function<bool(const std::string&)>& held) {
  rs::Timestamp t = c.recorded_at;
  if (previous && t <= *previous) {
    t = *previous + std::chrono::microseconds(1);
  }
  rs::Entry e = resource_entry(urls, set, c.resource, held);
  e.md->change = c.change;
  e.md->datetime = t;
  if (c.change == rs::Change::deleted) {
    e.md->hash.clear();
    e.md->length.reset();
    e.md->type.reset();
    e.md->encoding.reset();
  }
  return e;
}

} // namespace tributary::pub

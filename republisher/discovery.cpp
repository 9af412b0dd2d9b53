// The aggregate as IIIF Change Discovery 1.0 streams (#52).
#include "republisher/discovery.h"

#include "republisher/change_lists.h"
#include "republisher/documents.h"
#include "republisher/responses.h"

#include <nlohmann/json.hpp>

#include <map>

namespace tributary::pub {

namespace {

using json = nlohmann::json;

constexpr std::string_view k_context = "http://iiif.io/api/discovery/1/context.json";
constexpr std::string_view k_content_type =
    "application/ld+json;profile=\"http://iiif.io/api/discovery/1/context.json\"";

json ref(const std::string& id, std::string_view type) { return json{{"id", id}, {"type", type}}; }

std::string_view activity_type(rs::Change c) {
  switch (c) {
  case rs::Change::created: return "Create";
  case rs::Change::deleted: return "Delete";
  default: return "Update";
  }
}

// The IIIF type an upstream Change Discovery stream gave the object (kept
// as a `type` link by our harvester), else an ActivityStreams Document.
std::string_view object_type(const store::ResourceRecord& r) {
  for (const auto& l : r.links) {
    if (l.rel != "type") {
      continue;
    }
    const std::string_view href = l.href;
    const bool iiif = href.starts_with("http://iiif.io/api/presentation/") ||
                      href.starts_with("https://iiif.io/api/presentation/");
    if (iiif && href.ends_with("#Manifest")) {
      return "Manifest";
    }
    if (iiif && href.ends_with("#Collection")) {
      return "Collection";
    }
  }
  return "Document";
}

// The original: the upstream's own via when it had one, else the URI we
// synced it from (as our entries' via says).
const std::string& canonical_of(const store::ResourceRecord& r) {
  for (const auto& l : r.links) {
    if (l.rel == "via") {
      return l.href;
    }
  }
  return r.uri;
}

json activity(const UrlScheme& urls, const std::string& set, const store::LoggedChange& c, rs::Timestamp end) {
  json object{{"id", urls.resource(set, c.resource.uri)},
              {"type", object_type(c.resource)},
              {"canonical", canonical_of(c.resource)}};
  return json{{"type", activity_type(c.change)}, {"object", std::move(object)},
              {"endTime", rs::format_w3c_datetime(end)}};
}

std::string collection_json(const std::string& id, const std::string& first, const std::string& last) {
  json c{{"@context", k_context},
         {"id", id},
         {"type", "OrderedCollection"},
         {"first", ref(first, "OrderedCollectionPage")},
         {"last", ref(last, "OrderedCollectionPage")}};
  return c.dump() + "\n";
}

} // namespace

struct ChangeDiscovery::Page {
  bool gone = false;   // compacted by retention
  bool closed = false; // never changes again
  std::string body;
};

ChangeDiscovery::ChangeDiscovery(std::shared_ptr<store::StoreReader> reader, const UrlScheme& urls,
                                 const Shelf& shelf, size_t part_size)
    : m_reader(std::move(reader)), m_urls(urls), m_shelf(shelf),
      m_part_size(std::max<size_t>(1, std::min<size_t>(part_size, rs::k_max_entries))) {}

http::Disposition ChangeDiscovery::serve(const http::Request& req, http::Response& res, const Route& route) {
  if (route.kind == RouteKind::activity_collection) {
    auto body = route.set.empty() ? everything_collection() : set_collection(route.set);
    if (!body) {
      return unavailable(res);
    }
    if (!*body) {
      res.status = 404;
      return http::Disposition::done;
    }
    return serve_document(req, res, cached(std::move(**body), std::string(k_content_type)), true);
  }
  size_t n = 0;
  try {
    n = std::stoull(route.part);
  } catch (const std::exception&) {
    n = 0;
  }
  if (n == 0) {
    res.status = 404;
    return http::Disposition::done;
  }
  auto page = route.set.empty() ? everything_page(n) : set_page(route.set, n);
  if (!page) {
    return unavailable(res);
  }
  if (!*page) {
    res.status = 404;
    return http::Disposition::done;
  }
  if ((*page)->gone) {
    res.status = 410;
    res.set_body("The change log's retention compacted this page's changes.\n", "text/plain; charset=utf-8");
    return http::Disposition::done;
  }
  return serve_document(req, res, cached(std::move((*page)->body), std::string(k_content_type), (*page)->closed),
                        true);
}

auto ChangeDiscovery::set_collection(const std::string& set) -> Result<std::optional<std::string>> {
  const auto view = m_shelf.rendered();
  if (!view->set_feeds->count(set)) {
    return std::optional<std::string>();
  }
  const auto known = view->closed.find(set);
  size_t compacted = 0;
  size_t closed = 0;
  if (known != view->closed.end()) {
    compacted = known->second->compacted;
    closed = known->second->parts.size();
  }
  return std::optional<std::string>(collection_json(m_urls.activity_collection(set),
                                                    m_urls.activity_page(set, compacted + 1),
                                                    m_urls.activity_page(set, compacted + closed + 1)));
}

auto ChangeDiscovery::set_page(const std::string& set, size_t n) -> Result<std::optional<Page>> {
  const auto view = m_shelf.rendered();
  const auto feeds = view->set_feeds->find(set);
  if (feeds == view->set_feeds->end()) {
    return std::optional<Page>();
  }
  std::shared_ptr<const ClosedParts> known;
  if (auto k = view->closed.find(set); k != view->closed.end()) {
    known = k->second;
  }
  const size_t compacted = known ? known->compacted : 0;
  const size_t closed = known ? known->parts.size() : 0;
  if (n <= compacted) {
    Page p;
    p.gone = true;
    return std::optional<Page>(std::move(p));
  }
  const size_t i = n - compacted - 1; // the part's place among those kept
  if (i > closed) {
    return std::optional<Page>();
  }
  // Where the part starts, and the time its first entry is nudged past, as
  // render_change_list does.
  int64_t after = known ? known->compacted_seq : 0;
  std::optional<rs::Timestamp> previous = known ? known->compacted_until : std::nullopt;
  if (i > 0) {
    after = known->parts[i - 1].last_seq;
    previous = known->parts[i - 1].until;
  }
  auto changes = m_reader->changes(feeds->second, after, m_part_size);
  if (!changes) {
    return tl::unexpected(changes.error());
  }
  Page p;
  p.closed = i < closed;
  json items = json::array();
  bool nudged = previous.has_value();
  rs::Timestamp last = previous.value_or(rs::Timestamp{});
  for (const auto& c : *changes) {
    rs::Timestamp t = c.recorded_at;
    if (nudged && t <= last) {
      t = last + std::chrono::microseconds(1);
    }
    last = t;
    nudged = true;
    items.push_back(activity(m_urls, set, c, t));
  }
  json page{{"@context", k_context},
            {"id", m_urls.activity_page(set, n)},
            {"type", "OrderedCollectionPage"},
            {"partOf", ref(m_urls.activity_collection(set), "OrderedCollection")},
            {"startIndex", (n - 1) * m_part_size}};
  if (n > compacted + 1) {
    page["prev"] = ref(m_urls.activity_page(set, n - 1), "OrderedCollectionPage");
  }
  if (p.closed) {
    page["next"] = ref(m_urls.activity_page(set, n + 1), "OrderedCollectionPage");
  }
  page["orderedItems"] = std::move(items);
  p.body = page.dump() + "\n";
  return std::optional<Page>(std::move(p));
}

auto ChangeDiscovery::everything() -> Result<Everything> {
  auto last = m_reader->last_seq();
  if (!last) {
    return tl::unexpected(last.error());
  }
  auto feeds = m_reader->feeds();
  if (!feeds) {
    return tl::unexpected(feeds.error());
  }
  Everything e;
  for (const auto& s : default_sets(*feeds)) {
    for (int64_t f : s.feeds) {
      e.feeds.push_back(f);
      e.source_set[f] = s.name;
    }
  }
  auto oldest = m_reader->changes(e.feeds, 0, 1);
  if (!oldest) {
    return tl::unexpected(oldest.error());
  }
  const auto page_of = [](int64_t seq) {
    return std::max<size_t>(1, (static_cast<size_t>(seq) + k_everything_page - 1) / k_everything_page);
  };
  e.last_seq = *last;
  e.last_page = page_of(*last);
  e.first_page = oldest->empty() ? e.last_page : std::min(e.last_page, page_of(oldest->front().seq));
  return e;
}

auto ChangeDiscovery::everything_collection() -> Result<std::optional<std::string>> {
  auto e = everything();
  if (!e) {
    return tl::unexpected(e.error());
  }
  return std::optional<std::string>(collection_json(m_urls.activity_collection(""),
                                                    m_urls.activity_page("", e->first_page),
                                                    m_urls.activity_page("", e->last_page)));
}

auto ChangeDiscovery::everything_page(size_t n) -> Result<std::optional<Page>> {
  auto e = everything();
  if (!e) {
    return tl::unexpected(e.error());
  }
  if (n > e->last_page) {
    return std::optional<Page>();
  }
  if (n < e->first_page) {
    Page p;
    p.gone = true; // below the first page kept
    return std::optional<Page>(std::move(p));
  }
  const auto start = static_cast<int64_t>((n - 1) * k_everything_page);
  const auto end = static_cast<int64_t>(n * k_everything_page);
  auto changes = m_reader->changes(e->feeds, start, k_everything_page);
  if (!changes) {
    return tl::unexpected(changes.error());
  }
  Page p;
  p.closed = e->last_seq >= end; // seq order is commit order: nothing more lands here
  json items = json::array();
  for (const auto& c : *changes) {
    if (c.seq > end) {
      break;
    }
    items.push_back(activity(m_urls, e->source_set[c.feed_id], c, c.recorded_at));
  }
  json page{{"@context", k_context},
            {"id", m_urls.activity_page("", n)},
            {"type", "OrderedCollectionPage"},
            {"partOf", ref(m_urls.activity_collection(""), "OrderedCollection")}};
  if (n > 1) {
    page["prev"] = ref(m_urls.activity_page("", n - 1), "OrderedCollectionPage");
  }
  if (p.closed) {
    page["next"] = ref(m_urls.activity_page("", n + 1), "OrderedCollectionPage");
  }
  page["orderedItems"] = std::move(items);
  p.body = page.dump() + "\n";
  return std::optional<Page>(std::move(p));
}

} // namespace tributary::pub

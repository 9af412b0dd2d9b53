// An IIIF Change Discovery 1.0 stream followed as a Source (#36): its
// activities become the changes the engine already applies.
//
// Each run starts at the stream's `last` page and walks `prev` until an
// activity ends before the watermark, then applies what it read oldest
// first: Create and Update fetch the object (a Manifest or Collection, as
// JSON), Delete and Remove delete it, Move deletes its object and creates
// its target. Walking back, the newest activity of an object decides it,
// and past a Refresh only deletions are taken (the Refresh's listing holds
// everything older). A stream whose activities carry no endTime (Level 0)
// is a full listing: a baseline of what it lists, deleting the rest through
// the mass-deletion guard.
//
// The watermark is the endTime of the newest activity applied. Activities
// at exactly that time are read again next run (a page may grow while it is
// read): applying one again is a no-op (same bytes, or deleted already), so
// nothing is lost and nothing is logged twice.
#include "sync_engine/iiif/harvest.h"

#include "sync_engine/iiif/change_discovery.h"
#include "sync_engine/feed_writer.h"
#include "sync_engine/run_context.h"

#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace tributary::sync {

namespace {

constexpr uint64_t k_max_page_bytes = 32ull * 1024 * 1024;
constexpr size_t k_max_pages = 1000000; // a prev chain that loops is cut here

struct Taken {
  std::optional<rs::Timestamp> end_time; // the deciding activity's
  bool deletion = false;
  std::string uri; // the object's (a Move: the origin's, for its deletion; the target's, for its creation)
  std::string type; // the object's IIIF type as the stream gave it ("Manifest"; may be empty)
};

// What a walk keeps of the stream: a decision per object, made as each page
// is read newest first, not the pages (30 pages of 20,000 activities held
// whole cost 483 MB). The newest activity of an object decides it; past a
// Refresh, deletions only. For a Level 0 stream, whether each object is
// listed live.
class Decisions {
public:
  // A page's activities, in stream order, read after every newer page.
  // `applied_before`: what an earlier run applied (nothing on a full read).
  void add_page(const std::vector<iiif::Activity>& items, std::optional<rs::Timestamp> applied_before) {
    for (auto it = items.rbegin(); it != items.rend(); ++it) {
      const iiif::Activity& a = *it;
      level0 = level0 || !a.end_time;
      if (a.type == "Refresh") {
        refreshed = true;
        continue;
      }
      // Level 0: listed live unless its newest activity removes it.
      const bool gone = a.type == "Delete" || a.type == "Remove" || a.type == "Move";
      listed(a.object, !gone);
      if (a.type == "Move") {
        listed(a.target, true);
      }
      if (applied_before && a.end_time && *a.end_time < *applied_before) {
        continue; // applied by an earlier run
      }
      if (a.type == "Move") {
        if (decide(a.target) && !refreshed) {
          m_out.push_back({a.end_time, false, a.target, a.object_type});
        }
        if (decide(a.object)) {
          m_out.push_back({a.end_time, true, a.object, a.object_type});
        }
        continue;
      }
      if (!decide(a.object)) {
        continue; // a newer activity decided it
      }
      if (gone) {
        m_out.push_back({a.end_time, true, a.object, a.object_type});
      } else if (!refreshed) {
        m_out.push_back({a.end_time, false, a.object, a.object_type});
      }
    }
  }

  // Oldest first.
  std::vector<Taken> taken() {
    std::reverse(m_out.begin(), m_out.end());
    return std::move(m_out);
  }

  // Level 0: every object listed live.
  std::vector<std::string> live() const {
    std::vector<std::string> out;
    for (const auto& [uri, flags] : m_seen) {
      if (flags & k_live) {
        out.push_back(uri);
      }
    }
    return out;
  }

  bool level0 = false;
  bool refreshed = false;

private:
  static constexpr uint8_t k_decided = 1, k_listed = 2, k_live = 4;
  bool decide(const std::string& uri) {
    uint8_t& f = m_seen[uri];
    const bool first = !(f & k_decided);
    f |= k_decided;
    return first;
  }
  void listed(const std::string& uri, bool live) {
    uint8_t& f = m_seen[uri];
    if (!(f & k_listed)) {
      f |= k_listed | (live ? k_live : 0);
    }
  }
  std::unordered_map<std::string, uint8_t> m_seen; // each object once
  std::vector<Taken> m_out;                        // newest first
};

class Follow {
public:
  Follow(RunContext& ctx, int64_t feed) : m_ctx(ctx), m_feed(feed) {}

  Result<void> run() {
    auto body = fetch_body(m_ctx, m_ctx.src().url, k_max_page_bytes);
    if (!body) {
      return tl::unexpected(body.error());
    }
    auto collection = iiif::parse_collection(*body);
    if (!collection) {
      return make_error(collection.error().kind, m_ctx.src().url + ": " + collection.error().message);
    }
    auto wm = m_ctx.settled_watermark(m_feed);
    if (!wm) {
      return tl::unexpected(wm.error());
    }
    m_w = *wm;
    const bool fresh = !m_w.baseline_at && !m_w.last_time;
    const bool full = m_ctx.opt().mode != store::RunMode::incremental || fresh;
    // A first read (or a baseline) stores what the stream holds: a baseline's.
    std::optional<RunContext::BaselineScope> counted;
    if (fresh || m_ctx.opt().mode == store::RunMode::baseline) {
      counted.emplace(m_ctx);
    }
    // Newest first: from `last` back by `prev`, each page decided as it is
    // read. With no `last` (the spec asks for one), from `first` forward:
    // those pages' activities are kept, then decided newest first.
    std::string url = collection->last.empty() ? collection->first : collection->last;
    const bool backwards = !collection->last.empty();
    const std::optional<rs::Timestamp> applied_before = full ? std::nullopt : m_w.last_time;
    Decisions d;
    std::vector<std::vector<iiif::Activity>> forward;
    std::unordered_set<std::string> visited;
    size_t pages = 0;
    while (!url.empty() && pages < k_max_pages && visited.insert(url).second) {
      auto page_body = fetch_body(m_ctx, url, k_max_page_bytes);
      if (!page_body) {
        return tl::unexpected(page_body.error());
      }
      auto page = iiif::parse_page(*page_body);
      page_body = std::string(); // the page's bytes, freed before the next
      if (!page) {
        return make_error(page.error().kind, url + ": " + page.error().message);
      }
      ++pages;
      for (const auto& w : page->warnings) {
        m_ctx.error(url, w);
      }
      m_ctx.add_total(page->items.size());
      bool older_than_watermark = false;
      bool refresh = false;
      bool level0 = false;
      for (const auto& a : page->items) {
        level0 = level0 || !a.end_time;
        refresh = refresh || a.type == "Refresh";
        older_than_watermark = older_than_watermark || (applied_before && a.end_time && *a.end_time < *applied_before);
      }
      m_ctx.progress(page->id);
      url = backwards ? page->prev : page->next;
      if (!backwards) {
        forward.push_back(std::move(page->items));
        continue;
      }
      d.add_page(page->items, applied_before);
      if (older_than_watermark && !d.level0) {
        break; // the rest is older still
      }
      if (refresh && fresh && !d.level0) {
        // Read from its start with nothing held: past a Refresh only
        // deletions count, and there is nothing to delete.
        m_ctx.note("a first read stops at the stream's newest Refresh: the activities before it are superseded");
        break;
      }
    }
    for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
      d.add_page(*it, applied_before);
    }
    forward.clear();
    if (d.level0) {
      m_ctx.note("a Level 0 stream (activities without endTime): read as a full listing");
      return listing(d.live());
    }
    return changes(d.taken(), full);
  }

private:
  rs::Entry entry_of(const Taken& t, const std::unordered_map<std::string, store::ResourceRecord>& held) {
    rs::Entry e;
    e.loc = t.uri;
    rs::Metadata md;
    md.datetime = t.end_time;
    if (t.deletion) {
      md.change = rs::Change::deleted;
    } else {
      auto h = held.find(t.uri);
      md.change = h != held.end() && h->second.state == store::ResourceState::live ? rs::Change::updated
                                                                                   : rs::Change::created;
      md.type = "application/ld+json";
      if (t.type == "Manifest" || t.type == "Collection") {
        // Kept as a Signposting `type` link, so that our own Change
        // Discovery stream can say what it is (republisher/discovery.h).
        rs::Link l;
        l.rel = "type";
        l.href = "http://iiif.io/api/presentation/3#" + t.type;
        e.links.push_back(std::move(l));
      }
    }
    e.lastmod = t.end_time;
    e.md = std::move(md);
    return e;
  }

  Result<void> changes(const std::vector<Taken>& taken, bool full) {
    const auto now = std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
    for (size_t start = 0; start < taken.size(); start += m_ctx.opt().batch_size) {
      const size_t end = std::min(taken.size(), start + m_ctx.opt().batch_size);
      std::vector<std::string> uris;
      for (size_t i = start; i < end; ++i) {
        uris.push_back(taken[i].uri);
      }
      auto held = m_ctx.held_for(m_feed, uris);
      if (!held) {
        return tl::unexpected(held.error());
      }
      std::vector<PendingChange> batch;
      for (size_t i = start; i < end; ++i) {
        if (taken[i].deletion) {
          auto h = held->find(taken[i].uri);
          if (h == held->end() || h->second.state != store::ResourceState::live) {
            continue; // never held (read from the stream's start): nothing to delete, nothing to log
          }
        }
        PendingChange c{entry_of(taken[i], *held), taken[i].end_time.value_or(now),
                        static_cast<int64_t>(i), true};
        c.selected = m_ctx.src().selects(c.entry.loc, std::nullopt);
        batch.push_back(std::move(c));
      }
      if (batch.empty()) {
        continue;
      }
      if (auto r = change_batch(m_ctx, m_feed, m_ctx.src().url, batch, m_w); !r) {
        return r;
      }
      m_ctx.add_done(batch.size());
    }
    if (full && !m_w.baseline_at) {
      // Read from its start: from now on, what is new since.
      return move_watermark(m_ctx, m_feed, [&](Watermark& w) {
        w.baseline_at = now;
        if (!w.last_time) {
          w.last_time = now; // an empty stream
        }
      });
    }
    return {};
  }

  // A Level 0 stream: what it lists (not deleted) is everything.
  Result<void> listing(const std::vector<std::string>& live) {
    std::vector<rs::Entry> entries;
    for (const auto& uri : live) {
      rs::Entry e;
      e.loc = uri;
      entries.push_back(std::move(e));
    }
    for (size_t start = 0; start < entries.size(); start += m_ctx.opt().batch_size) {
      std::vector<rs::Entry> part(entries.begin() + static_cast<std::ptrdiff_t>(start),
                                  entries.begin() + static_cast<std::ptrdiff_t>(
                                                        std::min(entries.size(), start + m_ctx.opt().batch_size)));
      if (auto r = baseline_batch(m_ctx, m_feed, part); !r) {
        return r;
      }
      m_ctx.add_done(part.size());
    }
    if (auto r = m_ctx.drain(); !r) {
      return r;
    }
    return close_baseline(m_ctx, m_feed,
                          std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now()));
  }

  RunContext& m_ctx;
  int64_t m_feed;
  Watermark m_w;
};

} // namespace

Result<void> sync_iiif_feed(RunContext& ctx, int64_t feed) {
  Follow f(ctx, feed);
  if (auto r = f.run(); !r) {
    return r;
  }
  return retry_failed(ctx, feed); // a Manifest whose fetch failed is fetched again when due
}

} // namespace tributary::sync

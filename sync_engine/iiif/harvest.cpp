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
#include "sync_engine/run_context.h"

#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace tributary::sync {

namespace {

constexpr uint64_t k_max_page_bytes = 32ull * 1024 * 1024;
constexpr size_t k_max_pages = 1000000; // a prev chain that loops is cut here

struct Taken {
  iiif::Activity activity;
  bool deletion = false;
  std::string uri; // the object's (a Move: the origin's, for its deletion; the target's, for its creation)
};

class Follow {
public:
  Follow(RunContext& ctx, int64_t feed) : m_ctx(ctx), m_feed(feed) {}

  Result<void> run() {
    auto body = fetch_body(m_ctx, m_ctx.src.url, k_max_page_bytes);
    if (!body) {
      return tl::unexpected(body.error());
    }
    auto collection = iiif::parse_collection(*body);
    if (!collection) {
      return make_error(collection.error().kind, m_ctx.src.url + ": " + collection.error().message);
    }
    auto wm = m_ctx.settled_watermark(m_feed);
    if (!wm) {
      return tl::unexpected(wm.error());
    }
    m_w = *wm;
    const bool fresh = !m_w.baseline_at && !m_w.last_time;
    const bool full = m_ctx.opt.mode != store::RunMode::incremental || fresh;
    // A first read (or a baseline) stores what the stream holds: a baseline's.
    std::optional<RunContext::BaselineScope> counted;
    if (fresh || m_ctx.opt.mode == store::RunMode::baseline) {
      counted.emplace(m_ctx);
    }
    // Newest first: from `last` back by `prev` (or, with no `last`, from
    // `first` forward, then read in reverse).
    std::vector<iiif::Page> pages;
    std::string url = collection->last.empty() ? collection->first : collection->last;
    const bool backwards = !collection->last.empty();
    std::unordered_set<std::string> visited;
    bool level0 = false;
    while (!url.empty() && pages.size() < k_max_pages && visited.insert(url).second) {
      auto page_body = fetch_body(m_ctx, url, k_max_page_bytes);
      if (!page_body) {
        return tl::unexpected(page_body.error());
      }
      auto page = iiif::parse_page(*page_body);
      if (!page) {
        return make_error(page.error().kind, url + ": " + page.error().message);
      }
      for (const auto& w : page->warnings) {
        m_ctx.error(url, w);
      }
      m_ctx.total += page->items.size();
      bool older_than_watermark = false;
      for (const auto& a : page->items) {
        level0 = level0 || !a.end_time;
        older_than_watermark =
            older_than_watermark || (!full && a.end_time && m_w.last_time && *a.end_time < *m_w.last_time);
      }
      url = backwards ? page->prev : page->next;
      pages.push_back(std::move(*page));
      m_ctx.progress(pages.back().id);
      if (older_than_watermark && backwards && !level0) {
        break; // the rest is older still
      }
    }
    if (!backwards) {
      std::reverse(pages.begin(), pages.end());
    }
    if (level0) {
      m_ctx.note("a Level 0 stream (activities without endTime): read as a full listing");
      return listing(pages);
    }
    return changes(pages, full);
  }

private:
  // Newest first, each object decided by its newest activity; past a
  // Refresh, deletions only.
  std::vector<Taken> decide(const std::vector<iiif::Page>& newest_first, bool full) {
    std::vector<Taken> out;
    std::unordered_set<std::string> decided;
    bool refreshed = false;
    for (const auto& page : newest_first) {
      for (auto it = page.items.rbegin(); it != page.items.rend(); ++it) {
        const iiif::Activity& a = *it;
        if (!full && a.end_time && m_w.last_time && *a.end_time < *m_w.last_time) {
          continue; // applied by an earlier run
        }
        if (a.type == "Refresh") {
          refreshed = true;
          continue;
        }
        if (a.type == "Move") {
          if (decided.insert(a.target).second && !refreshed) {
            out.push_back({a, false, a.target});
          }
          if (decided.insert(a.object).second) {
            out.push_back({a, true, a.object});
          }
          continue;
        }
        if (!decided.insert(a.object).second) {
          continue; // a newer activity decided it
        }
        if (a.type == "Delete" || a.type == "Remove") {
          out.push_back({a, true, a.object});
        } else if (!refreshed) {
          out.push_back({a, false, a.object});
        }
      }
    }
    std::reverse(out.begin(), out.end()); // oldest first
    return out;
  }

  rs::Entry entry_of(const Taken& t, const std::unordered_map<std::string, store::ResourceRecord>& held) {
    rs::Entry e;
    e.loc = t.uri;
    rs::Metadata md;
    md.datetime = t.activity.end_time;
    if (t.deletion) {
      md.change = rs::Change::deleted;
    } else {
      auto h = held.find(t.uri);
      md.change = h != held.end() && h->second.state == store::ResourceState::live ? rs::Change::updated
                                                                                   : rs::Change::created;
      md.type = "application/ld+json";
    }
    e.lastmod = t.activity.end_time;
    e.md = std::move(md);
    return e;
  }

  Result<void> changes(const std::vector<iiif::Page>& pages, bool full) {
    std::vector<Taken> taken = decide(pages, full);
    const auto now = std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
    for (size_t start = 0; start < taken.size(); start += m_ctx.opt.batch_size) {
      const size_t end = std::min(taken.size(), start + m_ctx.opt.batch_size);
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
        PendingChange c{entry_of(taken[i], *held), taken[i].activity.end_time.value_or(now),
                        static_cast<int64_t>(i), true};
        c.selected = m_ctx.src.selects(c.entry.loc, std::nullopt);
        batch.push_back(std::move(c));
      }
      if (batch.empty()) {
        continue;
      }
      if (auto r = change_batch(m_ctx, m_feed, m_ctx.src.url, batch, m_w); !r) {
        return r;
      }
      m_ctx.done += batch.size();
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
  Result<void> listing(const std::vector<iiif::Page>& newest_first) {
    std::unordered_map<std::string, bool> live; // object -> listed live
    for (const auto& page : newest_first) {
      for (auto it = page.items.rbegin(); it != page.items.rend(); ++it) {
        const iiif::Activity& a = *it;
        if (a.type == "Refresh") {
          continue;
        }
        const bool deletion = a.type == "Delete" || a.type == "Remove" || a.type == "Move";
        live.try_emplace(a.object, !deletion);
        if (a.type == "Move") {
          live.try_emplace(a.target, true);
        }
      }
    }
    std::vector<rs::Entry> entries;
    for (const auto& [uri, is_live] : live) {
      if (is_live) {
        rs::Entry e;
        e.loc = uri;
        entries.push_back(std::move(e));
      }
    }
    for (size_t start = 0; start < entries.size(); start += m_ctx.opt.batch_size) {
      std::vector<rs::Entry> part(entries.begin() + static_cast<std::ptrdiff_t>(start),
                                  entries.begin() + static_cast<std::ptrdiff_t>(
                                                        std::min(entries.size(), start + m_ctx.opt.batch_size)));
      if (auto r = baseline_batch(m_ctx, m_feed, part); !r) {
        return r;
      }
      m_ctx.done += part.size();
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

#include "sync_engine/feed_writer.h"
#include "sync_engine/run_context.h"
#include "common/url_resolve.h"

#include "resourcesync/datetime.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <unordered_map>
#include <unordered_set>

// Incremental sync from the Change List (or index): changes strictly after
// the watermark, in order, batch by batch, each batch committed with the
// watermark it reaches.
namespace tributary::sync {

namespace {

// The time of a list's first change: what stands for its `from` when it
// has none (resync-simulator omits it whenever its oldest change is a
// deletion, which has no lastmod).
std::optional<rs::Timestamp> first_change_time(const SpooledDocument& d) {
  struct First : rs::DocumentHandler {
    std::optional<rs::Timestamp> time;
    void on_entry(rs::Entry&& e, uint64_t) override {
      if (!time) {
        time = e.change_time();
      }
    }
  } first;
  if (!d.read(first)) {
    return std::nullopt;
  }
  return first.time;
}

struct ListRef {
  std::string url;
  std::optional<rs::Timestamp> from;
  std::optional<rs::Timestamp> until;
  std::unique_ptr<SpooledDocument> doc; // fetched already (to learn its start)
  bool unchanged = false;               // 304: applied to its end before, not changed since
};

// Orders the lists of a Change List Index oldest first. The index's order
// means nothing (a newest-first index, applied as listed, moved the
// watermark past the older parts, whose changes were then skipped): a list
// is placed by its `from`, or, when the index gives none, by the list's own
// `from` or its first change's time, which takes fetching it.
Result<void> order_lists(RunContext& ctx, std::vector<ListRef>& lists, const std::string& fetched_url) {
  for (auto& l : lists) {
    if (l.from || l.doc || l.url == fetched_url) {
      continue;
    }
    auto d = ctx.spool(l.url, rs::Capability::changelist, true);
    if (!d) {
      return tl::unexpected(d.error());
    }
    if ((*d)->not_modified()) {
      l.unchanged = true;
    } else {
      l.from = (*d)->header().md->from;
      if (!l.from) {
        l.from = first_change_time(**d);
      }
    }
    l.doc = std::move(*d);
  }
  // Lists with no time at all hold no change: their place does not matter.
  std::stable_sort(lists.begin(), lists.end(), [](const ListRef& a, const ListRef& b) {
    return a.from.value_or(rs::Timestamp::min()) < b.from.value_or(rs::Timestamp::min());
  });
  return {};
}

Result<void> apply_change_list(RunContext& ctx, int64_t feed, const SpooledDocument& doc, Watermark& w) {
  std::vector<PendingChange> pending;
  std::optional<rs::Timestamp> prev_time;
  int64_t position = -1;
  Result<void> status;
  auto after_watermark = [&](const rs::Entry& e, rs::Timestamp t, int64_t pos) {
    if (!w.last_time || t > *w.last_time) {
      return true;
    }
    if (t < *w.last_time) {
      return false;
    }
    if (w.change_list_url && *w.change_list_url == doc.url()) {
      return pos > w.last_position;
    }
    return e.loc != w.last_uri;
  };
  ctx.report().clock_checked = true;
  auto take = [&](std::vector<rs::Entry>& entries) {
    for (auto& e : entries) {
      const rs::Timestamp t = *e.change_time(); // validated: every change has a time
      position = prev_time && *prev_time == t ? position + 1 : 0;
      prev_time = t;
      ctx.add_done(1);
      if (!after_watermark(e, t, position)) {
        continue;
      }
      const bool selected = ctx.src().selects(e.loc, e.md ? e.md->type : std::nullopt);
      pending.push_back(PendingChange{std::move(e), t, position, selected});
      if (pending.size() >= ctx.opt().batch_size) {
        status = change_batch(ctx, feed, doc.url(), pending, w);
        pending.clear();
        ctx.progress(doc.url());
        if (!status) {
          return false;
        }
      }
    }
    return true;
  };
  // Listed out of time order (a Source whose clock was corrected appends
  // changes dated before the ones it wrote while it was wrong): read whole,
  // then applied sorted by time. A Change List holds at most 50,000 entries
  // by the specification, and the reader stops a document past 128 MiB.
  const bool sort = doc.summary().out_of_order;
  std::vector<rs::Entry> all;
  ChunkHandler h(ctx.opt().batch_size, sort ? std::function<bool(std::vector<rs::Entry>&)>([&](std::vector<rs::Entry>& es) {
                   std::move(es.begin(), es.end(), std::back_inserter(all));
                   return true;
                 })
                                          : std::function<bool(std::vector<rs::Entry>&)>(take));
  ctx.watch_rejections(h, doc.url());
  auto r = doc.read(h);
  (void)ctx.take_rejected_uris(); // a rejected change is reported, and costs that change only
  if (!r) {
    return tl::unexpected(r.error());
  }
  bool read_all = h.finish();
  if (sort) {
    std::stable_sort(all.begin(), all.end(),
                     [](const rs::Entry& a, const rs::Entry& b) { return *a.change_time() < *b.change_time(); });
    ctx.note(doc.url() + ": changes listed out of time order, applied sorted by time");
    read_all = take(all);
  }
  if (!read_all || !status) {
    return status;
  }
  if (!pending.empty()) {
    status = change_batch(ctx, feed, doc.url(), pending, w);
    ctx.progress(doc.url());
  }
  return status;
}

} // namespace

// The documents an archive lists (a urlset of them, or an index of such
// urlsets; ResourceSync Archives, sections 5 and 7) that end after `since`,
// ordered by `from`; only those whose span is given (an archived list or
// dump without `from` and `until` cannot be placed).
Result<std::vector<ArchivedSpan>> archived_spans(RunContext& ctx, const std::string& archive_url,
                                                 rs::Capability kind, rs::Timestamp since) {
  std::vector<ArchivedSpan> out;
  std::vector<std::string> pending{archive_url};
  for (size_t depth = 0; !pending.empty() && depth < 2; ++depth) {
    std::vector<std::string> next;
    for (const auto& url : pending) {
      auto doc = ctx.spool(url, kind, false);
      if (!doc) {
        return tl::unexpected(doc.error());
      }
      CollectingHandler h;
      if (auto r = (*doc)->read(h); !r) {
        return tl::unexpected(r.error());
      }
      for (const auto& e : h.document.entries) {
        auto loc = resolve_reference(url, e.loc);
        if (!loc) {
          continue;
        }
        if ((*doc)->header().root == rs::RootElement::sitemapindex) {
          next.push_back(*loc);
        } else if (e.md && e.md->from && e.md->until && *e.md->until >= since) {
          out.push_back(ArchivedSpan{*loc, *e.md->from, *e.md->until});
        }
      }
    }
    pending = std::move(next);
  }
  std::stable_sort(out.begin(), out.end(), [](const ArchivedSpan& a, const ArchivedSpan& b) { return a.from < b.from; });
  return out;
}

bool bridges(const std::vector<ArchivedSpan>& archived, rs::Timestamp since, rs::Timestamp to) {
  if (archived.empty() || archived.front().from > since) {
    return false;
  }
  rs::Timestamp reached = archived.front().until;
  for (const auto& l : archived) {
    if (l.from > reached) {
      return false;
    }
    reached = std::max(reached, l.until);
  }
  return reached >= to;
}

// The Change Lists to read for `doc` (the list or index at `cl_url`): an
// index's lists; a list alone, or with the closed lists of the index it
// links when it starts after `through`.
Result<std::vector<ListRef>> lists_of(RunContext& ctx, const std::string& cl_url, const SpooledDocument& doc,
                                      const std::optional<rs::Timestamp>& through) {
  std::vector<ListRef> lists;
  auto read_index = [&](const SpooledDocument& index) -> Result<void> {
    CollectingHandler h;
    if (auto r = index.read(h); !r) {
      return tl::unexpected(r.error());
    }
    for (const auto& e : h.document.entries) {
      lists.push_back(ListRef{e.loc, e.md ? e.md->from : std::nullopt, e.md ? e.md->until : std::nullopt});
    }
    return {};
  };
  if (doc.header().root == rs::RootElement::sitemapindex) {
    if (auto r = read_index(doc); !r) {
      return tl::unexpected(r.error());
    }
  } else {
    std::optional<rs::Timestamp> from = doc.header().md->from;
    if (!from && doc.summary().entries > 0) {
      from = first_change_time(doc);
      ctx.note("the Change List " + cl_url + " has no 'from' (Appendix A requires one): its first change's time, " +
               (from ? rs::format_w3c_datetime(*from) : std::string("none")) + ", is taken instead");
    }
    const rs::Link* index = doc.header().find_link("index");
    if (from && through && *from > *through && index) {
      // The named list starts after our last change: the changes in between
      // are in the closed lists its Change List Index names (spec 12.1: a
      // Source names its open list and links the index from it).
      const auto index_url = resolve_reference(cl_url, index->href);
      auto idx = ctx.spool(index_url ? *index_url : index->href, rs::Capability::changelist, false);
      if (idx && (*idx)->header().root == rs::RootElement::sitemapindex) {
        ctx.note("the Change List " + cl_url + " starts at " + rs::format_w3c_datetime(*from) +
                 ", after the last change applied: read its index " + (*idx)->url());
        if (auto r = read_index(**idx); !r) {
          return tl::unexpected(r.error());
        }
      } else {
        ctx.note("the Change List " + cl_url + " links an index that could not be read: " +
                 (idx ? std::string("not a Change List Index") : idx.error().message));
      }
    }
    if (lists.empty()) {
      lists.push_back(ListRef{cl_url, from, doc.header().md->until});
    } else {
      // The index names the open list too; its 'from' is the list's own.
      for (auto& l : lists) {
        if (l.url == cl_url) {
          l.from = from;
        }
      }
    }
  }
  return lists;
}

// Applies each list not applied already, in order, from the watermark `w`
// (moved as they are).
Result<void> apply_lists(RunContext& ctx, int64_t feed, std::vector<ListRef>& lists, const std::string& cl_url,
                         const SpooledDocument& top, Watermark& w) {
  ctx.restart_progress();
  for (auto& l : lists) {
    if (l.unchanged || (l.until && w.last_time && *l.until < *w.last_time)) {
      continue; // not changed since applied, or closed and entirely before the watermark
    }
    std::unique_ptr<SpooledDocument> part = std::move(l.doc);
    const SpooledDocument* d = &top;
    if (l.url != cl_url) {
      if (!part) {
        auto p = ctx.spool(l.url, rs::Capability::changelist, true);
        if (!p) {
          return tl::unexpected(p.error());
        }
        part = std::move(*p);
      }
      if (part->not_modified()) {
        continue;
      }
      d = part.get();
    }
    ctx.add_total(d->summary().entries);
    if (auto r = apply_change_list(ctx, feed, *d, w); !r) {
      return r;
    }
    if (auto r = ctx.drain(); !r) {
      return r;
    }
    ctx.remember_validators(*d);
  }
  return {};
}

Result<void> incremental_from_list(RunContext& ctx, int64_t feed, const std::string& cl_url, const std::string& rl_url,
                                   const std::string& cla_url) {
  auto wm = ctx.settled_watermark(feed);
  if (!wm) {
    return tl::unexpected(wm.error());
  }
  Watermark w = *wm;
  // Changes before it are held; the watermark itself may start earlier,
  // by the overlap after a baseline.
  std::optional<rs::Timestamp> through = applied_through(w);
  auto doc = ctx.spool(cl_url, rs::Capability::changelist, true);
  if (!doc) {
    return tl::unexpected(doc.error());
  }
  if ((*doc)->not_modified()) {
    ctx.note("Change List not modified since it was last applied");
    return {};
  }
  auto listed = lists_of(ctx, cl_url, **doc, through);
  if (!listed) {
    return tl::unexpected(listed.error());
  }
  std::vector<ListRef> lists = std::move(*listed);
  if (lists.empty()) {
    return {};
  }
  if (auto r = order_lists(ctx, lists, cl_url); !r) {
    return r;
  }
  // Gap detection: the earliest change still published is later than what
  // we have applied, so changes in between are lost upstream.
  std::optional<rs::Timestamp> earliest = lists.front().from;
  if (!earliest) {
    earliest = (*doc)->header().md->from;
  }
  if (earliest && through && *earliest > *through && !cla_url.empty()) {
    // The Source's archive may still hold the lists in between.
    auto archived = archived_spans(ctx, cla_url, rs::Capability::changelist_archive, *through);
    if (!archived) {
      ctx.note("the Change List Archive " + cla_url + " could not be read: " + archived.error().message);
    } else if (!bridges(*archived, *through, *earliest)) {
      ctx.note("the Change List Archive " + cla_url + " does not reach back to the last change applied (" +
               rs::format_w3c_datetime(*through) + ")");
    } else {
      ctx.note("caught up through the Change List Archive " + cla_url + ": " + std::to_string(archived->size()) +
               " archived list(s) from " + rs::format_w3c_datetime(archived->front().from));
      std::set<std::string> have;
      for (const auto& l : lists) {
        have.insert(l.url);
      }
      for (auto& l : *archived) {
        if (!have.count(l.url)) {
          lists.push_back(ListRef{l.url, l.from, l.until, nullptr, false});
        }
      }
      if (auto r = order_lists(ctx, lists, cl_url); !r) {
        return r;
      }
      earliest = lists.front().from;
    }
  }
  if (earliest && through && *earliest > *through) {
    ctx.note("re-baselined: the Change List starts at " + rs::format_w3c_datetime(*earliest) +
         ", after the last change applied (" + rs::format_w3c_datetime(*through) + ")");
    if (rl_url.empty()) {
      return make_error(ErrorKind::invalid_document, "gap in the change history and no Resource List to re-baseline from");
    }
    if (auto r = baseline_from_list(ctx, feed, rl_url); !r) {
      return r;
    }
    auto again = ctx.settled_watermark(feed);
    if (!again) {
      return tl::unexpected(again.error());
    }
    w = *again;
    through = applied_through(w);
  }
  if (auto r = apply_lists(ctx, feed, lists, cl_url, **doc, w); !r) {
    return r;
  }
  if ((*doc)->header().root == rs::RootElement::urlset) {
    // Only leaf lists: an index stays the same while its open list grows.
    ctx.remember_validators(**doc);
  }
  return {};
}

} // namespace tributary::sync

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
  ctx.report.clock_checked = true;
  auto take = [&](std::vector<rs::Entry>& entries) {
    for (auto& e : entries) {
      const rs::Timestamp t = *e.change_time(); // validated: every change has a time
      position = prev_time && *prev_time == t ? position + 1 : 0;
      prev_time = t;
      ctx.done += 1;
      if (!after_watermark(e, t, position)) {
        continue;
      }
      const bool selected = ctx.src.selects(e.loc, e.md ? e.md->type : std::nullopt);
      pending.push_back(PendingChange{std::move(e), t, position, selected});
      if (pending.size() >= ctx.opt.batch_size) {
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
  ChunkHandler h(ctx.opt.batch_size, sort ? std::function<bool(std::vector<rs::Entry>&)>([&](std::vector<rs::Entry>& es) {
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
  if ((*doc)->header().root == rs::RootElement::sitemapindex) {
    if (auto r = read_index(**doc); !r) {
      return r;
    }
  } else {
    std::optional<rs::Timestamp> from = (*doc)->header().md->from;
    if (!from && (*doc)->summary().entries > 0) {
      from = first_change_time(**doc);
      ctx.note("the Change List " + cl_url + " has no 'from' (Appendix A requires one): its first change's time, " +
               (from ? rs::format_w3c_datetime(*from) : std::string("none")) + ", is taken instead");
    }
    const rs::Link* index = (*doc)->header().find_link("index");
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
          return r;
        }
      } else {
        ctx.note("the Change List " + cl_url + " links an index that could not be read: " +
                 (idx ? std::string("not a Change List Index") : idx.error().message));
      }
    }
    if (lists.empty()) {
      lists.push_back(ListRef{cl_url, from, (*doc)->header().md->until});
    } else {
      // The index names the open list too; its 'from' is the list's own.
      for (auto& l : lists) {
        if (l.url == cl_url) {
          l.from = from;
        }
      }
    }
  }
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
  ctx.progress_start = std::chrono::steady_clock::now();
  for (auto& l : lists) {
    if (l.unchanged || (l.until && w.last_time && *l.until < *w.last_time)) {
      continue; // not changed since applied, or closed and entirely before the watermark
    }
    std::unique_ptr<SpooledDocument> part = std::move(l.doc);
    const SpooledDocument* d = doc->get();
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
    ctx.total += d->summary().entries;
    if (auto r = apply_change_list(ctx, feed, *d, w); !r) {
      return r;
    }
    if (auto r = ctx.drain(); !r) {
      return r;
    }
    ctx.remember_validators(*d);
  }
  if ((*doc)->header().root == rs::RootElement::urlset) {
    // Only leaf lists: an index stays the same while its open list grows.
    ctx.remember_validators(**doc);
  }
  return {};
}

Result<void> change_batch(RunContext& ctx, int64_t feed, const std::string& list_url, std::vector<PendingChange>& changes,
                          Watermark& w, const ContentSource& source, const std::function<void(Watermark&)>& settle) {
  // The last change of each resource decides its final state; each change
  // is logged, but a resource is fetched at most once.
  std::unordered_map<std::string, size_t> last;
  std::vector<std::string> uris;
  for (size_t i = 0; i < changes.size(); ++i) {
    if (!changes[i].selected) {
      continue;
    }
    auto [it, inserted] = last.try_emplace(changes[i].entry.loc, i);
    if (inserted) {
      uris.push_back(changes[i].entry.loc);
    } else {
      it->second = i;
    }
  }
  auto held = ctx.held_for(feed, uris);
  if (!held) {
    return tl::unexpected(held.error());
  }
  // Changes of these URIs that failed earlier and wait to be retried: one
  // that a later change supersedes now is logged before it (as a change
  // between others in one batch is), else the Source's change would never
  // reach our log (the crash matrix found them: a 'created' whose bytes
  // had already been updated when fetched, then the update applied).
  auto superseded = ctx.pending_for(feed, uris);
  if (!superseded) {
    return tl::unexpected(superseded.error());
  }
  store::Batch batch;
  batch.feed_id = feed;
  batch.run_id = ctx.run_id;

  std::unordered_map<std::string, ResourceRecord> final_state;
  std::unordered_set<std::string> failed;
  std::unordered_set<std::string> unchanged;
  std::vector<const rs::Entry*> to_fetch;
  for (const auto& uri : uris) {
    const PendingChange& c = changes[last[uri]];
    const rs::Entry& e = c.entry;
    auto it = held->find(uri);
    if (it != held->end() && it->second.change_datetime && c.time < *it->second.change_datetime) {
      // Older than the state we hold (a change read again: an overlap, a
      // repair that moved the watermark back): nothing to fetch or retry,
      // and nothing the log does not say already.
      unchanged.insert(uri);
      continue;
    }
    if (auto p = superseded->find(uri);
        p != superseded->end() && p->second.change_datetime && c.time <= *p->second.change_datetime) {
      // A change as old as one waiting to be retried: that one stands.
      unchanged.insert(uri);
      continue;
    }
    if (c.entry.change() == rs::Change::deleted) {
      if (it != held->end() && it->second.state == ResourceState::deleted) {
        // Deleted already (a baseline that no longer found it, or the same
        // change read again in the overlap before a list's `at`): logged
        // once, when it was applied.
        unchanged.insert(uri);
        continue;
      }
      ResourceRecord r = it != held->end() ? it->second : record_from_entry(e, ResourceState::deleted);
      r.state = ResourceState::deleted;
      r.lastmod = e.lastmod ? e.lastmod : r.lastmod;
      r.change_datetime = c.time;
      final_state[uri] = std::move(r);
      continue;
    }
    if (it != held->end() && same_content(it->second, e)) {
      const ResourceRecord& h = it->second;
      if (h.change_datetime && c.time > *h.change_datetime) {
        // A later change upstream to the bytes we hold already: we fetched
        // them for an earlier change, after the Source had changed again
        // (at 1,000 changes/s, 0.5% of updates were so superseded within a
        // second). It happened upstream, so it is logged, and not fetched.
        ResourceRecord r = h;
        r.change_datetime = c.time;
        r.lastmod = e.lastmod ? e.lastmod : r.lastmod;
        final_state[uri] = std::move(r);
        continue;
      }
      unchanged.insert(uri); // already in this state (a re-applied or re-baselined change)
      continue;
    }
    const rs::HashValue* want = rs::strongest_hash(offered_hashes(e));
    if (want && want->known() == rs::HashAlgorithm::sha256) {
      if (auto held_blob = ctx.blobs.retain(want->hex)) {
        // Stored here, yet perhaps never uploaded (a batch whose upload
        // failed left it): the remote tier gets it before this batch
        // names it (it skips what it has).
        ctx.will_name(want->hex);
        // Content already present (another source, or an earlier copy).
        // Its length is the blob's own, never the document's (which may be
        // absent or wrong: republished as length="0", a downstream capped
        // its fetch at 0 bytes); its one verified digest is the sha-256.
        store::BlobInfo blob;
        blob.sha256 = want->hex;
        blob.length = held_blob->length;
        blob.hashes = {*want};
        final_state[uri] = record_for(e, blob, "blob store", std::nullopt);
        continue;
      }
    }
    to_fetch.push_back(&e);
  }
  auto results = source ? source(to_fetch) : ctx.fetch_all(to_fetch);
  if (ctx.cancelled()) {
    return ctx.commit(batch); // refused: nothing of this batch is applied
  }
  if (auto full = RunContext::disk_full(results)) {
    return tl::unexpected(*full); // nothing of this batch is applied; the run waits for space
  }
  // Transient failures (each already tried opt.retry.max_attempts times)
  // hold the batch back only when the source itself looks down: every
  // fetch failed that way, and from the source's own hosts. Otherwise they
  // are one location's trouble (a mirror that is blackholed, a resource
  // that always times out): that change goes to the retry table and the
  // feed moves on.
  bool source_down = !to_fetch.empty() && !source;
  for (size_t i = 0; i < to_fetch.size() && source_down; ++i) {
    source_down = !results[i] && results[i].error().kind == ErrorKind::transient;
  }
  if (source_down) {
    bool own = false;
    for (size_t i = 0; i < to_fetch.size() && !own; ++i) {
      for (const auto& url : candidate_locations(to_fetch[i]->loc, to_fetch[i]->links)) {
        own = own || ctx.is_source_host(url);
      }
    }
    source_down = own;
  }
  std::vector<std::string> transient;
  for (size_t i = 0; i < to_fetch.size(); ++i) {
    const rs::Entry& e = *to_fetch[i];
    if (!results[i] && source) {
      return tl::unexpected(results[i].error()); // a package is applied whole or not at all
    }
    if (!results[i]) {
      if (results[i].error().kind == ErrorKind::transient && source_down) {
        transient.push_back(results[i].error().message);
      } else {
        failed.insert(e.loc);
        ++batch.counters.failed;
        ctx.error(e.loc, results[i].error().message);
        const PendingChange& c = changes[last[e.loc]];
        batch.retries.push_back(ctx.retry_for(e, c.entry.change(), c.time, results[i].error().message));
      }
      continue;
    }
    batch.counters.bytes += results[i]->blob.length;
    final_state[e.loc] = record_for(e, results[i]->blob, results[i]->served_from, results[i]->type);
  }
  // A URI whose last change in this batch failed: an earlier deletion of it
  // in the batch needs no bytes, so it is applied, and what we hold agrees
  // with the log (which logs it) while the later change waits for its
  // retry. Left as it was, an overlap read it again later, applied it then
  // and the log had to date it after the creation it preceded (the
  // randomized history test's seed 359).
  for (const auto& uri : failed) {
    for (size_t i = last[uri]; i-- > 0;) {
      const PendingChange& c = changes[i];
      if (c.entry.loc != uri || !c.selected) {
        continue;
      }
      if (c.entry.change() == rs::Change::deleted) {
        auto it = held->find(uri);
        const bool newer = it == held->end() || !it->second.change_datetime || *it->second.change_datetime < c.time;
        if (it != held->end() && it->second.state == ResourceState::live && newer) {
          ResourceRecord r = it->second;
          r.state = ResourceState::deleted;
          r.lastmod = c.entry.lastmod ? c.entry.lastmod : r.lastmod;
          r.change_datetime = c.time;
          final_state[uri] = std::move(r);
        }
      }
      break; // the latest earlier change decides
    }
  }
  if (!transient.empty()) {
    // Do not move past changes we could not apply for a passing reason:
    // the next run resumes at the watermark and tries again.
    return make_error(ErrorKind::transient,
                      std::to_string(transient.size()) + " resource(s) could not be fetched (first: " +
                          transient.front() + "); this batch was not applied and the next run resumes at " +
                          (w.last_time ? rs::format_w3c_datetime(*w.last_time) : std::string("the start")));
  }
  for (size_t i = 0; i < changes.size(); ++i) {
    const PendingChange& c = changes[i];
    const std::string& uri = c.entry.loc;
    if (!c.selected) {
      continue;
    }
    // Whatever becomes of the later change (applied, failed in turn, or
    // found held already), the earlier one happened upstream: it is logged
    // before it, once. (Its retry is cleared by the upsert, replaced by the
    // later change's retry, or cleared below for a held one.)
    if (auto old = superseded->find(uri);
        old != superseded->end() && old->second.change_datetime && *old->second.change_datetime < c.time) {
      const store::RetryRecord& r = old->second;
      batch.changes.push_back(ChangeRecord{*r.change, r.change_datetime, record_from_entry(r.entry, ResourceState::live)});
      superseded->erase(old);
      if (unchanged.count(uri) && held->count(uri)) {
        final_state[uri] = held->at(uri); // written back unchanged: that clears the retry
      }
    }
    if (last[uri] == i && failed.count(uri)) {
      continue; // its retry holds it
    }
    // Every change read is proposed, in upstream order, with the state it
    // left where we hold that state: the store logs what moves the URI's
    // logged history forward (store/history_rule.h) and nothing it says
    // already. (An earlier change of the URI in this batch happened
    // upstream whatever became of the later one; a change as old as what
    // we hold is in the log unless a baseline jumped past it.)
    const rs::Change change = c.entry.change().value_or(rs::Change::updated);
    const bool deletion = change == rs::Change::deleted;
    ResourceRecord state;
    if (last[uri] == i && final_state.count(uri)) {
      state = final_state[uri];
    } else if (auto h = held->find(uri);
               last[uri] == i && h != held->end() &&
               (deletion ? h->second.state == ResourceState::deleted : same_content(h->second, c.entry))) {
      state = h->second;
    } else {
      state = record_from_entry(c.entry, deletion ? ResourceState::deleted : ResourceState::live);
    }
    // (Created, updated and deleted are counted by the store as it logs
    // them: Store::apply.)
    batch.counters.unchanged += last[uri] == i && unchanged.count(uri);
    batch.changes.push_back(ChangeRecord{change, c.time, std::move(state)});
  }
  for (auto& [uri, rec] : final_state) {
    batch.upserts.push_back(std::move(rec));
  }
  const PendingChange& tail = changes.back();
  Watermark next = w;
  next.change_list_url = list_url;
  next.last_time = tail.time;
  next.last_uri = tail.entry.loc;
  next.last_position = tail.position;
  // A Source whose clock is ahead dates its changes in the future: they are
  // applied, but the watermark stops at the time we read them, so that the
  // changes it dates correctly once its clock is put right are not skipped
  // (a change read again meanwhile is a no-op).
  const auto now = std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
  for (const auto& c : changes) {
    if (c.time > now + ctx.src.clock_tolerance) {
      const double ahead = std::chrono::duration<double>(c.time - now).count();
      ctx.report.clock_ahead_seconds = std::max(ctx.report.clock_ahead_seconds.value_or(0.0), ahead);
    }
  }
  if (tail.time > now + ctx.src.clock_tolerance) {
    next.last_time = now;
    next.last_uri.clear();
    next.last_position = -1;
  }
  if (settle) {
    settle(next);
  }
  batch.watermark = next;
  if (auto r = ctx.commit(batch); !r) {
    return r;
  }
  w = next;
  return {};
}

} // namespace tributary::sync

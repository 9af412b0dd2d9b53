#include "sync_engine/feed_writer.h"

#include <algorithm>
#include <iterator>
#include <unordered_map>
#include <unordered_set>

namespace tributary::sync {

// Everything listed was seen: what we hold beyond it is gone upstream. The
// watermark starts a safe overlap before `at` (see k_list_overlap). A list without `at` (a deviation real Sources
// make) shows an unknown time: the baseline is dated now, and the watermark
// has no time, so the next incremental run applies every change the Change
// List holds (re-applying one already held logs nothing) rather than skip
// one that came after the list was made.
Result<void> close_baseline(RunContext& ctx, int64_t feed, std::optional<rs::Timestamp> at,
                            std::optional<rs::Timestamp> completed, bool delete_unlisted) {
  auto wm = ctx.settled_watermark(feed);
  if (!wm) {
    return tl::unexpected(wm.error());
  }
  Watermark w = *wm;
  const auto now = std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
  if (at && *at > now + ctx.src().clock_tolerance) {
    // The Source's clock is ahead: a watermark in the future would skip
    // every change it dates correctly later.
    ctx.note("the list's 'at' (" + rs::format_w3c_datetime(*at) +
             ") is in the future: the Source's clock is ahead; the baseline is dated when it was read");
    const double ahead = std::chrono::duration<double>(*at - now).count();
    ctx.report().clock_ahead_seconds = std::max(ctx.report().clock_ahead_seconds.value_or(0.0), ahead);
    ctx.report().clock_checked = true;
    at = now;
  }
  w.baseline_at = at ? at
                     : std::optional<rs::Timestamp>(std::chrono::time_point_cast<std::chrono::microseconds>(
                           std::chrono::system_clock::now()));
  w.last_time = at;
  if (at) {
    // A Source may stamp `at` after it walked its resources (resync-simulator
    // does, a fraction of a millisecond later; a million-entry list takes
    // minutes): a change made during the walk is in neither the list nor
    // the changes after `at`. The Change List is applied from before `at`
    // by the overlap, or by how long `completed` says the list took if
    // longer. A change applied again is a no-op (same content, or deleted
    // already), so the overlap costs reading, not fetching.
    auto overlap = std::chrono::duration_cast<std::chrono::microseconds>(k_list_overlap);
    if (completed && *completed > *at) {
      overlap = std::max(overlap, *completed - *at);
    }
    w.last_time = *at - overlap;
  }
  if (!at) {
    ctx.note("the baseline's list has no 'at' (Appendix A requires one): the next incremental run applies every "
             "change its Change List holds");
  }
  w.last_uri.clear();
  w.last_position = -1;
  w.resume.clear();
  if (!delete_unlisted) {
    if (auto r = commit_watermark(ctx, feed, w); !r) {
      return r;
    }
    return ctx.drain();
  }
  auto deleted = delete_unseen(ctx, feed, w, "the list lacks");
  if (!deleted) {
    return tl::unexpected(deleted.error());
  }
  return {};
}

Result<store::DeletionOutcome> delete_unseen(RunContext& ctx, int64_t feed, const Watermark& w,
                                             const std::string& lacks) {
  // In a LogWindow (a baseline while a Change List is followed), the
  // deletions wait with the rest: the Change List may bring the changes
  // before them.
  LogWindow* window = ctx.log_window();
  auto deleted = ctx.store().delete_unseen(
      feed, ctx.run_id(), w, ctx.src().max_deletion_share, ctx.all_seen(feed),
      window ? store::DeferLog([window](const ChangeRecord& c) { return window->defer(c); }) : store::DeferLog());
  if (!deleted) {
    return tl::unexpected(deleted.error());
  }
  ctx.report().counters.deleted += deleted->logged; // (those the window took are counted when it logs them)
  if (deleted->held) {
    ctx.report().deletions_held += deleted->unseen;
    ctx.note("deletions held: " + lacks + " " + std::to_string(deleted->unseen) + " of the " +
             std::to_string(deleted->live) + " resources held (more than " +
             std::to_string(static_cast<int>(ctx.src().max_deletion_share * 100 + 0.5)) +
             "%, max_deletion_share); none deleted until an operator confirms (POST /api/v1/sources/" +
             ctx.src().name + "/confirm-deletions, then a baseline)");
  }
  return deleted;
}

Result<void> baseline_batch(RunContext& ctx, int64_t feed, std::vector<rs::Entry>& all, const ContentSource& source,
                            const std::optional<Watermark>& reached) {
  // A list may name a URI twice (the validator warns): the last one counts,
  // and a batch must not upsert one row twice.
  std::unordered_map<std::string_view, size_t> last;
  last.reserve(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    last[all[i].loc] = i;
  }
  std::vector<const rs::Entry*> entries;
  std::vector<std::string> uris;
  for (size_t i = 0; i < all.size(); ++i) {
    const rs::Entry& e = all[i];
    if (last[e.loc] == i && ctx.src().selects(e.loc, e.md ? e.md->type : std::nullopt)) {
      entries.push_back(&e);
      uris.push_back(e.loc);
    }
  }
  store::Batch batch;
  batch.feed_id = feed;
  batch.run_id = ctx.run_id();
  batch.watermark = reached;
  auto held = ctx.held_for(feed, uris);
  if (!held) {
    return tl::unexpected(held.error());
  }
  batch.seen = std::move(uris);
  for (auto& u : ctx.take_rejected_uris()) {
    batch.seen.push_back(std::move(u)); // listed, with a bad value: kept as held
  }
  std::vector<const rs::Entry*> to_fetch;
  bool all_new = true; // no upsert below is held already
  for (const auto* e : entries) {
    auto it = held->find(e->loc);
    if (it != held->end() && same_content(it->second, *e)) {
      ++batch.counters.unchanged;
      continue;
    }
    if (const auto t = e->change_time();
        it != held->end() && it->second.change_datetime && t && *t < *it->second.change_datetime) {
      // The list is older than what we hold of it (a list rendered before
      // a change we applied since, a deletion included): it is no news,
      // and applying it would take our copy, and our log, back in time.
      ++batch.counters.unchanged;
      continue;
    }
    to_fetch.push_back(e);
  }
  Result<void> ended;
  auto fetched_content = fetch_for_batch(ctx, source, to_fetch, batch, ended);
  if (!fetched_content) {
    return ended;
  }
  auto& results = *fetched_content;
  // Changes of these URIs that failed earlier and wait to be retried: what
  // this listing stores (or its retry) supersedes them, so each is logged
  // first, as change_batch does (else the Source's change never reaches
  // the log: the randomized history test found a `created` lost so).
  std::vector<std::string> fetched;
  if (!source && !ctx.all_seen(feed)) {
    for (const auto* e : to_fetch) {
      fetched.push_back(e->loc);
    }
  }
  auto superseded = fetched.empty() ? Result<std::unordered_map<std::string, store::RetryRecord>>()
                                    : ctx.pending_for(feed, fetched);
  if (!superseded) {
    return tl::unexpected(superseded.error());
  }
  auto log_change = [&](ChangeRecord&& change) {
    if (!ctx.log_window() || !ctx.log_window()->defer(change)) {
      batch.changes.push_back(std::move(change));
    }
  };
  for (size_t i = 0; i < to_fetch.size(); ++i) {
    const rs::Entry& e = *to_fetch[i];
    auto old = superseded->find(e.loc);
    const bool pending = old != superseded->end() && old->second.change;
    const bool newer = pending && (!e.change_time() || !old->second.change_datetime ||
                                   *old->second.change_datetime < *e.change_time());
    if (newer) {
      const store::RetryRecord& r = old->second;
      log_change(ChangeRecord{*r.change, r.change_datetime, record_from_entry(r.entry, ResourceState::live)});
    }
    if (!results[i]) {
      if (source) {
        return tl::unexpected(results[i].error()); // a package is applied whole or not at all
      }
      ++batch.counters.failed;
      ctx.error(e.loc, results[i].error().message);
      if (pending && !newer) {
        continue; // the change waiting is as new as this listing: it stays, to be logged when it succeeds
      }
      batch.retries.push_back(ctx.retry_for(e, std::nullopt, std::nullopt, results[i].error().message));
      continue;
    }
    ResourceRecord rec = record_for(e, results[i]->blob, results[i]->served_from, results[i]->type);
    batch.counters.bytes += results[i]->blob.length;
    auto it = held->find(e.loc);
    all_new = all_new && it == held->end();
    const bool had = it != held->end() && it->second.state == ResourceState::live;
    if (had && it->second.blob_sha256 == rec.blob_sha256) {
      ++batch.counters.unchanged; // same bytes: refresh metadata, log nothing
      batch.upserts.push_back(std::move(rec));
      continue;
    }
    if (had) {
      ++batch.counters.updated;
    } else {
      ++batch.counters.created;
    }
    log_change(ChangeRecord{had ? rs::Change::updated : rs::Change::created, e.change_time(), rec});
    batch.upserts.push_back(std::move(rec));
  }
  batch.upserts_new = all_new;
  batch.logs_new = ctx.never_logged(feed, batch.changes);
  return ctx.commit(batch);
}


Result<void> move_watermark(RunContext& ctx, int64_t feed, const std::function<void(Watermark&)>& edit) {
  auto wm = ctx.settled_watermark(feed);
  if (!wm) {
    return tl::unexpected(wm.error());
  }
  store::Batch b;
  b.feed_id = feed;
  b.run_id = ctx.run_id();
  Watermark w = *wm;
  edit(w);
  b.watermark = w;
  return ctx.commit(b);
}


Result<void> commit_watermark(RunContext& ctx, int64_t feed, const Watermark& w) {
  store::Batch b;
  b.feed_id = feed;
  b.run_id = ctx.run_id();
  b.watermark = w;
  return ctx.commit(b);
}

Result<void> commit_seen(RunContext& ctx, int64_t feed, std::vector<std::string> uris) {
  store::Batch b;
  b.feed_id = feed;
  b.run_id = ctx.run_id();
  b.seen = std::move(uris);
  return ctx.commit(b);
}

Result<void> commit_log(RunContext& ctx, int64_t feed, std::vector<ChangeRecord> changes) {
  const size_t step = std::max<size_t>(1, ctx.opt().batch_size);
  for (size_t i = 0; i < changes.size(); i += step) {
    store::Batch b;
    b.feed_id = feed;
    b.run_id = ctx.run_id();
    b.changes.assign(std::make_move_iterator(changes.begin() + static_cast<std::ptrdiff_t>(i)),
                     std::make_move_iterator(changes.begin() +
                                             static_cast<std::ptrdiff_t>(std::min(changes.size(), i + step))));
    if (auto c = ctx.commit(b); !c) {
      return c;
    }
  }
  return {};
}

Result<void> retry_batch(RunContext& ctx, int64_t feed, const std::vector<store::RetryRecord>& due) {
  store::Batch batch;
  batch.feed_id = feed;
  batch.run_id = ctx.run_id();
  std::vector<const rs::Entry*> to_fetch;
  std::vector<std::string> uris;
  for (const auto& r : due) {
    to_fetch.push_back(&r.entry);
    uris.push_back(r.uri);
  }
  auto held = ctx.held_for(feed, uris);
  if (!held) {
    return tl::unexpected(held.error());
  }
  Result<void> ended;
  auto fetched_content = fetch_for_batch(ctx, {}, to_fetch, batch, ended);
  if (!fetched_content) {
    return ended;
  }
  auto& results = *fetched_content;
  size_t stored = 0;
  for (size_t i = 0; i < due.size(); ++i) {
    const store::RetryRecord& was = due[i];
    const rs::Entry& e = was.entry;
    if (!results[i]) {
      ++batch.counters.failed;
      ctx.error(e.loc,
                results[i].error().message + " (failed before: attempt " + std::to_string(was.attempts + 1) + ")");
      batch.retries.push_back(
          ctx.retry_for(e, was.change, was.change_datetime, results[i].error().message, was.attempts + 1));
      continue;
    }
    ++stored;
    ResourceRecord rec = record_for(e, results[i]->blob, results[i]->served_from, results[i]->type);
    batch.counters.bytes += results[i]->blob.length;
    auto it = held->find(e.loc);
    const bool had = it != held->end() && it->second.state == ResourceState::live;
    if (had && it->second.blob_sha256 == rec.blob_sha256) {
      ++batch.counters.unchanged;
    } else {
      const rs::Change change = had ? rs::Change::updated : was.change.value_or(rs::Change::created);
      ++(change == rs::Change::created ? batch.counters.created : batch.counters.updated);
      batch.changes.push_back(ChangeRecord{change, was.change_datetime ? was.change_datetime : e.change_time(), rec});
    }
    batch.upserts.push_back(std::move(rec));
  }
  ctx.note("retried " + std::to_string(due.size()) + " resource" + (due.size() == 1 ? "" : "s") +
           " whose content failed before: " + std::to_string(stored) + " stored, " +
           std::to_string(due.size() - stored) + " still failing");
  if (auto r = ctx.commit(batch); !r) {
    return r;
  }
  return ctx.drain();
}


std::optional<std::vector<Result<FetchedContent>>> fetch_for_batch(RunContext& ctx, const ContentSource& source,
                                                                   const std::vector<const rs::Entry*>& to_fetch,
                                                                   store::Batch& batch, Result<void>& ended) {
  auto results = source ? source(to_fetch) : ctx.fetch_all(to_fetch);
  if (ctx.cancelled()) {
    ended = ctx.commit(batch); // refused: nothing of this batch is applied
    return std::nullopt;
  }
  for (size_t i = 0; i < results.size() && i < to_fetch.size(); ++i) {
    if (!results[i] && is_disk_full(results[i].error())) {
      // Nothing of this batch is applied; the run waits for space. The
      // error names the content that did not fit, not the document the
      // run was reading.
      Error full = results[i].error();
      full.message = "content of " + to_fetch[i]->loc + ": " + full.message;
      ended = tl::unexpected(std::move(full));
      return std::nullopt;
    }
  }
  return results;
}

} // namespace tributary::sync

#include "sync_engine/run_context.h"

#include "sync_engine/read_ahead.h"

#include <unordered_map>

// A baseline: make what we hold of a feed equal to its Resource List (or
// Resource Dump), then start the watermark at the list's `at`.
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
  if (at && *at > now + ctx.src.clock_tolerance) {
    // The Source's clock is ahead: a watermark in the future would skip
    // every change it dates correctly later.
    ctx.note("the list's 'at' (" + rs::format_w3c_datetime(*at) +
             ") is in the future: the Source's clock is ahead; the baseline is dated when it was read");
    const double ahead = std::chrono::duration<double>(*at - now).count();
    ctx.report.clock_ahead_seconds = std::max(ctx.report.clock_ahead_seconds.value_or(0.0), ahead);
    ctx.report.clock_checked = true;
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
    store::Batch b;
    b.feed_id = feed;
    b.run_id = ctx.run_id;
    b.watermark = w;
    if (auto r = ctx.commit(b); !r) {
      return r;
    }
    return ctx.drain();
  }
  // In a LogWindow (a baseline while a Change List is followed), the
  // deletions wait with the rest: the Change List may bring the changes
  // before them.
  LogWindow* window = ctx.log_window();
  auto deleted = ctx.store.delete_unseen(
      feed, ctx.run_id, w, ctx.src.max_deletion_share, ctx.all_seen(feed),
      window ? store::DeferLog([window](const ChangeRecord& c) { return window->defer(c); }) : store::DeferLog());
  if (!deleted) {
    return tl::unexpected(deleted.error());
  }
  ctx.report.counters.deleted += deleted->logged; // (those the window took are counted when it logs them)
  if (deleted->held) {
    ctx.report.deletions_held += deleted->unseen;
    ctx.note("deletions held: the list lacks " + std::to_string(deleted->unseen) + " of the " +
             std::to_string(deleted->live) + " resources held (more than " +
             std::to_string(static_cast<int>(ctx.src.max_deletion_share * 100 + 0.5)) +
             "%, max_deletion_share); none deleted until an operator confirms (POST /api/v1/sources/" +
             ctx.src.name + "/confirm-deletions, then a baseline)");
  }
  return {};
}

namespace {

Result<void> baseline_document(RunContext& ctx, int64_t feed, const SpooledDocument& doc) {
  if (doc.deferred()) {
    // Its first batch is fetched while it is validated; nothing of it is
    // committed before the verdict.
    ctx.hold_commits_until([&ctx, &doc]() -> Result<void> {
      auto r = ctx.check_spooled(doc, rs::Capability::resourcelist);
      if (r) {
        ctx.total += doc.summary().entries;
      }
      return r;
    });
  } else {
    ctx.total += doc.summary().entries;
  }
  Result<void> status;
  ChunkHandler h(ctx.opt.batch_size, [&](std::vector<rs::Entry>& entries) {
    status = baseline_batch(ctx, feed, entries);
    ctx.done += entries.size();
    ctx.progress(doc.url());
    return static_cast<bool>(status);
  });
  ctx.watch_rejections(h, doc.url());
  // A first batch of an eighth: fetching starts once 125 entries are read
  // rather than 1,000 (3 ms of a 10,000-resource baseline's first 30).
  const size_t first = ctx.opt.batch_size >= 64 ? ctx.opt.batch_size / 8 : ctx.opt.batch_size;
  h.set_first_chunk(first);
  auto r = read_ahead(doc, h, ctx.opt.batch_size, [&] { return !status; }, first);
  // The verdict, if no commit asked for it yet (every entry unchanged, or
  // the reading stopped): never left behind for a later commit.
  auto valid = ctx.pass_commit_gate();
  if (!status) {
    return status;
  }
  if (!valid) {
    return valid;
  }
  if (!r) {
    return tl::unexpected(r.error());
  }
  if (h.finish() && status) {
    if (auto rest = ctx.take_rejected_uris(); !rest.empty()) {
      store::Batch batch; // rejected entries after the last batch: listed all the same
      batch.feed_id = feed;
      batch.run_id = ctx.run_id;
      batch.seen = std::move(rest);
      status = ctx.commit(batch);
    }
  }
  return status;
}

} // namespace

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
    if (last[e.loc] == i && ctx.src.selects(e.loc, e.md ? e.md->type : std::nullopt)) {
      entries.push_back(&e);
      uris.push_back(e.loc);
    }
  }
  store::Batch batch;
  batch.feed_id = feed;
  batch.run_id = ctx.run_id;
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
  auto results = source ? source(to_fetch) : ctx.fetch_all(to_fetch);
  if (ctx.cancelled()) {
    return ctx.commit(batch); // refused: nothing of this batch is applied
  }
  if (auto full = RunContext::disk_full(results)) {
    return tl::unexpected(*full); // nothing of this batch is applied; the run waits for space
  }
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


Result<void> baseline_from_list(RunContext& ctx, int64_t feed, const std::string& rl_url) {
  ctx.validators.forget_prefix(ctx.src.name + " "); // the watermark moves: ask for everything again
  auto doc = ctx.spool(rl_url, rs::Capability::resourcelist, false, /*defer_validation=*/true);
  if (!doc) {
    return tl::unexpected(doc.error());
  }
  // Its validators are kept: a Source that offers no Change List is then
  // polled with a conditional request from the first run after this one.
  return baseline_from_spooled(ctx, feed, std::move(*doc), true);
}

Result<void> baseline_from_spooled(RunContext& ctx, int64_t feed, std::unique_ptr<SpooledDocument> top,
                                   bool remember) {
  auto* doc = &top; // as the Result it was
  std::vector<std::string> parts;
  const rs::DocumentHeader* early = (*doc)->early_header();
  if ((early ? early->root : (*doc)->header().root) == rs::RootElement::sitemapindex) {
    if ((*doc)->deferred()) {
      if (auto v = ctx.check_spooled(**doc, rs::Capability::resourcelist); !v) {
        return v; // an index is read whole here: validated first
      }
    }
    CollectingHandler h;
    if (auto r = (*doc)->read(h); !r) {
      return tl::unexpected(r.error());
    }
    for (const auto& e : h.document.entries) {
      parts.push_back(e.loc);
    }
  }
  ctx.progress_start = std::chrono::steady_clock::now();
  if (parts.empty()) {
    if (auto r = baseline_document(ctx, feed, **doc); !r) {
      return r;
    }
  } else {
    for (const auto& part : parts) {
      auto p = ctx.spool(part, rs::Capability::resourcelist, false, /*defer_validation=*/true);
      if (!p) {
        return tl::unexpected(p.error());
      }
      if (auto r = baseline_document(ctx, feed, **p); !r) {
        return r;
      }
      if (remember) {
        ctx.remember_validators(**p);
      }
    }
  }
  // (Read once validated: a header element after the entries counts too.)
  const auto at = (*doc)->header().md->at;
  const auto completed = (*doc)->header().md->completed;
  if (auto r = close_baseline(ctx, feed, at, completed); !r) {
    return r;
  }
  if (remember) {
    ctx.remember_validators(*top, parts);
  }
  return {};
}

// A baseline from a Resource Dump (or its index): each package is
// downloaded to a file, verified against its rs:md, checked whole, and
// applied in one transaction; the manifests' earliest `at` is where
// incremental sync continues.
constexpr size_t k_dump_slice = 2500;

Result<void> baseline_from_dump(RunContext& ctx, int64_t feed, const std::string& rd_url) {
  ctx.validators.forget_prefix(ctx.src.name + " ");
  std::optional<rs::Timestamp> at;
  auto packages = dump_packages(ctx, rd_url, rs::Capability::resourcedump, at);
  if (!packages) {
    return tl::unexpected(packages.error());
  }
  if (packages->empty()) {
    return make_error(ErrorKind::invalid_document, rd_url + ": the Resource Dump lists no package");
  }
  ctx.progress_start = std::chrono::steady_clock::now();
  std::optional<rs::Timestamp> manifest_at;
  for (const auto& pkg : *packages) {
    auto opened = open_package(ctx, pkg, rs::Capability::resourcedump_manifest);
    if (!opened) {
      return tl::unexpected(opened.error());
    }
    const DumpPackage& package = *opened->package;
    if (auto a = package.header().md->at; a && (!manifest_at || *a < *manifest_at)) {
      manifest_at = a;
    }
    // In slices, each its own transaction, read from the manifest as they
    // are applied: a package of 10,000 applied as one batch held every
    // record, its change and its seen mark at once (about 100 MB at a
    // million resources). A baseline needs no package applied whole: an
    // interrupted one is run again, and what it applied is then unchanged.
    // Slices of 2,500 (or batch_size, if larger): at 1,000 the commits (a
    // pack sync and an index sync each) cost a quarter of the rate.
    ctx.total += package.size();
    const size_t step = std::max<size_t>(ctx.opt.batch_size, k_dump_slice);
    auto r = package.read_manifest(step, [&](std::vector<rs::Entry>& entries, size_t from) -> Result<void> {
      const rs::Entry* first = entries.data();
      auto applied = baseline_batch(ctx, feed, entries, [&](const std::vector<const rs::Entry*>& wanted) {
        return extract_entries(ctx, package, wanted,
                               [first, from](const rs::Entry* e) { return from + static_cast<size_t>(e - first); });
      });
      ctx.done += entries.size();
      ctx.progress(pkg.loc);
      return applied;
    });
    if (!r) {
      return r;
    }
  }
  if (auto r = close_baseline(ctx, feed, manifest_at ? manifest_at : at); !r) {
    return r;
  }
  ctx.note("baselined from the Resource Dump " + rd_url + " (" + std::to_string(packages->size()) + " package" +
           (packages->size() == 1 ? "" : "s") + ")");
  return {};
}

} // namespace tributary::sync

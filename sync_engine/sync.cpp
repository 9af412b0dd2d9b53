#include "sync_engine/sync.h"

#include "common/temp_files.h"
#include "common/text.h"
#include "sync_engine/discovery.h"
#include "sync_engine/iiif/harvest.h"
#include "sync_engine/oai/harvest.h"
#include "sync_engine/feed_writer.h"
#include "sync_engine/run_context.h"
#include "store/history_check.h"
#include "common/log.h"
#include "common/url_resolve.h"

// A run over one source: the run's record in the store, its feeds (one per
// Capability List) and, per feed, the way of syncing that the mode and the
// source's strategy call for. The ways live in files of their own (see
// run_context.h).
namespace tributary::sync {

namespace {

// A baseline (or an audit that may repair by one) of a feed that follows a
// Change List: the log entries of changes after the watermark wait in a
// LogWindow while `baseline` runs, the Change List is then applied from
// the baseline's overlap, and what it did not log is logged last (through
// the change log's rule: nothing twice). See log_window.h.
Result<void> baseline_in_window(RunContext& ctx, int64_t feed, const std::string& cl, const std::string& rl,
                                const std::string& cla, const std::function<Result<void>()>& baseline) {
  auto wm = ctx.settled_watermark(feed);
  if (!wm) {
    return tl::unexpected(wm.error());
  }
  // From the watermark's own time (after an earlier baseline, its `at` less
  // the overlap): a change in that overlap is one the Change List will
  // bring again, and may be preceded there by one this list jumped over.
  const std::optional<rs::Timestamp> through = wm->last_time;
  if (cl.empty() || !through || !wm->change_list_url) {
    return baseline(); // not following a Change List: its entries are logged as they are applied
  }
  LogWindow window(*through);
  ctx.set_log_window(&window);
  auto r = baseline();
  ctx.set_log_window(nullptr);
  if (window.size() == 0) {
    return r;
  }
  if (r) {
    ctx.note("the baseline held " + std::to_string(window.size()) +
             " change(s) after the last one applied until the Change List was applied through them");
    r = incremental_from_list(ctx, feed, cl, rl, cla);
  }
  // Whatever became of the Change List, what the baseline stored is logged
  // (each no more than once).
  if (auto c = commit_log(ctx, feed, window.take()); !c) {
    return c;
  }
  if (auto d = ctx.drain(); !d) {
    return d;
  }
  return r;
}

// The end of every audit: the feed's change log checked against what a
// follower relies on (store/history_check.h), said in the run's notes.
Result<void> note_history(RunContext& ctx, int64_t feed) {
  if (auto d = ctx.drain(); !d) {
    return d;
  }
  auto checked = store::check_history(ctx.store(), {feed}, false, 3);
  if (!checked) {
    return tl::unexpected(checked.error());
  }
  const store::HistoryReport& h = checked->report;
  std::string note = "history: " + std::to_string(h.uris) + " URIs, " + std::to_string(h.entries) + " log entries";
  if (h.ok()) {
    note += ", as a follower relies on";
  } else {
    note += "; NOT as a follower relies on: " + std::to_string(h.repeated) + " logged twice, " +
            std::to_string(h.backwards) + " dated before an earlier entry, " + std::to_string(h.disagreeing) +
            " whose last entry is not what we hold (first: " + h.first.front().uri + ": " + h.first.front().what +
            "); `tributary check-history --repair` mends what followers hold";
    log::warn(ctx.src().name, note);
  }
  ctx.note(note);
  return {};
}

// What a Capability List offers: the first of each capability it lists,
// made absolute.
struct Offered {
  std::string rl;  // Resource List
  std::string cl;  // Change List
  std::string rd;  // Resource Dump
  std::string cd;  // Change Dump
  std::string cla; // Change List Archive
  std::string cda; // Change Dump Archive
};

// Capability → where it goes in Offered.
struct OfferedSlot {
  std::string_view capability;
  std::string Offered::*slot;
};
constexpr OfferedSlot k_offered[] = {
    {"resourcelist", &Offered::rl},        {"changelist", &Offered::cl},
    {"resourcedump", &Offered::rd},        {"changedump", &Offered::cd},
    {"changelist-archive", &Offered::cla}, {"changedump-archive", &Offered::cda},
};

// The Capability List at `caplist_url`, read: what it offers, and its
// Change Notification channels (into the run's report).
Result<Offered> read_capability_list(RunContext& ctx, const std::string& caplist_url) {
  CollectingHandler h;
  auto got = fetch_document(*ctx.fetcher(), caplist_url, ctx.fetch_options(), h, [&] { h.reset(); });
  if (!got) {
    return tl::unexpected(got.error());
  }
  if (!got->summary.usable() || h.document.header.capability() != rs::Capability::capabilitylist) {
    return make_error(ErrorKind::invalid_document, caplist_url + ": not a valid Capability List");
  }
  Offered o;
  for (const auto& e : h.document.entries) {
    if (!e.md || !e.md->capability) {
      continue;
    }
    const std::string& cap = *e.md->capability;
    auto abs = resolve_reference(caplist_url, e.loc);
    if (!abs) {
      continue;
    }
    for (const auto& [capability, slot] : k_offered) {
      if (cap == capability && (o.*slot).empty()) {
        o.*slot = *abs;
      }
    }
    if (cap == "changelist-notification") {
      NotificationChannel ch{caplist_url, *abs, {}};
      for (const auto& l : e.links) {
        if (l.rel == "hub") {
          auto hub = resolve_reference(caplist_url, l.href);
          ch.hub = hub ? *hub : std::string();
          break;
        }
      }
      ctx.report().channels.push_back(std::move(ch));
    }
  }
  return o;
}

Result<void> need_resource_list(const Offered& o, const std::string& caplist_url) {
  if (o.rl.empty()) {
    return make_error(ErrorKind::invalid_document, caplist_url + ": the Capability List offers no Resource List");
  }
  return {};
}

// A baseline comes from the Resource Dump when the strategy allows and
// the Capability List offers one; a broken dump falls back to the
// Resource List ("auto"), saying so in the run.
Result<void> baseline_offered(RunContext& ctx, int64_t feed, const Offered& o, const std::string& caplist_url) {
  RunContext::BaselineScope counted(ctx);
  if (ctx.src().strategy != "lists" && !o.rd.empty()) {
    auto r = baseline_from_dump(ctx, feed, o.rd);
    if (r || ctx.src().strategy == "dumps" || o.rl.empty()) {
      return r;
    }
    ctx.note("Resource Dump unusable, baselined from the Resource List instead: " + r.error().message);
  } else if (ctx.src().strategy == "dumps" && o.rd.empty()) {
    ctx.note("strategy \"dumps\", but the Capability List offers no Resource Dump: baselined from the Resource List");
  }
  if (auto r = need_resource_list(o, caplist_url); !r) {
    return r;
  }
  return baseline_from_list(ctx, feed, o.rl);
}

// An incremental run: a baseline first when never synced, then the Change
// Dump or the Change List (or, with neither, the Resource List polled),
// then the retries that are due.
Result<void> incremental_offered(RunContext& ctx, int64_t feed, const Offered& o, const std::string& caplist_url) {
  auto wm = ctx.settled_watermark(feed);
  if (!wm) {
    return tl::unexpected(wm.error());
  }
  const bool fresh = !wm->baseline_at && !wm->last_time;
  if (fresh) {
    ctx.note("never synced: baseline first");
    if (auto r = baseline_offered(ctx, feed, o, caplist_url); !r) {
      return r;
    }
  }
  if (ctx.src().strategy != "lists" && !o.cd.empty()) {
    if (auto r = incremental_from_dump(ctx, feed, o.cd, o.cda); !r) {
      if (ctx.src().strategy == "dumps" || o.cl.empty()) {
        return r;
      }
      ctx.note("Change Dump unusable, following the Change List instead: " + r.error().message);
    }
  }
  if (o.cl.empty() && o.cd.empty()) {
    ctx.report().kind = "resource-list-only";
    // The commonest Source: a Resource List and nothing after it (just
    // compared, when this run baselined).
    if (auto r = need_resource_list(o, caplist_url); !r) {
      return r;
    }
    if (!fresh) {
      if (auto r = poll_list(ctx, feed, o.rl); !r) {
        return r;
      }
    }
  } else if (o.cl.empty()) {
    ctx.note("no Change List offered");
  } else if (auto r = incremental_from_list(ctx, feed, o.cl, o.rl, o.cla); !r) {
    return r;
  }
  return retry_failed(ctx, feed);
}

Result<void> sync_feed(RunContext& ctx, int64_t feed, const std::string& caplist_url) {
  auto offered = read_capability_list(ctx, caplist_url);
  if (!offered) {
    return tl::unexpected(offered.error());
  }
  const Offered& o = *offered;
  switch (ctx.opt().mode) {
  case store::RunMode::baseline:
    return baseline_in_window(ctx, feed, o.cl, o.rl, o.cla,
                              [&] { return baseline_offered(ctx, feed, o, caplist_url); });
  case store::RunMode::audit:
    if (auto r = need_resource_list(o, caplist_url); !r) {
      return r;
    }
    if (auto r = baseline_in_window(ctx, feed, o.cl, o.rl, o.cla, [&] { return audit(ctx, feed, o.rl); }); !r) {
      return r;
    }
    return note_history(ctx, feed);
  case store::RunMode::incremental:
    return incremental_offered(ctx, feed, o, caplist_url);
  }
  return {};
}

// A feed that is a Resource List (or index, or plain sitemap) with no
// Capability List above it: baselined from it, audited against it, and
// followed by polling it.
Result<void> sync_list_feed(RunContext& ctx, int64_t feed, const std::string& list_url) {
  switch (ctx.opt().mode) {
  case store::RunMode::baseline: {
    RunContext::BaselineScope counted(ctx); // counted as a baseline's, not as changes
    return baseline_from_list(ctx, feed, list_url);
  }
  case store::RunMode::audit:
    return audit(ctx, feed, list_url);
  case store::RunMode::incremental: {
    auto wm = ctx.settled_watermark(feed);
    if (!wm) {
      return tl::unexpected(wm.error());
    }
    if (!wm->baseline_at && !wm->last_time) {
      // A first sync is a baseline, whatever kind of list: its creations
      // are what the Source holds, not changes it made (a plain sitemap
      // read once showed as 6-24 changes/min).
      ctx.note("never synced: baseline first");
      RunContext::BaselineScope counted(ctx);
      if (auto r = baseline_from_list(ctx, feed, list_url); !r) {
        return r;
      }
    } else if (auto r = poll_list(ctx, feed, list_url); !r) {
      return r;
    }
    return retry_failed(ctx, feed);
  }
  }
  return {};
}

// A source of kind "oai-pmh": each metadataPrefix (and set) a feed.
bool run_oai_feeds(RunContext& ctx) {
  ctx.report().kind = "oai-pmh";
  bool ok = true;
  for (const auto& f : oai_feeds(ctx.src())) {
    auto feed = ctx.store().ensure_feed(ctx.source_id(), f.feed_url);
    if (!feed) {
      ctx.error(f.feed_url, feed.error());
      ok = false;
      continue;
    }
    auto r = sync_oai_feed(ctx, *feed, f);
    auto drained = ctx.drain();
    if (!r) {
      ctx.error(f.feed_url, r.error());
      ok = false;
    } else if (!drained) {
      ctx.error(f.feed_url, drained.error());
      ok = false;
    }
    if (ctx.report().database_unreachable) {
      break;
    }
  }
  return ok;
}

// A source of kind "iiif-discovery": the stream is one feed.
bool run_iiif_feed(RunContext& ctx) {
  ctx.report().kind = "iiif-discovery";
  auto feed = ctx.store().ensure_feed(ctx.source_id(), ctx.src().url);
  if (!feed) {
    ctx.error(ctx.src().url, feed.error());
    return false;
  }
  auto r = sync_iiif_feed(ctx, *feed);
  auto drained = ctx.drain();
  if (!r) {
    ctx.error(ctx.src().url, r.error());
    return false;
  }
  if (!drained) {
    ctx.error(ctx.src().url, drained.error());
    return false;
  }
  return true;
}

bool run_resourcesync_feeds(RunContext& ctx);

// Source kind (config `kind`) → what runs its feeds; ResourceSync (and
// plain sitemaps) for any other.
struct KindRunner {
  std::string_view kind;
  bool (*run)(RunContext&);
};
constexpr KindRunner k_runners[] = {
    {"oai-pmh", run_oai_feeds},
    {"iiif-discovery", run_iiif_feed},
};

bool run_feeds(RunContext& ctx) {
  for (const auto& [kind, run] : k_runners) {
    if (ctx.src().kind == kind) {
      return run(ctx);
    }
  }
  return run_resourcesync_feeds(ctx);
}

// A ResourceSync Source: its Capability Lists (configured, or discovered
// with the Resource Lists and sitemaps that have none), a feed each.
bool run_resourcesync_feeds(RunContext& ctx) {
  std::vector<std::string> caplists = ctx.src().capability_lists;
  std::vector<std::string> lists; // Resource Lists or sitemaps without a Capability List
  if (caplists.empty()) {
    auto found = discover(*ctx.fetcher(), ctx.src().url, ctx.fetch_options());
    if (!found) {
      ctx.error(ctx.src().url, found.error().message);
      return false;
    }
    caplists = found->capability_lists;
    lists = found->resource_lists;
    ctx.report().kind = found->kind;
  }
  bool ok = true;
  std::vector<std::pair<std::string, bool>> feeds; // URL, is a list
  for (const auto& c : caplists) {
    feeds.emplace_back(c, false);
  }
  for (const auto& l : lists) {
    feeds.emplace_back(l, true);
  }
  for (const auto& [url, is_list] : feeds) {
    auto feed = ctx.store().ensure_feed(ctx.source_id(), url);
    if (!feed) {
      ctx.error(url, feed.error());
      ok = false;
      continue;
    }
    auto r = is_list ? sync_list_feed(ctx, *feed, url) : sync_feed(ctx, *feed, url);
    auto drained = ctx.drain(); // a batch still in flight commits (or fails) before we judge the feed
    if (!r) {
      ctx.error(url, r.error());
      ok = false;
    } else if (!drained) {
      ctx.error(url, drained.error());
      ok = false;
    }
    if (ctx.report().database_unreachable) {
      break; // the source's lease went with the connection: no further feed without it
    }
  }
  return ok;
}

// This run as other processes see it: "tributary baseline of 'x' (pid 7 on host)".
std::string describe_run(const RunContext& ctx) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return "tributary " + std::string(store::to_string(ctx.opt().mode)) + " of '" + ctx.src().name + "' (pid " +
         std::to_string(::getpid()) + " on " + host + ")";
}

// Takes the source's lease, waiting for another run to end if asked to;
// null (the reason reported) when it cannot.
std::unique_ptr<store::SourceLease> take_source(RunContext& ctx) {
  const std::string who = describe_run(ctx);
  for (bool noted = false;;) {
    auto got = ctx.store().try_lock_source(ctx.source_id(), who);
    if (!got) {
      ctx.error(ctx.src().url, got.error());
      return nullptr;
    }
    if (got->lease) {
      return std::move(got->lease);
    }
    if (!ctx.opt().wait_for_source) {
      ctx.report().busy = true;
      ctx.error(ctx.src().url, "source '" + ctx.src().name + "' is being synced by another run (" + got->holder +
                                 "): not run, nothing changed");
      return nullptr;
    }
    if (!noted) {
      ctx.note("waited for another run of the source to end (" + got->holder + ")");
      noted = true;
    }
    if (!sleep_unless_cancelled(ctx.opt().cancel, std::chrono::milliseconds(500))) {
      ctx.error(ctx.src().url, "stopped while waiting for another run of the source to end");
      return nullptr;
    }
  }
}

void execute(RunContext& ctx) {
  const auto started = std::chrono::steady_clock::now();
  ctx.report().source = ctx.src().name;
  ctx.report().mode = ctx.opt().mode;
  auto sid = ctx.store().ensure_source(ctx.src().name, ctx.src().url);
  if (!sid) {
    ctx.error(ctx.src().url, sid.error());
    ctx.report().status = store::RunStatus::failed;
    return;
  }
  ctx.set_source_id(*sid);
  if (const auto& u = ctx.opt().unrecorded) {
    // Runs that failed while the database could not be reached: in the
    // run history now, as one failed run.
    const std::string message = "the database could not be reached (" + std::to_string(u->attempts) + " run" +
                                (u->attempts == 1 ? "" : "s") + " failed before they could be recorded); last: " +
                                u->message;
    ctx.report().recorded_earlier =
        static_cast<bool>(ctx.store().record_failed_run(ctx.source_id(), u->mode, u->first_started, message));
  }
  // One run per source across processes: two baselines at once each
  // deleted what the other had seen, two incrementals logged changes twice.
  auto lease = take_source(ctx);
  if (!lease) {
    ctx.report().status = store::RunStatus::failed;
    return;
  }
  auto rid = ctx.store().begin_run(ctx.source_id(), ctx.opt().mode, ctx.opt().trigger);
  if (!rid) {
    ctx.error(ctx.src().url, rid.error());
    ctx.report().status = store::RunStatus::failed;
    return;
  }
  ctx.set_run_id(*rid);
  ctx.report().run_id = *rid;
  bool ok = ctx.setup() && run_feeds(ctx);
  if (!ctx.report().kind.empty()) {
    (void)ctx.store().set_source_kind(ctx.source_id(), ctx.report().kind);
  }
  if (ctx.report().clock_checked) {
    (void)ctx.store().set_source_clock(ctx.source_id(), ctx.report().clock_ahead_seconds);
    if (ctx.report().clock_ahead_seconds) {
      ctx.note("the Source's clock is ahead: changes dated up to " +
               std::to_string(static_cast<long long>(*ctx.report().clock_ahead_seconds)) +
               " s in the future were applied, and the watermark stays at the time they were read");
    }
  }
  ctx.report().status = !ok                         ? store::RunStatus::failed
                    : ctx.report().counters.failed ? store::RunStatus::partial
                                                : store::RunStatus::succeeded;
  if (!ok && ctx.cancelled() && ctx.opt().stopping && ctx.opt().stopping->load()) {
    ctx.report().status = store::RunStatus::interrupted;
    ctx.note("interrupted: the process shut down (what was committed stays; the next run resumes)");
  }
  ctx.report().duration =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  // The cause first (the counts are the run's columns): its first error,
  // how many more, then what the run decided.
  std::string message;
  if (!ctx.report().errors.empty()) {
    message = ctx.report().errors.front();
    if (ctx.report().error_count > 1) {
      message += " (and " + std::to_string(ctx.report().error_count - 1) + " more error" +
                 (ctx.report().error_count == 2 ? "" : "s") + ")";
    }
  }
  for (const auto& n : ctx.report().notes) {
    message += (message.empty() ? "" : "; ") + n;
  }
  (void)ctx.store().finish_run(ctx.run_id(), ctx.report().status, message, ctx.report().mode);
}

} // namespace

std::optional<ValidatorCache::Validators> ValidatorCache::get(const std::string& key) const {
  std::lock_guard lock(m_mutex);
  auto it = m_map.find(key);
  return it == m_map.end() ? std::nullopt : std::optional<Validators>(it->second);
}

void ValidatorCache::put(const std::string& key, Validators v) {
  std::lock_guard lock(m_mutex);
  m_map[key] = std::move(v);
}

void ValidatorCache::forget(const std::string& key) {
  std::lock_guard lock(m_mutex);
  m_map.erase(key);
}

void ValidatorCache::forget_prefix(const std::string& prefix) {
  std::lock_guard lock(m_mutex);
  for (auto it = m_map.lower_bound(prefix); it != m_map.end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
    it = m_map.erase(it);
  }
}

std::string format_counters(const store::RunCounters& c) {
  return "created " + std::to_string(c.created) + ", updated " + std::to_string(c.updated) + ", deleted " +
         std::to_string(c.deleted) + ", unchanged " + std::to_string(c.unchanged) + ", failed " +
         std::to_string(c.failed) + ", " + human_bytes(c.bytes);
}

SyncEngine::SyncEngine(std::shared_ptr<store::Store> store, std::shared_ptr<store::BlobStore> blobs,
                       std::shared_ptr<Fetcher> transport, std::shared_ptr<HostThrottle> throttle,
                       std::filesystem::path tmp_dir, std::shared_ptr<ValidatorCache> validators)
    : m_store(std::move(store)), m_blobs(std::move(blobs)), m_transport(std::move(transport)),
      m_throttle(std::move(throttle)), m_tmp(std::move(tmp_dir)) {
  // Spooled documents and dump packages of processes that died.
  remove_orphaned_temp_files(m_tmp, {"doc", "package"});
  if (validators) {
    m_validators = std::move(validators);
  }
}

SourceReport SyncEngine::run(const SourceConfig& source, const RunOptions& options) {
  SourceReport report;
  try {
    RunContext ctx(*m_store, *m_blobs, m_transport, m_throttle, m_tmp, source, options, report, *m_validators);
    execute(ctx);
  } catch (const std::exception& e) {
    report.status = store::RunStatus::failed;
    report.errors.push_back(std::string("internal error: ") + e.what());
    ++report.error_count;
  }
  return report;
}

} // namespace tributary::sync

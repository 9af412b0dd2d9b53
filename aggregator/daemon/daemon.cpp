#include "aggregator/daemon/daemon.h"
#include "aggregator/daemon/startup.h"

#include "aggregator/setup/content_store.h"
#include "aggregator/daemon/daemon_state.h"
#include "aggregator/daemon/housekeeping.h"
#include "aggregator/push/subscriber.h"
#include "aggregator/setup/publishing.h"
#include "aggregator/daemon/source_actions.h"
#include "aggregator/status/api.h"
#include "common/http/router.h"
#include "common/log.h"
#include "common/thread_name.h"
#include "common/version.h"
#include "republisher/server.h"
#include "aggregator/status/json.h"
#include "store/pg/pg_aux_store.h"
#include "store/pg/pg_store.h"
#include "sync_engine/sync.h"

#include <csignal>
#include <malloc.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <ostream>
#include <thread>

namespace tributary::agg {

// A run whose progress has not moved for this long looks stalled: it no
// longer holds one of the slots kept for the others (Scheduler::due).
constexpr std::chrono::seconds k_stall{10};
// A run whose progress has not moved for this long is stopped (at its next
// safe point), so that its source can start again: twice a document's own
// deadline (RetryPolicy::deadline, 90 s), so a single slow document never
// trips it. Issue #33 measured 326 s for one silent upstream.
constexpr std::chrono::seconds k_run_stall_deadline{180};

// The dispatcher: runs due sources on threads of their own, reloads the
// config on SIGHUP.
struct Daemon : DaemonState {
  std::string config_path;
  std::shared_ptr<store::PgStore> store; // the republisher's reads
  std::shared_ptr<store::BlobStore> blobs;
  std::shared_ptr<sync::Fetcher> fetcher = sync::make_default_fetcher();
  std::shared_ptr<sync::ValidatorCache> validators = std::make_shared<sync::ValidatorCache>();
  pub::Republisher* republisher = nullptr;
  PushSubscriber* subscriber = nullptr;

  // ---- configuration -------------------------------------------------------

  void apply_logging(const Config& c) {
    log::configure(*log::parse_level(c.log_level), *log::parse_format(c.log_format));
  }

  void load_admin_token(const Config& c) {
    admin_token.reset();
    if (!c.admin_token) {
      return;
    }
    auto t = sync::read_secret(*c.admin_token, "admin token");
    if (!t) {
      log::error("", "admin API disabled: " + t.error().message);
      return;
    }
    admin_token = *t;
  }

  static bool sets_equal(const Config& a, const Config& b) {
    if (a.sets.size() != b.sets.size()) {
      return false;
    }
    for (size_t i = 0; i < a.sets.size(); ++i) {
      if (a.sets[i].name != b.sets[i].name || a.sets[i].sources != b.sets[i].sources) {
        return false;
      }
    }
    return true;
  }

  void reload() {
    auto load = load_config(config_path);
    if (!load.config) {
      for (const auto& p : load.problems) {
        log::error("", "config not reloaded: " + p);
      }
      log::error("", "SIGHUP: " + config_path + " is invalid; still running with the previous config");
      std::lock_guard lock(mutex);
      Reload r;
      r.at = Clock::now();
      r.error = load.problems.empty() ? "invalid" : load.problems.front();
      if (load.problems.size() > 1) {
        r.error += " (and " + std::to_string(load.problems.size() - 1) + " more: see the log)";
      }
      last_reload = std::move(r);
      ++reloads_refused;
      return;
    }
    Config next = std::move(*load.config);
    mark_removed_sources(*operator_store, next);
    std::lock_guard lock(mutex);
    Reload report;
    report.at = Clock::now();
    report.ok = true;
    for (const auto& [key, same] : {std::pair<const char*, bool>{"listen", next.listen == config.listen},
                                    {"database", next.database == config.database},
                                    {"database_connections", next.database_connections == config.database_connections},
                                    {"database_wait", next.database_wait == config.database_wait},
                                    {"database_session", next.database_session == config.database_session},
                                    {"data_dir", next.data_dir == config.data_dir},
                                    {"public_url", next.public_url == config.public_url},
                                    {"change_list_part_size", next.change_list_part_size == config.change_list_part_size},
                                    {"resource_dump_interval", next.resource_dump_interval == config.resource_dump_interval},
                                    {"dump_package_size", next.dump_package_size == config.dump_package_size},
                                    {"dump_package_bytes", next.dump_package_bytes == config.dump_package_bytes},
                                    {"sets", sets_equal(next, config)},
                                    {"content", next.content.store == config.content.store &&
                                                    next.content.endpoint == config.content.endpoint &&
                                                    next.content.bucket == config.content.bucket &&
                                                    next.content.region == config.content.region &&
                                                    next.content.path_style == config.content.path_style},
                                    {"node_name", next.node_name == config.node_name}}) {
      if (!same) {
        log::warn("", std::string("SIGHUP: a change of '") + key + "' takes effect after a restart");
        report.restart_needed.emplace_back(key);
      }
    }
    report.sources = compare_sources(config, next);
    apply_logging(next);
    load_admin_token(next);
    scheduler.configure(next.sources, Clock::now());
    if (subscriber) {
      std::set<std::string> names;
      for (const auto& src : next.sources) {
        names.insert(src.name);
      }
      subscriber->configured(names);
    }
    next.push = config.push; // takes effect after a restart
    next.listen = config.listen;
    next.database = config.database;
    next.data_dir = config.data_dir;
    next.public_url = config.public_url;
    next.change_list_part_size = config.change_list_part_size;
    next.sets = config.sets;
    config = std::move(next);
    configured(report.at);
    log::info("", "config reloaded: " + describe(report.sources),
              {{"sources", std::to_string(config.sources.size())},
               {"added", std::to_string(report.sources.added.size())},
               {"removed", std::to_string(report.sources.removed.size())},
               {"disabled", std::to_string(report.sources.disabled.size())},
               {"enabled", std::to_string(report.sources.enabled.size())},
               {"changed", std::to_string(report.sources.changed.size())}});
    if (republisher && (!report.sources.added.empty() || !report.sources.removed.empty())) {
      republisher->sources_changed();
    }
    last_reload = std::move(report);
    ++reloads_ok;
    wake.notify_all();
  }

  // The configured sources' bookkeeping after a (re)load (under `mutex`):
  // when each was first had, and the series of removed ones dropped.
  void configured(Time now) {
    std::set<std::string> names;
    for (const auto& s : config.sources) {
      names.insert(s.name);
      configured_at.try_emplace(s.name, now);
    }
    std::erase_if(configured_at, [&names](const auto& kv) { return names.count(kv.first) == 0; });
    run_metrics.keep_only(names);
  }

  // ---- running sources ----------------------------------------------------

  void dispatch() {
    std::unique_lock lock(mutex);
    while (!stopping) {
      for (auto it = running.begin(); it != running.end();) {
        if (it->second.done) {
          it->second.thread.join();
          it = running.erase(it);
        } else {
          ++it;
        }
      }
      const Time now = Clock::now();
      if (database_back.exchange(false)) {
        scheduler.node_back(now);
      }
      if (disk.space_returned()) {
        scheduler.node_back(now);
      }
      // Runs that moved nothing for k_stall (a Source that accepts
      // connections and never answers) leave a slot for the others.
      size_t stalled = 0;
      for (auto& [name, r] : running) {
        const auto still = now - std::max(r.started, r.progressed);
        if (!r.done && still > k_stall) {
          ++stalled;
          scheduler.stalled(name);
        }
        if (!r.done && still > k_run_stall_deadline && r.cancel && !r.cancel->exchange(true)) {
          r.stalled_out = true;
          log::warn(name, "run stopped: no progress for " + std::to_string(k_run_stall_deadline.count()) +
                              " s; it starts again on its schedule");
        }
      }
      // While the disk is full no run starts (each would fail at its first
      // write); they all go within a second of space returning.
      for (Job& job : disk.is_full() ? std::vector<Job>{} : scheduler.due(now, config.max_concurrent_syncs, stalled)) {
        const sync::SourceConfig* cfg = scheduler.source(job.source);
        Running& r = running[job.source];
        if (r.thread.joinable()) {
          // Cannot happen (the scheduler keeps a removed source's run until
          // it finishes); never assign over a running thread.
          scheduler.busy(job.source, now);
          continue;
        }
        r.mode = job.mode;
        r.started = now;
        r.progress = {};
        r.progressed = now;
        r.done = false;
        r.stalled_out = false;
        r.cancel = std::make_shared<std::atomic<bool>>(false);
        r.thread = std::thread([this, job, src = *cfg, cancel = r.cancel] {
          name_thread("sync " + src.name);
          run_job(job, src, cancel);
        });
      }
      auto until = now + std::chrono::seconds(1);
      if (auto next = scheduler.next_due()) {
        until = std::clamp(*next, now + std::chrono::milliseconds(10), until);
      }
      wake.wait_until(lock, until);
    }
    // Stopping: runs stop at their next batch.
    for (auto& [name, r] : running) {
      if (r.cancel) {
        r.cancel->store(true);
      }
    }
    for (auto& [name, r] : running) {
      lock.unlock();
      r.thread.join();
      lock.lock();
    }
    running.clear();
  }

  // Whether an operator on another node paused the source since this node
  // last read the pauses: then the job does not run (no run is recorded).
  bool paused_elsewhere(const std::string& name) {
    auto now_paused = operator_store->pauses();
    if (!now_paused ||
        std::none_of(now_paused->begin(), now_paused->end(), [&](const auto& p) { return p.source == name; })) {
      return false;
    }
    std::lock_guard lock(mutex);
    apply_pauses(*this, *now_paused);
    scheduler.busy(name, Clock::now());
    if (auto it = running.find(name); it != running.end()) {
      it->second.done = true;
    }
    wake.notify_all();
    log::info(name, "run not started: the source is paused (by an operator on another node)");
    return true;
  }

  void run_job(const Job& job, const sync::SourceConfig& src, std::shared_ptr<std::atomic<bool>> cancel) {
    if (paused_elsewhere(src.name)) {
      return;
    }
    // While the database is away, runs are tried every few seconds: not said
    // each time (DatabaseHealth says the outage once a minute).
    (database.outage() || disk.is_full() ? log::debug : log::info)(
        src.name, "run started",
        {{"mode", std::string(store::to_string(job.mode))}, {"trigger", std::string(store::to_string(job.trigger))}});
    const auto started = std::chrono::time_point_cast<std::chrono::microseconds>(Clock::now());
    const sync::SourceReport report = execute(job, src, cancel.get());
    const bool ok = report.status != store::RunStatus::failed;
    log_outcome(job, src, report, ok);
    after_run(job, src, report, ok, started);
  }

  // The run itself, on a store session of its own: its report, a failed
  // one when no session could be had or the engine threw.
  sync::SourceReport execute(const Job& job, const sync::SourceConfig& src, std::atomic<bool>* cancel) {
    sync::SourceReport report;
    report.mode = job.mode; // what the engine found it to be, once it ran
    std::optional<sync::RunOptions::Unrecorded> earlier; // runs that failed unrecorded
    {
      std::lock_guard lock(mutex);
      if (auto it = unrecorded.find(src.name); it != unrecorded.end()) {
        earlier = it->second;
      }
    }
    auto session = store->open_session();
    if (!session) {
      report.source = src.name;
      report.status = store::RunStatus::failed;
      report.errors.push_back(session.error().message);
      report.error_count = 1;
      report.database_unreachable = session.error().kind == ErrorKind::database;
    } else {
      sync::SyncEngine engine(std::shared_ptr<store::Store>(std::move(*session)), blobs, fetcher, throttle,
                              std::filesystem::path(config.data_dir) / "tmp", validators);
      sync::RunOptions options;
      options.mode = job.mode;
      options.trigger = job.trigger;
      options.repair = job.mode == store::RunMode::audit;
      options.cancel = cancel; // set when the daemon stops, or the run stalls (k_run_stall_deadline)
      options.stopping = &stopping;
      options.unrecorded = earlier;
      options.on_progress = [this, name = src.name](const sync::Progress& p) {
        std::lock_guard lock(mutex);
        if (auto it = running.find(name); it != running.end()) {
          if (p.done != it->second.progress.done || p.document != it->second.progress.document) {
            it->second.progressed = Clock::now();
          }
          it->second.progress = p;
        }
      };
      // A run's thread must never end the daemon: whatever escapes the
      // engine fails this run of this source, and the rest go on.
      try {
        report = engine.run(src, options);
      } catch (const std::exception& e) {
        report.source = src.name;
        report.mode = job.mode;
        report.status = store::RunStatus::failed;
        report.errors.push_back(std::string("internal error: ") + e.what());
        report.error_count = 1;
      } catch (...) {
        report.source = src.name;
        report.status = store::RunStatus::failed;
        report.errors.push_back("internal error");
        report.error_count = 1;
      }
    }
    return report;
  }

  void log_outcome(const Job& job, const sync::SourceConfig& src, const sync::SourceReport& report, bool ok) {
    log::Fields fields{{"mode", std::string(store::to_string(report.mode))},
                       {"trigger", std::string(store::to_string(job.trigger))},
                       {"status", std::string(store::to_string(report.status))},
                       {"run", std::to_string(report.run_id)},
                       {"seconds", std::to_string(static_cast<double>(report.duration.count()) / 1000.0)},
                       {"counts", sync::format_counters(report.counters)},
                       {"errors", std::to_string(report.error_count)}};
    if (!report.errors.empty()) {
      fields.emplace_back("first_error", report.errors.front());
    }
    if (ok) {
      log::info(src.name, "run finished", fields);
    } else if ((report.database_unreachable && database.outage()) || (report.disk_full && disk.is_full())) {
      // The outage is said once a minute (DatabaseHealth), not at every
      // try of every source.
      log::debug(src.name, "run failed", fields);
    } else {
      log::error(src.name, "run failed", fields);
    }
    for (const auto& n : report.notes) {
      log::info(src.name, "note: " + n);
    }
  }

  // What the run tells the rest of the daemon: the subscriber, the
  // republisher, the health of the database and the disk, the scheduler,
  // the metrics and the status history.
  void after_run(const Job& job, const sync::SourceConfig& src, const sync::SourceReport& report, bool ok,
                 rs::Timestamp started) {
    // A baseline allocates and frees a lot; keep the daemon's footprint
    // what it holds, not its peak.
    malloc_trim(0);
    const auto& c = report.counters;
    if (subscriber) {
      if (ok) {
        subscriber->discovered(src.name, report.channels);
      }
      subscriber->ran(src.name, c.created + c.updated + c.deleted > 0);
    }
    if (republisher && c.created + c.updated + c.deleted > 0) {
      republisher->refresh_soon(); // our Change List shows the changes now, not at the next check
    }
    // Whether the database answered: a run that could not reach it waits
    // for it (no back-off); one that did ends the outage for every source.
    bool reached_again = false;
    if (report.disk_full) {
      disk.full(report.errors.empty() ? "no space left" : report.errors.front());
    }
    if (report.database_unreachable) {
      database.lost(report.errors.empty() ? "connection lost" : report.errors.front());
    } else if (report.run_id != 0 || report.busy) {
      reached_again = database.answered();
    }
    std::lock_guard lock(mutex);
    if (report.recorded_earlier) {
      unrecorded.erase(src.name);
    }
    if (report.database_unreachable && report.run_id == 0) {
      // In no run history yet: recorded by the next run that reaches the
      // database, as one failed run.
      auto& u = unrecorded[src.name];
      if (u.attempts == 0) {
        u.mode = job.mode;
        u.first_started = started;
      }
      ++u.attempts;
      u.message = report.errors.empty() ? "database connection lost" : report.errors.front();
    }
    if (report.busy) {
      scheduler.busy(src.name, Clock::now()); // another process runs it: not a failure of ours
    } else if (report.database_unreachable || report.disk_full) {
      scheduler.wait_for_node(src.name, job.mode, Clock::now());
    } else {
      scheduler.finished(src.name, job.mode, ok, Clock::now());
    }
    if (reached_again) {
      scheduler.node_back(Clock::now());
    }
    run_metrics.record(src.name, job.mode, report.mode, job.trigger, report.status, report.counters, report.baseline,
                       report.duration);
    if (history_store && report.run_id != 0) {
      const auto& b = report.baseline;
      const uint64_t stored = b.created + b.updated + b.deleted;
      const uint64_t rest = c.created + c.updated + c.deleted - stored;
      const bool all_baseline = job.mode == store::RunMode::baseline;
      (void)history_store->record_run(src.name, true, stored + (all_baseline ? rest : 0));
      (void)history_store->record_run(src.name, false, all_baseline ? 0 : rest);
    }
    if (auto it = running.find(src.name); it != running.end()) {
      it->second.done = true;
    }
    sample_soon = true;
    wake.notify_all();
    }
};

namespace {

// The steps of `tributary run`, in the order run_daemon takes them.

// The stores, each on connections of its own, and the content store; the
// schedule, with the pauses operators set on any node. False (said on
// `err`) when one cannot be opened.
bool open_stores(Daemon& d, std::shared_ptr<store::PgReaderPool>& lookups_out, std::ostream& err) {
  auto store = store::PgStore::open(d.config.database);
  if (!store) {
    err << "tributary run: " << store.error().message << '\n';
    return false;
  }
  d.store = std::move(*store);
  auto status_store = store::PgStore::open(d.config.database);
  if (!status_store) {
    err << "tributary run: " << status_store.error().message << '\n';
    return false;
  }
  d.status_store = std::move(*status_store);
  auto history_store = store::PgStatusStore::open(d.config.database);
  if (!history_store) {
    err << "tributary run: " << history_store.error().message << '\n';
    return false;
  }
  d.history_store = std::move(*history_store);
  auto operator_store = store::PgOperatorStore::open(d.config.database);
  if (!operator_store) {
    err << "tributary run: " << operator_store.error().message << '\n';
    return false;
  }
  d.operator_store = std::move(*operator_store);
  auto push_status = store::PgAuxStore::open(d.config.database);
  if (!push_status) {
    err << "tributary run: " << push_status.error().message << '\n';
    return false;
  }
  d.push_store = std::move(*push_status);
  auto lookups = store::PgReaderPool::open(d.config.database, k_lookup_connections);
  if (!lookups) {
    err << "tributary run: " << lookups.error().message << '\n';
    return false;
  }
  auto blobs = open_content(d.config);
  if (!blobs) {
    err << "tributary run: " << blobs.error().message << '\n';
    return false;
  }
  d.blobs = *blobs;
  d.tier = std::dynamic_pointer_cast<store::ObjectTier>(d.blobs->remote());
  d.scheduler.configure(d.config.sources, Clock::now());
  d.configured(Clock::now());
  mark_removed_sources(*d.operator_store, d.config);
  if (auto pauses = d.operator_store->pauses()) {
    apply_pauses(d, *pauses); // paused by an operator before this start, on any node
  } else {
    log::warn("", "pauses not read: " + pauses.error().message);
  }

  lookups_out = *lookups;
  return true;
}

// The republisher's options from the config: shared dumps, archives and
// our hub (null when off).
bool publishing_options(Daemon& d, pub::PublishOptions& publishing, std::ostream& err) {
  publishing = publish_options(d.config);
  publishing.poll_interval = k_listening_poll_interval;
  if (auto shared = share_dumps(publishing, d.config, *d.blobs); !shared) {
    err << "tributary run: " << shared.error().message << '\n';
    return false;
  }
  if (auto archive = attach_archive(publishing, d.config); !archive) {
    err << "tributary run: " << archive.error().message << '\n';
    return false;
  }
  auto hub = make_hub(d.config);
  if (!hub) {
    err << "tributary run: " << hub.error().message << '\n';
    return false;
  }
  publishing.hub = *hub;
  return true;
}

} // namespace

int run_daemon(const std::string& config_path, std::ostream& out, std::ostream& err) {
  auto load = load_config(config_path);
  for (const auto& p : load.problems) {
    err << p << '\n';
  }
  if (!load.config) {
    return 1;
  }
  apply_process_settings(*load.config);
  sigset_t signals = block_signals();
  auto d = std::make_unique<Daemon>();
  d->config_path = config_path;
  d->config = std::move(*load.config);
  d->disk.set_dir(d->config.data_dir); // data_dir is not reloaded
  d->apply_logging(d->config);
  d->load_admin_token(d->config);
  std::shared_ptr<store::PgReaderPool> lookups;
  if (!open_stores(*d, lookups, err)) {
    return 1;
  }
  Daemon* dp = d.get();
  pub::PublishOptions publishing;
  if (!publishing_options(*d, publishing, err)) {
    return 1;
  }
  const std::shared_ptr<pub::Hub> hub = publishing.hub;
  pub::Republisher republisher(d->store, d->blobs, publishing, lookups);
  // Commits to the change log by other daemons on the database (and our
  // own) wake the documents at once.
  store::ChangeListener listener(d->config.database, [&republisher] { republisher.refresh_soon(); });
  d->republisher = &republisher;
  if (auto r = republisher.start(); !r) {
    err << "tributary run: " << r.error().message << '\n';
    return 1;
  }
  std::unique_ptr<PushSubscriber> subscriber = make_subscriber(*d, d->fetcher, err);
  if (!subscriber) {
    return 1;
  }
  d->subscriber = subscriber.get();
  // One server: the status API beside the republisher's routes; with
  // operator_listen, the operator's surfaces on a server of their own.
  StatusApi status_api(*d);
  http::Router router;
  http::Router operator_router;
  std::unique_ptr<http::Server> operator_server;
  if (d->config.operator_listen.empty()) {
    status_api.mount(router);
  } else if (!(operator_server = start_operator_server(*d, status_api, router, operator_router, err))) {
    return 1;
  }
  router.mount(subscriber->callback_path(), [&subscriber](const http::Request& req, http::Response& res, bool can_block) {
    return subscriber->handle(req, res, can_block);
  });
  router.fallback(republisher.handler());
  const http::ServerOptions listen = server_options(d->config);
  http::Server server(listen, [&router](const http::Request& req, http::Response& res, bool can_block) {
    return router(req, res, can_block);
  });
  if (auto r = server.start(); !r) {
    err << "tributary run: " << r.error().message << '\n';
    return 1;
  }
  const std::string base = d->config.public_url.back() == '/' ? d->config.public_url.substr(0, d->config.public_url.size() - 1)
                                                               : d->config.public_url;
  log::info("", "tributary " + std::string(version()) + " running",
            {{"listen", listen.host + ":" + std::to_string(server.port())},
             {"sources", std::to_string(d->config.sources.size())},
             {"status_page", base + "/status"},
             {"source_description", base + "/.well-known/resourcesync"}});
  out << "status page: " << base << "/status\n"
      << "source description: " << base << "/.well-known/resourcesync" << std::endl;

  std::promise<void> dispatched;
  auto dispatcher_done = dispatched.get_future();
  std::thread dispatcher([dp, &dispatched] {
    name_thread("dispatcher");
    dp->dispatch();
    dispatched.set_value();
  });
  Housekeeping housekeeping(*dp, dp->republisher);
  std::thread pruner([&housekeeping] {
    name_thread("prune runs");
    housekeeping.prune_runs();
  });
  std::thread sampler([&housekeeping] {
    name_thread("history");
    housekeeping.sample_history();
  });
  if (hub) {
    hub->start();
  }
  subscriber->start();
  wait_for_stop(signals, config_path, [dp] { dp->reload(); });
  stop_runs(*d, dispatcher_done);
  dispatcher.join();
  pruner.join();
  sampler.join();
  server.stop();
  if (operator_server) {
    operator_server->stop();
  }
  subscriber->stop();
  d->subscriber = nullptr;
  if (hub) {
    hub->stop();
  }
  republisher.stop();
  log::info("", "stopped");
  return 0;
}

} // namespace tributary::agg

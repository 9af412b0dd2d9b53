#pragma once

#include "aggregator/status/auth_guard.h"
#include "aggregator/setup/config.h"
#include "aggregator/daemon/database_health.h"
#include "aggregator/daemon/disk_health.h"
#include "aggregator/daemon/reload.h"
#include "aggregator/daemon/run_metrics.h"
#include "aggregator/daemon/scheduler.h"
#include "common/result.h"
#include "store/s3/object_tier.h"
#include "store/pg/pg_aux_store.h"
#include "store/pg/pg_operator.h"
#include "store/pg/pg_status_store.h"
#include "store/pg/pg_store.h"
#include "sync_engine/host_throttle.h"
#include "sync_engine/sync.h"

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

// What the daemon's parts share: the dispatcher that runs sources
// (daemon.cpp), the status API (status_api.cpp) and the metrics
// (metrics.cpp).
namespace tributary::agg {

using Clock = std::chrono::system_clock;

struct DaemonState {
  Config config;
  std::mutex mutex; // guards config, scheduler, running, the counters below and admin_token
  std::condition_variable wake; // the dispatcher waits on it (with `mutex`)
  Scheduler scheduler;
  std::atomic<bool> stopping{false};
  const Time started_at = Clock::now();

  std::unique_ptr<store::PgStore> status_store; // the status API's reads, under status_mutex
  std::mutex status_mutex;
  // What the status answers read, kept for a second (under status_mutex):
  // any number of clients polling /api/v1/status, /metrics and /readyz cost
  // the database one read of each per second, not one per request.
  struct Cached {
    std::chrono::steady_clock::time_point at{};
    bool valid = false;
  };
  Cached stats_read;
  std::vector<store::SourceStats> stats;
  Cached ready_read;
  std::optional<std::string> not_ready; // why the last readiness check failed
  // Whether the database answers, as runs and reads find it (safe to share).
  DatabaseHealth database;
  // Whether the data directory's disk is full (safe to share).
  DiskHealth disk;
  std::atomic<bool> database_back{false}; // a read found it again: the dispatcher wakes the runs waiting for it
  // Per source: runs that failed before they could be recorded (the
  // database was unreachable), recorded by its next run that reaches it
  // (under `mutex`).
  std::map<std::string, sync::RunOptions::Unrecorded> unrecorded;

  // Push (WebSub) subscriptions both ways, as last read (under
  // status_mutex, read at most once a second like the stats).
  std::unique_ptr<store::PgAuxStore> push_store;
  Cached push_read;
  std::vector<store::PushSubscription> push_ours;      // ours at upstream hubs
  std::vector<store::HubSubscription> push_followers;  // subscribers of our hub

  // The status page's history and a source's detail (schema 0016); safe
  // to share. The sampler writes through a store object of its own.
  std::unique_ptr<store::PgStatusStore> history_store;
  std::unique_ptr<store::PgOperatorStore> operator_store; // pauses, the action log, removed sources
  std::atomic<bool> sample_soon{false}; // a run ended: sample the history soon

  std::optional<std::string> admin_token;
  AuthGuard auth_guard; // wrong admin tokens, per client
  // With content.store "s3": the tier, for its figures on /metrics.
  std::shared_ptr<store::ObjectTier> tier;

  struct Running {
    store::RunMode mode = store::RunMode::incremental;
    Time started{};
    sync::Progress progress;
    Time progressed{}; // when its progress last moved (or it started)
    std::thread thread;
    bool done = false;
    std::shared_ptr<std::atomic<bool>> cancel; // the run's RunOptions::cancel
    bool stalled_out = false; // cancelled for making no progress
  };
  std::map<std::string, Running> running;
  RunMetrics run_metrics; // this process's runs, for /metrics (thread-safe)
  // When this process first had each configured source (under `mutex`):
  // a source that never succeeded lags, and last succeeded, from then.
  std::map<std::string, Time> configured_at;
  // What the last reload did (SIGHUP), for the status and /metrics (under
  // `mutex`); none before the first.
  struct Reload {
    Time at{};
    bool ok = false;
    std::string error; // why it was refused (the config is kept as it was)
    SourceChanges sources;
    std::vector<std::string> restart_needed; // settings that take effect after a restart
  };
  std::optional<Reload> last_reload;
  // Sources an operator paused, as last read or set (under `mutex`; kept in
  // PostgreSQL, read at start and with each history sample).
  std::map<std::string, store::PauseInfo> pauses;
  uint64_t reloads_ok = 0, reloads_refused = 0;
  // How fast each upstream host is fetched from (shared by every run).
  std::shared_ptr<sync::HostThrottle> throttle = std::make_shared<sync::HostThrottle>();
};

// The store's statistics of every source, by name (one query).
using StatsByName = std::map<std::string, store::SourceStats>;
Result<StatsByName> read_stats(DaemonState& state);
// Refreshes push_ours and push_followers if older than a second (call
// under status_mutex); false when the database could not be read.
bool read_push(DaemonState& state);

} // namespace tributary::agg

#pragma once

#include "store/blob/blob_store.h"
#include "sync_engine/fetcher.h"
#include "sync_engine/retry.h"
#include "sync_engine/source_config.h"
#include "store/store.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <memory>
#include <string>
#include <vector>

namespace tributary::sync {

struct Progress {
  std::string source;
  std::string document; // the list being applied
  uint64_t done = 0;
  uint64_t total = 0; // entries in the documents known so far
  double per_second = 0;
};

struct RunOptions {
  store::RunMode mode = store::RunMode::incremental;
  store::RunTrigger trigger = store::RunTrigger::cli; // recorded with the run
  bool repair = false;       // audit: fix what differs (a baseline)
  size_t batch_size = 1000;  // entries applied per transaction
  RetryPolicy retry;
  std::function<void(const Progress&)> on_progress; // called from the run's thread
  // Set from another thread to stop the run at the next batch: what is
  // committed stays (with its watermark), nothing more is applied, and the
  // run ends failed with "stopped". The next run resumes from the watermark.
  const std::atomic<bool>* cancel = nullptr;
  // Set when the process shuts down: a run it cancelled ends "interrupted",
  // not failed (the next start resumes it; it is no failure of the source).
  const std::atomic<bool>* stopping = nullptr;
  // A resource whose content failed (every location, or the bytes did not
  // verify) is retried by later incremental runs after this, doubling per
  // attempt up to a day.
  std::chrono::seconds refetch_backoff{60};
  // When another run (in any process) holds the source: wait for it to
  // end, instead of failing at once with SourceReport::busy.
  bool wait_for_source = false;
  // Runs of this source that failed before they could be recorded (the
  // database could not be reached): recorded as one failed run, with its
  // cause and how many tries, once the database answers (SourceReport::
  // recorded_earlier says it was).
  struct Unrecorded {
    store::RunMode mode = store::RunMode::incremental;
    store::Timestamp first_started{};
    uint64_t attempts = 0;
    std::string message; // the last one's cause
  };
  std::optional<Unrecorded> unrecorded;
};

// Audit counts against the current Resource List.
struct AuditCounts {
  uint64_t in_sync = 0;
  uint64_t missing = 0; // listed, not held (or held as deleted)
  uint64_t extra = 0;   // held live, not listed
  uint64_t changed = 0; // held, but hash (or lastmod/length) differs
};

// A Change Notification channel a Capability List offers (ResourceSync
// Change Notification 1.0.1, section 5): the topic is the entry of
// capability "changelist-notification", the hub its rel="hub" link (empty
// when the entry has none: the topic's own Link header names it).
struct NotificationChannel {
  std::string capability_list;
  std::string topic;
  std::string hub;
  bool operator==(const NotificationChannel&) const = default;
};

// What one run over one source did.
struct SourceReport {
  std::string source;
  store::RunMode mode = store::RunMode::incremental;
  int64_t run_id = 0;
  store::RunStatus status = store::RunStatus::failed;
  store::RunCounters counters;
  // The part of `counters` a baseline applied (in any mode: an incremental
  // run of a source never synced baselines first): resources stored, not
  // upstream changes.
  store::RunCounters baseline;
  AuditCounts audit;
  std::chrono::milliseconds duration{0};
  std::vector<std::string> errors; // the first few, "URL: reason"
  uint64_t error_count = 0;
  std::vector<std::string> notes; // what the run decided ("re-baselined: ...")
  bool busy = false; // not run: another run held the source
  // What the Source publishes, as discovery found it: "resourcesync"
  // (Capability Lists), "resource-list-only" (a Resource List without a
  // Capability List) or "plain-sitemap"; empty when configured directly.
  std::string kind;
  // Whether the run read a Change List's changes, and how far ahead of our
  // clock (beyond the source's clock_tolerance) the furthest was dated.
  bool clock_checked = false;
  std::optional<double> clock_ahead_seconds;
  uint64_t deletions_held = 0; // unlisted resources the mass-deletion guard did not delete
  // The channels its Capability Lists offered (every Capability List read).
  std::vector<NotificationChannel> channels;
  // The run failed because the database could not be reached (connection
  // lost or refused): the daemon runs it again as soon as the database
  // answers, not after the failure back-off.
  bool database_unreachable = false;
  // The run stopped because the data directory's disk is full: the batch
  // was not applied (no resource is charged a retry for it); the daemon
  // pauses every run until space returns.
  bool disk_full = false;
  bool recorded_earlier = false; // RunOptions::unrecorded is in the run history now
};

// Follows upstream Sources into the store: discovery, baseline from the
// Resource List (or index), incremental from the Change List (or index) in
// order strictly after the watermark, audit (and repair). Each batch of
// changes commits with its watermark in one transaction, so a run that dies
// is resumed exactly by the next one.
// ETag / Last-Modified of documents polled repeatedly (open Change Lists),
// recorded only once a document was applied to its end, so that a 304 can
// never hide changes we have not applied.
class ValidatorCache {
public:
  struct Validators {
    std::string etag;
    std::string last_modified;
    // A Resource List Index's parts as last read (a 304 for the index
    // says nothing of them).
    std::vector<std::string> parts;
  };
  std::optional<Validators> get(const std::string& key) const;
  void put(const std::string& key, Validators v);
  void forget(const std::string& key);
  void forget_prefix(const std::string& prefix);

private:
  mutable std::mutex m_mutex;
  std::map<std::string, Validators> m_map;
};

class SyncEngine {
public:
  // `transport` fetches URLs (normally make_default_fetcher()); `throttle` is
  // shared by every source for per-host politeness; temporary documents go
  // under `tmp_dir`.
  // `validators` may be shared by several engines (one per concurrent run).
  SyncEngine(std::shared_ptr<store::Store> store, std::shared_ptr<store::BlobStore> blobs,
             std::shared_ptr<Fetcher> transport, std::shared_ptr<HostThrottle> throttle,
             std::filesystem::path tmp_dir, std::shared_ptr<ValidatorCache> validators = nullptr);

  // Runs one source once. Never throws: failures are in the report (and on
  // the run in the store).
  SourceReport run(const SourceConfig& source, const RunOptions& options);

private:
  std::shared_ptr<store::Store> m_store;
  std::shared_ptr<store::BlobStore> m_blobs;
  std::shared_ptr<Fetcher> m_transport;
  std::shared_ptr<HostThrottle> m_throttle;
  std::filesystem::path m_tmp;
  std::shared_ptr<ValidatorCache> m_validators = std::make_shared<ValidatorCache>();
};

// "created 3, updated 1, deleted 0, unchanged 7, failed 0, 12.0 KiB"
std::string format_counters(const store::RunCounters& c);

} // namespace tributary::sync

#pragma once

#include "resourcesync/datetime.h"
#include "common/result.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tributary::store {

// One source's figures when the history is sampled.
struct HistorySample {
  std::string source;
  std::optional<double> lag_seconds; // now minus the newest change applied (none yet: nullopt)
  bool failing = false;
};

// One 5-minute bucket of a source's history (schema 0016).
struct HistoryPoint {
  rs::Timestamp bucket;
  std::optional<double> lag_seconds;
  uint64_t changes = 0;  // changes applied by incremental runs and audits
  uint64_t baseline = 0; // resources a baseline stored (no upstream change)
  bool failing = false;
};

struct SourceHistory {
  std::string source;
  std::vector<HistoryPoint> points; // oldest first
};

// One Capability List of a source we follow: its counts and watermark.
struct FeedStatus {
  int64_t id = 0;
  std::string capability_list_url;
  uint64_t live = 0;
  uint64_t deleted = 0;
  uint64_t bytes = 0;
  uint64_t retrying = 0;
  std::optional<rs::Timestamp> baseline_at;
  std::string change_list_url;
  std::optional<rs::Timestamp> last_time; // the (URI, datetime) watermark ...
  std::string last_uri;
  std::optional<int> last_position;
  std::optional<rs::Timestamp> updated_at;
};

// An error a run recorded (sync_error).
struct RunError {
  int64_t run_id = 0;
  rs::Timestamp at;
  std::string url;
  std::string reason;
};

// A resource waiting to be fetched again (retry).
struct RetryingResource {
  std::string capability_list_url;
  std::string uri;
  std::string change; // created / updated, or empty (listed by a baseline or audit)
  std::string reason;
  int attempts = 0;
  rs::Timestamp first_failed_at;
  rs::Timestamp next_attempt_at;
};

// A source an operator paused (schema 0021).
struct PauseInfo {
  std::string source;
  rs::Timestamp at;
  std::string by;
  std::string reason;
};

// An operator's action on a source (schema 0021).
struct OperatorAction {
  int64_t id = 0;
  std::string source;
  std::string action; // pause, resume, sync, audit, retry, confirm-deletions, refuse-deletions, retire
  std::string actor;  // who: the name the operator gave, and the client's address
  rs::Timestamp at;
  std::string detail;
};

// What the status page reads beside the sync engine's tables, through a
// store object of its own (a pooled connection per call): the rolling history (schema 0016) and one source's
// feeds, errors and retrying resources. One statement at a time.
class PgStatusStore {
public:
  static constexpr std::chrono::seconds k_bucket{300};

  // Connects and checks the schema version.
  static Result<std::unique_ptr<PgStatusStore>> open(const std::string& conninfo);
  ~PgStatusStore();

  // Writes one sample: each source's lag into its current bucket, and
  // removes buckets older than `retention`.
  Result<void> sample(const std::vector<HistorySample>& samples, std::chrono::seconds retention);
  // A run ended having applied `applied` changes: counted in the current
  // bucket, as a baseline's (resources stored) or as changes. Each run is
  // counted by the daemon that ran it, so once however many share the
  // database.
  Result<void> record_run(const std::string& source, bool baseline, uint64_t applied);
  // Every source's buckets since `since` (or only `source`'s), by name.
  Result<std::vector<SourceHistory>> history(rs::Timestamp since, const std::string& source);

  Result<std::vector<FeedStatus>> feeds(const std::string& source);
  // The newest `limit` errors of the source's runs.
  Result<std::vector<RunError>> recent_errors(const std::string& source, size_t limit);
  // How many of the source's resources wait for a retry, and the first
  // `limit` of them by next attempt.
  Result<std::pair<uint64_t, std::vector<RetryingResource>>> retrying(const std::string& source, size_t limit);

  // ---- the operator's actions (pg_operator.cpp) ----
  // Every paused source.
  Result<std::vector<PauseInfo>> pauses();
  // Pauses (again: the newest word stands) and records the action.
  Result<void> pause(const std::string& source, const std::string& by, const std::string& reason);
  // Resumes and records the action; false when it was not paused.
  Result<bool> resume(const std::string& source, const std::string& by);
  Result<void> record_action(const std::string& source, const std::string& action, const std::string& actor,
                             const std::string& detail);
  // The source's newest `limit` actions, newest first.
  Result<std::vector<OperatorAction>> actions(const std::string& source, size_t limit);
  // Every resource of the source waiting for a retry is due now; how many.
  Result<uint64_t> retry_now(const std::string& source);
  // ---- removed sources (schema 0021) ----
  // Sources held in the database but not in `configured` are marked
  // removed (since now, if not already); configured ones are unmarked.
  // The newly removed, by name.
  Result<std::vector<std::string>> mark_removed(const std::vector<std::string>& configured);
  // Purges every trace of a source that is not configured: its feeds,
  // resources, change log, runs and history (content blobs become
  // garbage for `tributary gc`), its pause and removal mark. Its operator
  // actions are kept. False when there was nothing of it.
  Result<bool> purge_source(const std::string& source);
  // The removed sources marked longer ago than `older_than`.
  Result<std::vector<std::string>> removed_before(std::chrono::seconds older_than);
  // The operator refuses the source's held deletions: the holds are
  // dropped, nothing is deleted (a later baseline whose list still lacks
  // the resources holds again); how many holds were dropped.
  Result<uint64_t> refuse_deletions(const std::string& source);

private:
  struct Impl;
  explicit PgStatusStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

} // namespace tributary::store

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

private:
  struct Impl;
  explicit PgStatusStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

} // namespace tributary::store

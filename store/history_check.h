#pragma once

#include "store/store.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

// The change log's invariant checker: what a follower of our Change Lists
// may rely on (store/history_rule.h), verified over a whole log, URI by URI.
//   - no (URI, change, upstream time) is logged twice;
//   - per URI, logged upstream times never go back;
//   - the last entry agrees with what we hold (state, and bytes where both
//     name a digest), unless a retry of that URI waits (its superseded
//     change is logged, its bytes not yet stored).
// Run by `tributary check-history`, at the end of every audit, and by the
// integration tests that end in a quiet state.
namespace tributary::store {

// One change-log entry, as the checker reads it.
struct HistoryEntry {
  int64_t seq = 0;
  rs::Change change = rs::Change::updated;
  std::optional<Timestamp> time; // upstream time
  std::vector<rs::HashValue> hashes;
  std::optional<std::string> blob_sha256;
};

// One URI of a feed: its log in seq order and what we hold of it.
struct UriHistory {
  int64_t feed_id = 0;
  std::string uri;
  std::vector<HistoryEntry> log;
  std::optional<ResourceRecord> held;
  bool retrying = false;   // a retry of it waits
  bool compacted = false;  // retention may have removed its older entries (and all of them)
};

struct HistoryProblem {
  int64_t feed_id = 0;
  std::string uri;
  std::string what;
};

struct HistoryReport {
  uint64_t uris = 0;
  uint64_t entries = 0;
  uint64_t repeated = 0;    // entries whose (URI, change, upstream time) was logged before
  uint64_t backwards = 0;   // entries dated before the one logged before them
  uint64_t disagreeing = 0; // URIs whose last entry is not what we hold
  uint64_t waiting = 0;     // URIs that disagree while a retry of them waits (not a failure)
  std::vector<HistoryProblem> first; // the first problems found, up to the checker's limit

  bool ok() const { return repeated == 0 && backwards == 0 && disagreeing == 0; }
  HistoryReport& operator+=(const HistoryReport& o);
};

// Whether the last entry of `h` disagrees with what we hold (and so a
// corrective entry is due): none when it agrees.
std::optional<std::string> disagreement(const UriHistory& h);

class HistoryChecker {
public:
  explicit HistoryChecker(size_t limit = 20) : m_limit(limit) {}
  void check(const UriHistory& h);
  const HistoryReport& report() const { return m_report; }

private:
  void problem(const UriHistory& h, std::string what);
  size_t m_limit;
  HistoryReport m_report;
};

// Checks the histories of `feeds`. With `repair`, appends for each URI
// whose last entry disagrees with what we hold (and no retry of which
// waits) one corrective change with the held state, through apply, and so
// through the rule: it rewrites nothing in the past, and is dated after
// the URI's last entry, so that a follower converges. `report` is the
// check before any repair.
struct HistoryCheck {
  HistoryReport report;
  uint64_t corrected = 0;
};
Result<HistoryCheck> check_history(Store& store, const std::vector<int64_t>& feeds, bool repair, size_t limit = 20);

} // namespace tributary::store

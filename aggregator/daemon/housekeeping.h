#pragma once

#include "aggregator/daemon/daemon_state.h"

#include <memory>
#include <string>

namespace tributary::pub {
class Republisher;
}

namespace tributary::agg {

// The daemon's housekeeping, two threads beside the dispatcher, each with a
// store object of its own (connections from the process's pool) and each
// until `stopping`: retention (old
// runs, the change log past `change_retention`, archived documents past
// `archive_retention`) and the status page's rolling history.
class Housekeeping {
public:
  // `republisher`: the one whose parts compaction archives (nullptr: the
  // change log is not compacted).
  Housekeeping(DaemonState& state, pub::Republisher* republisher);

  // Removes runs past `run_retention`, now and then hourly, on a connection
  // of its own and in slices of 10,000 (the status API never waits behind
  // a long delete); compacts the change log and expires the archive on the
  // same round.
  void prune_runs();
  // Samples every source's lag and the changes recorded, once a minute and
  // soon after a run ends (at most every 5 s). Buckets older than a week go.
  void sample_history();

private:
  void compact_change_log(std::unique_ptr<store::PgStore>& conn);
  void expire_archive();
  std::string config_database();

  DaemonState& m_state;
  pub::Republisher* m_republisher;
};

} // namespace tributary::agg

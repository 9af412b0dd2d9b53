#pragma once

// Room aggregator/daemon/: `tributary run`, the long-lived service: the
// scheduler, the runs it dispatches, housekeeping, health, reload and the
// operator's actions, over the state in daemon_state.h.

#include <iosfwd>
#include <string>

namespace tributary::agg {

// `tributary run --config FILE`: the long-lived service. One process runs the
// scheduler, the sync engine (up to max_concurrent_syncs sources at once),
// the republisher and the status API (/api/v1/…, /metrics, /healthz,
// /readyz, /status) on the configured `listen` address.
// SIGHUP re-reads and fully validates the config, then applies it (an
// invalid file is logged and the old config kept); SIGINT/SIGTERM stop
// scheduling, stop runs at their next batch (committed batches stay) and
// exit 0. Returns 1 when it cannot start.
int run_daemon(const std::string& config_path, std::ostream& out, std::ostream& err);

} // namespace tributary::agg

#pragma once

#include "aggregator/daemon/daemon_state.h"

#include <string>

namespace tributary::agg {

// The Prometheus text exposition of the daemon's state and the store's
// statistics (GET /metrics).
std::string render_metrics(DaemonState& state, const StatsByName& stats);

} // namespace tributary::agg

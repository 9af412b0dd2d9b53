#pragma once

#include "store/store.h"

#include <chrono>
#include <map>
#include <mutex>
#include <ostream>
#include <set>
#include <string>
#include <tuple>

// What the runs of this process did, as Prometheus counters and a
// histogram (GET /metrics): changes applied by kind and mode, bytes, runs
// by trigger and outcome, and how long runs took. Counters start at zero
// with the process (Prometheus's rate() handles restarts); a source
// removed from the configuration takes its series with it (forget()).
// Thread-safe.
namespace tributary::agg {

class RunMetrics {
public:
  // `counters`: all the run applied; `baseline`: the part of them a
  // baseline applied (counted under mode "baseline" whatever the run's),
  // the rest under `mode`, the mode it was asked for. Its duration counts
  // under `recorded`, what it turned out to be (an incremental run of a
  // source never synced is a baseline).
  void record(const std::string& source, store::RunMode mode, store::RunMode recorded, store::RunTrigger trigger,
              store::RunStatus status, const store::RunCounters& counters, const store::RunCounters& baseline,
              std::chrono::milliseconds duration);
  // Drops every series of sources not in `configured`.
  void keep_only(const std::set<std::string>& configured);
  // The families, each with HELP and TYPE. `sources`: every configured
  // source, so that a counter is 0 (present) before its first run.
  void render(std::ostream& out, const std::set<std::string>& sources) const;

  // The histogram's upper bounds, in seconds.
  static constexpr double k_buckets[] = {0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 14400};

private:
  struct PerSource {
    // (mode, change) -> count; change: created, updated, deleted.
    std::map<std::pair<std::string, std::string>, uint64_t> applied;
    uint64_t bytes = 0;
    std::map<std::pair<std::string, std::string>, uint64_t> runs; // (trigger, status) -> count
    double last_duration = -1;
  };
  struct Histogram {
    uint64_t counts[std::size(k_buckets)] = {};
    uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex m_mutex;
  std::map<std::string, PerSource> m_sources;
  std::map<std::string, Histogram> m_durations; // by mode
};

} // namespace tributary::agg

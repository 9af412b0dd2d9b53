#pragma once

// Room aggregator/push/notified_runs: how many runs WebSub notifications
// may start, per source (#35: 10 forged POSTs started 11 runs in 6 s). A
// notification whose run applied something keeps the next one immediate: a
// genuine hub's changes are never delayed. One whose run applied nothing (a
// forged or repeated notification) doubles the gap before the next
// notification may start a run, from 1 s up to 5 min; a notification within
// the gap is held and starts one run when the gap ends (a genuine change
// coming then is not lost, and polling stays the safety net). So a flood
// costs the Source a handful of runs. Thread-safe.

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace tributary::agg {

class NotifiedRuns {
public:
  // A notification was accepted: true when its run starts now; false when
  // it is held until the gap ends (release_held gives it then).
  bool notified(const std::string& source);
  // The sources whose held notification starts its run now (their gap
  // ended and their last notified run reported).
  std::vector<std::string> release_held();
  // A run of `source` ended; whether it applied anything. Runs that were
  // not started by a notification change nothing.
  void ran(const std::string& source, bool applied);

private:
  using Clock = std::chrono::system_clock;
  struct Gate {
    Clock::time_point open_at{};      // no notified run before this
    std::chrono::milliseconds gap{0}; // after the next run that applies nothing, doubled
    bool held = false;                // a notification came within the gap
    bool running = false;             // a notified run has not reported yet
  };
  static constexpr std::chrono::milliseconds k_first_gap{1000};
  static constexpr std::chrono::milliseconds k_max_gap{300000};

  std::mutex m_mutex;
  std::map<std::string, Gate> m_gates;
};

} // namespace tributary::agg

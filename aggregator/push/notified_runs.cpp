#include "aggregator/push/notified_runs.h"

#include "common/log.h"

#include <algorithm>

namespace tributary::agg {

bool NotifiedRuns::notified(const std::string& source) {
  std::lock_guard lock(m_mutex);
  Gate& g = m_gates[source];
  const auto now = Clock::now();
  if (now < g.open_at || g.running) {
    g.held = true;
    return false;
  }
  g.running = true;
  g.open_at = now + g.gap;
  return true;
}

std::vector<std::string> NotifiedRuns::release_held() {
  std::vector<std::string> due;
  std::lock_guard lock(m_mutex);
  const auto now = Clock::now();
  for (auto& [source, g] : m_gates) {
    if (g.held && !g.running && now >= g.open_at) {
      g.held = false;
      g.running = true;
      g.open_at = now + g.gap;
      due.push_back(source);
    }
  }
  return due;
}

void NotifiedRuns::ran(const std::string& source, bool applied) {
  std::lock_guard lock(m_mutex);
  auto it = m_gates.find(source);
  if (it == m_gates.end() || !it->second.running) {
    return; // not a notified run
  }
  Gate& g = it->second;
  g.running = false;
  const auto was = g.gap;
  g.gap = applied ? std::chrono::milliseconds(0) : std::clamp(2 * was, k_first_gap, k_max_gap);
  g.open_at = Clock::now() + g.gap; // the gap runs from the end of the run
  if (!applied && g.gap != was) {
    log::info(source, "push: a notified run applied nothing: the next notification waits " +
                          std::to_string(g.gap.count() / 1000.0).substr(0, 5) + " s");
  }
}

} // namespace tributary::agg

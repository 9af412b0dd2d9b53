#include "sync_engine/pipelining_verdicts.h"

#include <atomic>
#include <map>
#include <mutex>

namespace tributary::sync::pipelining {

namespace {

using steady = std::chrono::steady_clock;

std::mutex g_known_mutex;
std::atomic<uint64_t> g_answered{0};
std::map<std::string, Known> g_known;
constexpr auto k_broken_for = std::chrono::hours(24);
constexpr unsigned k_max_inconclusive = 3;

} // namespace

Known known(const std::string& origin) {
  std::lock_guard lock(g_known_mutex);
  auto it = g_known.find(origin);
  if (it == g_known.end()) {
    return {};
  }
  if (it->second.verdict == Verdict::broken && steady::now() - it->second.at > k_broken_for) {
    g_known.erase(it);
    return {};
  }
  return it->second;
}

Verdict record(const std::string& origin, Verdict v, const std::string& why) {
  std::lock_guard lock(g_known_mutex);
  Known& k = g_known[origin];
  if (v == Verdict::unknown) {
    if (++k.inconclusive >= k_max_inconclusive && k.verdict == Verdict::unknown) {
      k.verdict = Verdict::broken;
      k.why = "closed the connection after one answer " + std::to_string(k.inconclusive) + " times";
      k.at = steady::now();
    }
    return k.verdict;
  }
  if (k.verdict != Verdict::broken) {
    k.verdict = v;
    k.why = why;
    k.at = steady::now();
  }
  return k.verdict;
}

bool first_telling(const std::string& origin) {
  std::lock_guard lock(g_known_mutex);
  auto it = g_known.find(origin);
  if (it == g_known.end() || it->second.verdict != Verdict::broken || it->second.told) {
    return false;
  }
  it->second.told = true;
  return true;
}

void count_answered(uint64_t n) { g_answered.fetch_add(n, std::memory_order_relaxed); }

PipelineStats stats() {
  PipelineStats out;
  out.answered = g_answered.load(std::memory_order_relaxed);
  std::lock_guard lock(g_known_mutex);
  for (const auto& [origin, k] : g_known) {
    out.hosts_on += k.verdict == Verdict::works ? 1 : 0;
    out.hosts_off += k.verdict == Verdict::broken ? 1 : 0;
  }
  return out;
}

} // namespace tributary::sync::pipelining

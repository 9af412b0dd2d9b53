#include "sync_engine/pipeline_bursts.h"

#include <algorithm>

namespace tributary::sync {

namespace {

// An answer the server takes longer than this over is not worth queueing
// others behind.
constexpr auto k_fast_answer = std::chrono::milliseconds(1);
// An origin slow to answer is asked one request at a time; every this
// many bursts, two again, to see whether it still is.
constexpr unsigned k_slow_bursts = 16;
// Every burst's round trip past this: the origin is far. Below it, two
// connections with bursts of 16 carry 3,200 requests/s or more.
constexpr auto k_far_round_trip = std::chrono::milliseconds(10);

} // namespace

unsigned BurstSizer::start() const {
  return std::clamp(m_last.load(), 1u, std::min(m_depth, m_ceiling.load()));
}

void BurstSizer::note_round_trip(Duration d) {
  const int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
  int64_t seen = m_min_round_trip_us.load();
  while (us < seen && !m_min_round_trip_us.compare_exchange_weak(seen, us)) {
  }
  m_far.store(std::min(us, seen) >= std::chrono::duration_cast<std::chrono::microseconds>(k_far_round_trip).count());
}

unsigned BurstSizer::after(unsigned limit, size_t answers, Duration round_trip, Duration spread, unsigned& singles) {
  note_round_trip(round_trip);
  if (answers >= 2) {
    const Duration per_answer = spread / static_cast<long>(answers - 1);
    const bool fast = per_answer <= k_fast_answer;
    m_fast.store(fast);
    singles = 0;
    if (!fast) {
      const unsigned half = std::max(1u, static_cast<unsigned>(answers / 2));
      for (unsigned c = m_ceiling.load(); half < c && !m_ceiling.compare_exchange_weak(c, half);) {
      }
      return 1;
    }
    return std::max(1u, std::min({m_depth, m_ceiling.load(), limit * 2}));
  }
  const unsigned most = std::min(m_depth, m_ceiling.load());
  if (round_trip <= 2 * k_fast_answer) {
    m_fast.store(true);
    singles = 0;
    return std::max(1u, std::min(most, std::max(2u, limit * 2)));
  }
  if (m_fast.load() || ++singles >= k_slow_bursts) {
    singles = 0;
    return std::max(1u, std::min(most, std::max(2u, limit)));
  }
  return limit;
}

} // namespace tributary::sync

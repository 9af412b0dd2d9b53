#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace tributary::sync {

// How many requests the next pipelined burst to an origin carries, and
// whether the origin is fast and far: PipelinedOrigin's policy, shared by
// its connections (thread-safe), learned from each burst answered whole.
//
// - Fast is the server's time an answer: the spacing of a burst's answers,
//   never the round trip, which is the path's (a static file 50 ms away is
//   answered as fast as one on loopback, and was asked one request at a
//   time: 115 resources/s). A burst of one answered within 2 ms, round
//   trip and all, is fast too; a slower one judges nothing.
// - Bursts double while answers come fast, up to `depth`, and never grow
//   past half the smallest burst that came slow (nginx with tcp_nopush held
//   the end of a burst of 16 up to 200 ms, where 8 went through); a slow
//   burst drops them to one request, and after k_slow_bursts bursts of one
//   two are tried again.
// - Far: the shortest burst round trip seen is 10 ms or more (a loaded
//   host's loopback passes 2 ms now and then, a network path every time).
// - A batch starts with the bursts the last one ended with (not at two:
//   a batch of 32 took five round trips where two do).
class BurstSizer {
public:
  using Duration = std::chrono::steady_clock::duration;

  explicit BurstSizer(unsigned depth) : m_depth(depth < 1 ? 1 : depth) {}

  // The first burst of a batch.
  unsigned start() const;
  // A batch ended with bursts of `limit`.
  void end(unsigned limit) { m_last.store(limit); }

  // A burst answered whole: `answers` answers, the first `round_trip` after
  // the burst was sent, the last `spread` after the first; `limit` was its
  // size. `singles` counts the bursts of one since the last of two or more
  // (the caller's, one a connection). Returns the next burst's size.
  unsigned after(unsigned limit, size_t answers, Duration round_trip, Duration spread, unsigned& singles);

  bool fast() const { return m_fast.load(); }
  bool far() const { return m_far.load(); }
  unsigned depth() const { return m_depth; }

private:
  void note_round_trip(Duration d);

  unsigned m_depth;
  std::atomic<bool> m_fast{true};
  std::atomic<bool> m_far{false};
  std::atomic<int64_t> m_min_round_trip_us{INT64_MAX};
  std::atomic<unsigned> m_last{2};
  std::atomic<unsigned> m_ceiling{~0u};
};

} // namespace tributary::sync

#include "common/heap_trim.h"

#include <atomic>

#include <malloc.h>

namespace tributary {

namespace {

// When the process last trimmed, in steady-clock ticks (0: never).
std::atomic<std::chrono::steady_clock::rep> g_last_trim{0};

} // namespace

bool trim_heap(std::chrono::steady_clock::time_point now) {
  const auto ticks = now.time_since_epoch().count();
  auto last = g_last_trim.load(std::memory_order_relaxed);
  const auto every = std::chrono::duration_cast<std::chrono::steady_clock::duration>(k_heap_trim_every).count();
  do {
    if (last != 0 && ticks - last < every) {
      return false;
    }
  } while (!g_last_trim.compare_exchange_weak(last, ticks, std::memory_order_relaxed));
  malloc_trim(0);
  return true;
}

} // namespace tributary

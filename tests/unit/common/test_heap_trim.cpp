// The process's heap is trimmed at most once every k_heap_trim_every,
// however many threads ask.
#include "common/heap_trim.h"

#include <doctest/doctest.h>

using namespace tributary;

TEST_CASE("Heap trim: at most once every k_heap_trim_every for the whole process, and again once that has passed") {
  // Far ahead of any earlier call's clock, so that this test's first call trims.
  const auto t0 = std::chrono::steady_clock::now() + std::chrono::hours(24 * 365);
  CHECK(trim_heap(t0));
  CHECK_FALSE(trim_heap(t0));
  CHECK_FALSE(trim_heap(t0 + k_heap_trim_every - std::chrono::milliseconds(1)));
  CHECK(trim_heap(t0 + k_heap_trim_every));
  CHECK_FALSE(trim_heap(t0 + k_heap_trim_every + std::chrono::seconds(1)));
  CHECK(trim_heap(t0 + 3 * k_heap_trim_every));
}

// The pipelined path's burst sizes: fast by the server's time an answer,
// never the round trip; far by the shortest round trip; a ceiling at half
// a burst that came slow; what a batch starts with.
#include "sync_engine/pipeline_bursts.h"

#include <doctest/doctest.h>

using namespace tributary::sync;
using namespace std::chrono_literals;

TEST_CASE("BurstSizer: a fast Source 50 ms away: bursts double to the depth, the origin is far and stays fast") {
  BurstSizer b(16);
  unsigned singles = 0;
  CHECK(b.start() == 2);
  // The probe's lone answer 50 ms after it was sent judges nothing.
  CHECK(b.after(1, 1, 50ms, 0ms, singles) == 2);
  CHECK(b.fast());
  unsigned limit = 2;
  for (int i = 0; i < 5; ++i) {
    limit = b.after(limit, limit, 50ms, 100us * (limit - 1), singles); // answers 0.1 ms apart
  }
  CHECK(limit == 16);
  CHECK(b.fast());
  CHECK(b.far());
  b.end(limit);
  CHECK(b.start() == 16); // the next batch goes on where this one ended
}

TEST_CASE("BurstSizer: near, and one burst that came slow caps bursts at half of it") {
  BurstSizer b(16);
  unsigned singles = 0;
  CHECK(b.after(2, 2, 200us, 50us, singles) == 4);
  CHECK_FALSE(b.far());
  CHECK(b.after(4, 4, 200us, 150us, singles) == 8);
  CHECK(b.after(8, 8, 200us, 350us, singles) == 16);
  // nginx with tcp_nopush: the end of a burst of 16 held 200 ms.
  CHECK(b.after(16, 16, 200us, 200ms, singles) == 1);
  CHECK_FALSE(b.fast());
  // A lone answer within 2 ms is fast again; bursts grow back to 8, no more.
  unsigned limit = b.after(1, 1, 300us, 0ms, singles);
  CHECK(limit == 2);
  for (int i = 0; i < 4; ++i) {
    limit = b.after(limit, limit, 300us, 50us * (limit - 1), singles);
  }
  CHECK(limit == 8);
  CHECK_FALSE(b.far()); // some bursts came back within 10 ms
}

TEST_CASE("BurstSizer: a server slow to answer is asked one request at a time, and tried with two every 16 bursts") {
  BurstSizer b(8);
  unsigned singles = 0;
  CHECK(b.after(8, 8, 12ms, 70ms, singles) == 1); // 10 ms an answer
  CHECK_FALSE(b.fast());
  unsigned limit = 1;
  int tried = 0;
  for (int i = 0; i < 32; ++i) {
    limit = b.after(limit, 1, 12ms, 0ms, singles);
    if (limit == 2) {
      ++tried;
      limit = 1;
    }
  }
  CHECK(tried == 2);
  // Slow with two in a burst: one at a time for good (half of two).
  BurstSizer one(8);
  CHECK(one.after(2, 2, 12ms, 10ms, singles) == 1);
  limit = 1;
  for (int i = 0; i < 32; ++i) {
    limit = one.after(limit, 1, 12ms, 0ms, singles);
    CHECK(limit == 1);
  }
  // A loopback round trip under load passes 10 ms at times; far needs every one.
  BurstSizer near(8);
  CHECK(near.after(2, 2, 500us, 100us, singles) == 4);
  CHECK(near.after(4, 4, 40ms, 100us, singles) == 8);
  CHECK_FALSE(near.far());
}

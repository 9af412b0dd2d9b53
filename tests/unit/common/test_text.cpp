// Text for people: sizes and durations as the status page and the API's
// reasons print them.
#include "common/text.h"

#include <doctest/doctest.h>

using namespace tributary;

TEST_CASE("human_duration: seconds, minutes, hours with minutes, days with hours") {
  CHECK(human_duration(-3) == "0 s");
  CHECK(human_duration(45) == "45 s");
  CHECK(human_duration(60) == "1 min");
  CHECK(human_duration(3599) == "59 min");
  CHECK(human_duration(3600) == "1 h");
  CHECK(human_duration(3600 + 20 * 60 + 5) == "1 h 20 min");
  CHECK(human_duration(86400) == "1 d");
  CHECK(human_duration(2 * 86400 + 4 * 3600 + 59) == "2 d 4 h");
}

TEST_CASE("human_bytes: bytes below a KiB, then one decimal") {
  CHECK(human_bytes(766) == "766 B");
  CHECK(human_bytes(1536) == "1.5 KiB");
  CHECK(human_bytes(3ull << 30) == "3.0 GiB");
}

#pragma once

// Times for the change log's rule and checker cases: `seconds` after a
// fixed instant (2023-11-14T22:13:20Z).
#include "resourcesync/datetime.h"

#include <chrono>

namespace tributary::test {

inline rs::Timestamp at(int seconds) { return rs::Timestamp(std::chrono::seconds(1'700'000'000 + seconds)); }

} // namespace tributary::test

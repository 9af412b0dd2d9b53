#pragma once

#include "aggregator/config.h"

#include <string>
#include <vector>

// What a reload (SIGHUP) changed in the sources, named: the log line, the
// status API's `reload` and /metrics say it.
namespace tributary::agg {

struct SourceChanges {
  std::vector<std::string> added, removed, enabled, disabled, changed;
  bool operator==(const SourceChanges&) const = default;
};

// `changed`: configured before and after, enabled both times, with another
// object in the file (any key: url, interval, filters, ...).
SourceChanges compare_sources(const Config& before, const Config& after);

// "added a, b; removed c; disabled d", or "no source changed".
std::string describe(const SourceChanges& c);

} // namespace tributary::agg

#pragma once

#include "aggregator/setup/config.h"

#include <string>
#include <vector>

namespace tributary::store {
class PgOperatorStore;
}

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

// Sources held in the database but not in `c` leave what we publish: their
// documents answer 410 Gone, and their data waits for gc (or retire). Each
// newly removed one is logged with what happens to its data.
void mark_removed_sources(store::PgOperatorStore& operators, const Config& c);

} // namespace tributary::agg

#pragma once

#include "store/store.h"

#include <cstddef>
#include <vector>

// A baseline taken while a feed follows a Change List (an operator's
// baseline, a repair) reads the Resource List as it is now: a resource
// that changed twice since the last change we applied is listed in its
// newest state only. Logged at once, that state would stand before the
// change between, which the Change List then brings too late to log (it
// is older than the log's entry). As change-data-capture systems do for a
// snapshot taken while a log streams (DBLog, Debezium's incremental
// snapshots), the baseline's entries for changes after the watermark are
// held in this window; the Change List is applied from the baseline's
// overlap; and what it did not log is logged last, through the change
// log's rule (store/history_rule.h), so that nothing is logged twice.
namespace tributary::sync {

class LogWindow {
public:
  // Changes dated after `after` are deferred, at most `max` of them (past
  // that they are logged at once: the window's memory is bounded).
  explicit LogWindow(store::Timestamp after, size_t max = 100'000) : m_after(after), m_max(max) {}

  // Takes `c` into the window (true), or leaves it to be logged now.
  bool defer(const store::ChangeRecord& c);
  size_t size() const { return m_deferred.size(); }
  // The deferred changes, in the order they were deferred; the window is
  // then empty.
  std::vector<store::ChangeRecord> take();

private:
  store::Timestamp m_after;
  size_t m_max;
  std::vector<store::ChangeRecord> m_deferred;
};

} // namespace tributary::sync

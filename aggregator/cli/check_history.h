#pragma once

#include <iosfwd>
#include <string>

namespace tributary::agg {

struct CheckHistoryCommand {
  std::string config_path;
  std::string source; // empty: every source the database holds
  bool repair = false;
  size_t limit = 20;  // problems printed at most
};

// `tributary check-history`: checks the change log we publish against its
// invariant (store/history_check.h): no change logged twice, no time going
// back, each URI's last entry what we hold. Prints the totals and the first
// problems. With --repair, appends one corrective change for each URI whose
// last entry disagrees (nothing in the past is rewritten), then checks
// again. Returns 0 when the log holds (after repair, if asked), 1 when it
// does not or the store cannot be read, 2 usage.
int run_check_history(const CheckHistoryCommand& cmd, std::ostream& out, std::ostream& err);

} // namespace tributary::agg

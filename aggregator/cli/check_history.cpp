// `tributary check-history`: the change log's invariant, checked (and
// mended forward) from the command line.
#include "aggregator/cli/check_history.h"

#include "aggregator/cli/commands.h"
#include "aggregator/setup/config.h"
#include "store/history_check.h"
#include "store/pg/pg_store.h"

#include <ostream>

namespace tributary::agg {

namespace {

void print(const store::HistoryReport& r, const std::string& where, std::ostream& out) {
  out << where << ": " << r.uris << " URIs, " << r.entries << " log entries; " << r.repeated
      << " logged twice, " << r.backwards << " dated before an earlier entry, " << r.disagreeing
      << " whose last entry is not what we hold";
  if (r.waiting) {
    out << " (and " << r.waiting << " waiting for a retry)";
  }
  out << (r.ok() ? ": OK\n" : ": FAILED\n");
  for (const auto& p : r.first) {
    out << "  " << p.uri << ": " << p.what << '\n';
  }
}

} // namespace

int run_check_history(const CheckHistoryCommand& cmd, std::ostream& out, std::ostream& err) {
  auto config = load_config_reporting(cmd.config_path, err);
  if (!config) {
    return 1;
  }
  auto store = store::PgStore::open(config->database);
  if (!store) {
    err << "tributary check-history: " << store.error().message << '\n';
    return 1;
  }
  auto feeds = (*store)->feeds();
  if (!feeds) {
    err << "tributary check-history: " << feeds.error().message << '\n';
    return 1;
  }
  std::map<std::string, std::vector<int64_t>> by_source;
  for (const auto& f : *feeds) {
    if (cmd.source.empty() || f.source_name == cmd.source) {
      by_source[f.source_name].push_back(f.feed_id);
    }
  }
  if (!cmd.source.empty() && by_source.empty()) {
    err << "tributary check-history: the database holds no source '" << cmd.source << "'\n";
    return 1;
  }
  bool ok = true;
  for (const auto& [name, ids] : by_source) {
    auto checked = store::check_history(**store, ids, cmd.repair, cmd.limit);
    if (!checked) {
      err << "tributary check-history: " << name << ": " << checked.error().message << '\n';
      return 1;
    }
    print(checked->report, name, out);
    if (!cmd.repair) {
      ok = ok && checked->report.ok();
      continue;
    }
    out << name << ": appended " << checked->corrected << " corrective change"
        << (checked->corrected == 1 ? "" : "s") << '\n';
    auto again = store::check_history(**store, ids, false, cmd.limit);
    if (!again) {
      err << "tributary check-history: " << name << ": " << again.error().message << '\n';
      return 1;
    }
    // What repair cannot undo (entries logged twice or out of order in the
    // past) stays in the log; followers converge on each URI's last entry.
    const bool converged = again->report.disagreeing == 0;
    out << name << ": after repair, " << again->report.disagreeing << " URIs disagree"
        << (converged ? "" : ": FAILED") << '\n';
    ok = ok && converged;
  }
  return ok ? 0 : 1;
}

} // namespace tributary::agg

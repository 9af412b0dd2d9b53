#include "aggregator/commands.h"

#include "aggregator/config.h"
#include "sync_engine/store/pg_store.h"

#include <ostream>

namespace tributary::agg {

int run_check_config(const std::string& path, std::ostream& out, std::ostream& err) {
  auto load = load_config(path);
  for (const auto& p : load.problems) {
    err << p << '\n';
  }
  if (!load.config) {
    return 1;
  }
  out << path << ": ok (" << load.config->sources.size() << " source"
      << (load.config->sources.size() == 1 ? "" : "s") << ")\n";
  return 0;
}

int run_migrate(const std::string& config_path, std::ostream& out, std::ostream& err) {
  auto load = load_config(config_path);
  for (const auto& p : load.problems) {
    err << p << '\n';
  }
  if (!load.config) {
    return 1;
  }
  auto report = store::migrate(load.config->database);
  if (!report) {
    err << "tributary migrate: " << report.error().message << '\n';
    return 1;
  }
  if (report->applied.empty()) {
    out << "schema is current (version " << report->to_version << ")\n";
  } else {
    out << "schema migrated from version " << report->from_version << " to " << report->to_version << ":";
    for (const auto& a : report->applied) {
      out << ' ' << a;
    }
    out << '\n';
  }
  return 0;
}

} // namespace tributary::agg

#include "store/pg/pg_planner_stats.h"

#include "store/pg/pg_store_internal.h"

#include "common/log.h"

#include <algorithm>
#include <chrono>
#include <string>

namespace tributary::store {

void PlannerStats::wrote(uint64_t rows) {
  m_written += rows;
  if (static_cast<double>(m_written) >= std::max(static_cast<double>(k_first), m_rows)) {
    analyze();
  }
}

void PlannerStats::analyze() {
  // After the batch's commit, on its connection: SKIP_LOCKED leaves a table
  // that autovacuum is working on (its statistics are being made anyway)
  // rather than holding the next batch behind it.
  const auto started = std::chrono::steady_clock::now();
  auto rows = m_db.conn.run("analyze", [&]() -> Result<double> {
    pqxx::nontransaction tx(m_db.conn);
    tx.exec0("ANALYZE (SKIP_LOCKED) resource, change_log");
    return tx.exec1("SELECT greatest(max(reltuples), 0) FROM pg_class "
                    "WHERE oid IN ('resource'::regclass, 'change_log'::regclass)")[0]
        .as<double>();
  });
  m_written = 0;
  if (!rows) {
    // Tried again after as many rows.
    log::warn("", "ANALYZE of resource and change_log failed: " + rows.error().message);
    return;
  }
  m_rows = std::max(*rows, 0.0);
  log::debug("", "analyzed resource and change_log (" + std::to_string(static_cast<long long>(m_rows)) + " rows) in " +
                     std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::steady_clock::now() - started)
                                        .count()) +
                     " ms");
}

} // namespace tributary::store

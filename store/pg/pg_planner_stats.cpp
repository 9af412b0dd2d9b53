#include "store/pg/pg_planner_stats.h"

#include "store/pg/pg_store_internal.h"

#include "common/log.h"
#include "common/thread_name.h"

#include <algorithm>
#include <chrono>
#include <string>

namespace tributary::store {

PlannerStats::~PlannerStats() {
  if (m_worker.joinable()) {
    m_worker.join();
  }
}

void PlannerStats::wrote(uint64_t rows) {
  m_written += rows;
  if (m_busy.load() || static_cast<double>(m_written) < std::max(static_cast<double>(k_first), m_rows.load())) {
    return;
  }
  if (m_worker.joinable()) {
    m_worker.join(); // finished: m_busy was cleared as its last step
  }
  m_written = 0; // what is written from now on counts towards the next
  m_busy = true;
  m_worker = std::thread([this, conninfo = m_db.conninfo] {
    name_thread("analyze");
    analyze(conninfo);
    m_busy = false;
  });
}

void PlannerStats::analyze(const std::string& conninfo) {
  // SKIP_LOCKED leaves a table that autovacuum is working on (its
  // statistics are being made anyway) rather than waiting for it.
  const auto started = std::chrono::steady_clock::now();
  Result<double> rows = make_error(ErrorKind::database, "no connection");
  try {
    PgConn conn(conninfo); // borrowed from the process's pool per transaction
    rows = conn.run("analyze", [&]() -> Result<double> {
      pqxx::nontransaction tx(conn);
      tx.exec0("ANALYZE (SKIP_LOCKED) resource, change_log");
      return tx.exec1("SELECT greatest(max(reltuples), 0) FROM pg_class "
                      "WHERE oid IN ('resource'::regclass, 'change_log'::regclass)")[0]
          .as<double>();
    });
  } catch (const std::exception& e) {
    rows = make_error(ErrorKind::database, e.what());
  }
  if (!rows) {
    // Tried again after as many rows.
    log::warn("", "ANALYZE of resource and change_log failed: " + rows.error().message);
    return;
  }
  m_rows = std::max(*rows, 0.0);
  log::debug("", "analyzed resource and change_log (" + std::to_string(static_cast<long long>(*rows)) + " rows) in " +
                     std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::steady_clock::now() - started)
                                        .count()) +
                     " ms");
}

} // namespace tributary::store

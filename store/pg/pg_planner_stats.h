#pragma once

// Room store/pg/pg_planner_stats: PostgreSQL's planner statistics for the
// two tables that grow with the store (`resource`, `change_log`), kept in
// step with how fast we write them. Autovacuum visits a database about once
// a minute; a baseline of a million grows both tables from nothing in about
// 100 s, so for most of it the planner believed they held a few hundred
// rows. The republisher's keyset reads (`uri > $2 ORDER BY uri LIMIT n`)
// were then planned as a bitmap scan of every later row and a sort: 300 ms a
// page at 100,000 rows, more as the table grew, and in some runs of the
// million most of PostgreSQL's processor time (bench/RESULTS.md, session
// 42). Owns the count of rows written and the ANALYZE that resets it, which
// runs beside the writes on a thread and connection of its own.

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

namespace tributary::store {

struct PgStoreConnection;

class PlannerStats {
public:
  explicit PlannerStats(PgStoreConnection& db) : m_db(db) {}
  // Waits for an ANALYZE under way.
  ~PlannerStats();
  PlannerStats(const PlannerStats&) = delete;
  PlannerStats& operator=(const PlannerStats&) = delete;

  // A batch just committed `rows` rows (inserted or updated) into the
  // larger of the tables. When that table may have doubled since it was
  // last analyzed (or grown by `k_first` rows when it never was by this
  // process), both are analyzed, unless an ANALYZE is under way already:
  // on a thread and pooled connection of its own, so that the batches
  // that follow are not held behind it (a baseline of a million from
  // nothing: five ANALYZEs of about half a second each, which on the
  // committer's connection stood in the commits' line). Called by one
  // thread at a time (the store's connection mutex is held). A failure is
  // logged; the planner keeps older statistics (a slower plan, never a
  // wrong answer).
  void wrote(uint64_t rows);

  // Rows written before the first ANALYZE (below this a wrong plan costs
  // milliseconds).
  static constexpr uint64_t k_first = 50000;

private:
  // On m_worker.
  void analyze(const std::string& conninfo);

  PgStoreConnection& m_db;
  uint64_t m_written = 0;          // since the last ANALYZE began
  std::atomic<double> m_rows{0};   // the larger table's rows at the last ANALYZE
  std::atomic<bool> m_busy{false}; // an ANALYZE is under way
  std::thread m_worker;
};

} // namespace tributary::store

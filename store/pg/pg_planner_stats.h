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
// 42). Counting is this room's; the ANALYZE is PgStore's (its connection).

#include <cstdint>

namespace tributary::store {

class PlannerStats {
public:
  // A batch just wrote `rows` rows (inserted or updated) into the larger of
  // the tables. True when that table may have doubled since it was last
  // analyzed (or grown by `k_first` rows when it never was by this
  // process): then analyze them and call analyzed(). A baseline of a
  // million from nothing: five ANALYZEs of about half a second each.
  bool wrote(uint64_t rows);
  // The tables were analyzed; the larger holds about `rows` now.
  void analyzed(double rows);

  // Rows written before the first ANALYZE (below this a wrong plan costs
  // milliseconds).
  static constexpr uint64_t k_first = 50000;

private:
  uint64_t m_written = 0; // since the last ANALYZE
  double m_rows = 0;      // the larger table's rows then
};

} // namespace tributary::store

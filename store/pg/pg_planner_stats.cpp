#include "store/pg/pg_planner_stats.h"

#include <algorithm>

namespace tributary::store {

bool PlannerStats::wrote(uint64_t rows) {
  m_written += rows;
  return static_cast<double>(m_written) >= std::max(static_cast<double>(k_first), m_rows);
}

void PlannerStats::analyzed(double rows) {
  m_written = 0;
  m_rows = std::max(rows, 0.0);
}

} // namespace tributary::store

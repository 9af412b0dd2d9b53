#pragma once

// The process's PostgreSQL connections, as the rest of Tributary sees them
// (no libpqxx here): the budget the config sets, and how it is used.
//
// A process holds at most `connections`: one session connection (LISTEN
// and advisory locks: the source leases, the hub's delivery lease, Resource
// Dump claims) and a pool of the rest, which every component borrows from
// for one transaction at a time (see pg_pool.h, pg_session.h).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace tributary::store {

struct PgBudget {
  size_t connections = 10; // the session connection included
  std::chrono::milliseconds wait{30000}; // a borrower waits at most this long
  // Where the session connection goes when not where `database` does:
  // PostgreSQL itself, when `database` is PgBouncer in transaction mode.
  std::string session_conninfo;
};

struct PgPoolStats {
  size_t size = 0;         // pooled connections allowed (the budget less the session's)
  size_t open = 0;         // open (idle or lent)
  size_t in_use = 0;       // lent now
  uint64_t borrows = 0;    // connections lent
  uint64_t waits = 0;      // borrows that waited for one to come free
  uint64_t timeouts = 0;   // borrows that gave up after the wait
  double wait_seconds = 0; // time spent waiting, all borrows
  double max_wait_seconds = 0;
};

// For every store this process opens from now on (call before the first).
void set_pg_budget(const PgBudget& budget);
PgBudget pg_budget();
// Summed over this process's pools.
PgPoolStats pg_pool_stats();

} // namespace tributary::store

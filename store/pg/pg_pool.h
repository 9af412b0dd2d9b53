#pragma once

// Internal to the store's PostgreSQL sources: the process's connections to
// one database. Include pg_guard.h first.
//
// Every store object of a process (the daemon's store, a run's session, the
// status, history and push stores, the republisher's lookups, the bucket's
// index) borrows a connection for one transaction and gives it back: the
// process holds at most `connections` of them, however many components or
// runs it has (#38: a node held about 30, so three nodes filled PostgreSQL's
// default 100). Nothing that outlives a transaction is kept on them
// (temporary tables are made within the transaction that uses them; locks
// held longer live on the session connection, PgSession), so they work
// through PgBouncer in transaction mode.
//
// A borrower waits at most `wait` for a connection to come free; the wait
// is counted (stats(), in /metrics).

#include "store/pg/pg_budget.h"
#include "store/pg/pg_guard.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tributary::store {

class PgPool {
public:
  using Stats = PgPoolStats;

  // The pool of this process for `conninfo`: made on first use, closed
  // (its connections with it) when the last store using it goes.
  static std::shared_ptr<PgPool> of(const std::string& conninfo);
  // Pooled connections allowed: the budget less the session connection.
  static size_t size();

  explicit PgPool(std::string conninfo);
  ~PgPool();
  PgPool(const PgPool&) = delete;
  PgPool& operator=(const PgPool&) = delete;

  // A connection lent for one transaction; given back when it goes (a
  // closed or discarded one is not kept).
  class Borrowed {
  public:
    Borrowed() = default;
    Borrowed(Borrowed&& o) noexcept : m_pool(o.m_pool), m_conn(std::move(o.m_conn)) {
      o.m_pool = nullptr;
    }
    Borrowed& operator=(Borrowed&& o) noexcept;
    ~Borrowed() { give_back(); }
    pqxx::connection& get() { return *m_conn; }
    explicit operator bool() const { return m_conn != nullptr; }
    // Closes it instead of giving it back (it was found broken).
    void discard() { m_conn.reset(); }
    void give_back();

  private:
    friend class PgPool;
    Borrowed(PgPool* pool, std::unique_ptr<pqxx::connection> c) : m_pool(pool), m_conn(std::move(c)) {}
    PgPool* m_pool = nullptr;
    std::unique_ptr<pqxx::connection> m_conn;
  };

  // Waits for a free connection (or opens one while fewer than the limit
  // are open). Throws PoolExhausted after the wait, and as pqxx does when
  // a new connection cannot be made.
  Borrowed borrow();
  // Closes the idle connections: after one was found broken, the others,
  // which idled through the same outage, likely are too.
  void discard_idle();
  Stats stats() const;

private:
  void give(std::unique_ptr<pqxx::connection> c);

  const std::string m_conninfo;
  mutable std::mutex m_mutex;
  std::condition_variable m_freed;
  std::vector<std::unique_ptr<pqxx::connection>> m_idle;
  Stats m_stats;
};

} // namespace tributary::store

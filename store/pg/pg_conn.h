#pragma once

// Internal to the store's PostgreSQL sources: a store object's access to
// the process's connections (PgPool). Include pg_guard.h first.
//
// run(what, f) borrows a connection for f, a whole transaction, and gives
// it back after: a store object holds none between calls. Inside f, the
// PgConn converts to the borrowed connection.
//
// A connection can be lost (PostgreSQL restarted, #33): f is tried again,
// once, on a new connection when the one it had turned out to be dead
// (unless a run's fence says no). Connections left idle through the outage
// are closed with it.

#include "store/pg/pg_guard.h"
#include "store/pg/pg_pool.h"

#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace tributary::store {

class PgConn {
public:
  // Borrows a connection once, to fail now when none can be made (throws as
  // pqxx does).
  explicit PgConn(const std::string& conninfo) : m_pool(PgPool::of(conninfo)) { (void)m_pool->borrow(); }

  // The connection borrowed by the run() under way on this thread.
  pqxx::connection& get() { return m_current->get(); }
  operator pqxx::connection&() { return get(); }

  // A run's session: its transactions go on only while `held` says (no
  // round trip) that the session connection holding its source's lease is
  // the one it began with, and one is tried again on a new connection only
  // when `confirm` (a round trip) says that connection still answers. A
  // run must fail rather than carry on unleased.
  void fence(std::function<bool()> held, std::function<bool()> confirm) {
    m_held = std::move(held);
    m_confirm = std::move(confirm);
  }

  // guarded(what, f), where f uses this connection. f is a whole
  // transaction, committed or not at all: pqxx reports a commit whose
  // outcome is unknown as in_doubt_error, never as a lost connection, so
  // nothing is applied twice.
  template <typename F> auto run(const char* what, F&& f) -> decltype(f()) {
    std::lock_guard lock(m_mutex);
    if (m_current) { // a run() within a run(): the same transaction's connection
      return guarded(what, f);
    }
    if (m_held && !m_held()) {
      return make_error(ErrorKind::database, std::string(what) +
                                                 ": the database session holding this run's source lease was lost");
    }
    auto r = attempt(what, f);
    if (!r && r.error().kind == ErrorKind::database && (!m_confirm || m_confirm())) {
      r = attempt(what, f);
    }
    return r;
  }

private:
  template <typename F> auto attempt(const char* what, F& f) -> decltype(f()) {
    using R = decltype(f());
    try {
      m_borrowed = m_pool->borrow();
    } catch (...) {
      return guarded(what, []() -> R { throw; });
    }
    m_current = &m_borrowed;
    R r = guarded(what, f);
    m_current = nullptr;
    if (!r && r.error().kind == ErrorKind::database) {
      m_borrowed.discard();
      m_pool->discard_idle();
    }
    m_borrowed.give_back();
    return r;
  }

  std::shared_ptr<PgPool> m_pool;
  std::recursive_mutex m_mutex;
  PgPool::Borrowed m_borrowed;
  PgPool::Borrowed* m_current = nullptr;
  std::function<bool()> m_held, m_confirm;
};

} // namespace tributary::store

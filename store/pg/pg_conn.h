#pragma once

// Internal to the store's PostgreSQL sources: a store object's access to
// the process's connections (PgPool). Include pg_guard.h first.
//
// run(what, f) borrows a connection for f, a whole transaction, and gives
// it back after: a store object holds none between calls. Inside f, the
// PgConn converts to the borrowed connection.
//
// A connection can be lost (PostgreSQL restarted, #33): f is tried again,
// once, on a new connection when the one it had turned out to be dead.
// Connections left idle through the outage are closed with it.

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

  // Whether run() tries a transaction again on a new connection after the
  // one it had was lost, when that one was new (one lent before may have
  // idled through an outage: that is always tried again). Off for a run's
  // session unless `fence` says the source's lease is still held.
  void set_retry(bool retry, std::function<bool()> fence = {}) {
    m_retry = retry;
    m_fence = std::move(fence);
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
    auto r = attempt(what, f);
    if (!r && r.error().kind == ErrorKind::database && m_lost_reused) {
      r = attempt(what, f); // a connection that idled through an outage
    } else if (!r && r.error().kind == ErrorKind::database && (m_retry || (m_fence && m_fence()))) {
      r = attempt(what, f);
    }
    return r;
  }

private:
  template <typename F> auto attempt(const char* what, F& f) -> decltype(f()) {
    using R = decltype(f());
    m_lost_reused = false;
    try {
      m_borrowed = m_pool->borrow();
    } catch (...) {
      return guarded(what, []() -> R { throw; });
    }
    m_current = &m_borrowed;
    R r = guarded(what, f);
    m_current = nullptr;
    if (!r && r.error().kind == ErrorKind::database) {
      m_lost_reused = m_borrowed.reused();
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
  bool m_lost_reused = false;
  bool m_retry = true;
  std::function<bool()> m_fence;
};

} // namespace tributary::store

#pragma once

// Internal to the store's PostgreSQL sources: a connection that replaces
// itself after it was lost. Include pg_guard.h first.
//
// libpqxx 6.4 marks a connection whose server went away as closed, then
// reopens it on its own at a later use, without the session's temporary
// tables; and until then every call fails ("Could not obtain client
// encoding: not connected"). After a restart of PostgreSQL, the daemon's
// runs failed for three minutes so (#33). A PgConn opens a new connection,
// and runs its setup (temporary tables, settings), whenever the one it has
// is closed or was lost; run() also tries a transaction again, once, on a
// new connection when the old one turned out to be dead.

#include "store/pg/pg_guard.h"

#include <functional>
#include <memory>
#include <string>

namespace tributary::store {

class PgConn {
public:
  using Setup = std::function<void(pqxx::connection&)>;

  // Connects now: throws as pqxx does when it cannot.
  explicit PgConn(std::string conninfo, Setup setup = {})
      : m_conninfo(std::move(conninfo)), m_setup(std::move(setup)) {
    open();
  }

  // The connection, a new one when the one held was lost (this may throw
  // pqxx::broken_connection: call it inside guarded()).
  pqxx::connection& get() {
    if (!m_conn || !m_conn->is_open()) {
      open();
    }
    return *m_conn;
  }
  operator pqxx::connection&() { return get(); }

  // Whether it holds an open connection (without reconnecting).
  bool is_open() const { return m_conn && m_conn->is_open(); }

  // Answers a round trip: a connection taken from a pool after an outage
  // says it is open until it is used.
  bool alive() {
    try {
      if (!is_open()) {
        return false;
      }
      pqxx::nontransaction tx(*m_conn);
      tx.exec("SELECT 1");
      return true;
    } catch (const std::exception&) {
      m_conn.reset();
      return false;
    }
  }

  // Forgets the connection: the next use opens a new one.
  void drop() { m_conn.reset(); }

  // Whether run() tries a transaction again on a new connection. Off for a
  // run's session: its source lease went with the server (the lock is the
  // lease connection's), so the run fails rather than carrying on unleased.
  void set_retry(bool retry) { m_retry = retry; }

  // guarded(what, f), where f uses this connection: the connection lost
  // (ErrorKind::database) is dropped, and f tried once more on a new one
  // unless retries are off. f is a whole transaction, committed or not at
  // all: pqxx reports a commit whose outcome is unknown as in_doubt_error,
  // never as a lost connection, so nothing is applied twice.
  template <typename F> auto run(const char* what, F&& f) -> decltype(f()) {
    auto r = guarded(what, f);
    if (!r && r.error().kind == ErrorKind::database) {
      drop();
      if (m_retry) {
        r = guarded(what, f);
        if (!r && r.error().kind == ErrorKind::database) {
          drop();
        }
      }
    }
    return r;
  }

private:
  void open() {
    m_conn.reset();
    auto c = std::make_unique<pqxx::connection>(m_conninfo);
    if (m_setup) {
      m_setup(*c);
    }
    m_conn = std::move(c);
  }

  std::string m_conninfo;
  Setup m_setup;
  std::unique_ptr<pqxx::connection> m_conn;
  bool m_retry = true;
};

} // namespace tributary::store

#pragma once

// Internal to the store's PostgreSQL sources: the one connection of a
// process that keeps state between transactions. Include pg_guard.h first.
//
// It holds the process's session advisory locks (each source's lease while
// a run of it lasts, the hub's delivery lease, a set's Resource Dump
// claim), which PostgreSQL releases when the process dies or loses the
// server, so another node takes over at once; and it LISTENs for commits to
// the change log. Everything else borrows from PgPool for one transaction,
// so this is the only connection that must reach PostgreSQL directly when
// the others go through PgBouncer in transaction mode (`database_session`).
//
// Locks are exclusive within the process too (PostgreSQL would grant a
// session's lock to it again). When the connection is lost, every lock goes
// with it: generation() changes, and holders learn so from confirm().

#include "store/pg/pg_guard.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace tributary::store {

class PgSession {
public:
  // The session of this process for the database of `conninfo` (on the
  // budget's session_conninfo, when one is set).
  // Connects on first use, not here.
  static std::shared_ptr<PgSession> of(const std::string& conninfo);
  // "tributary (pid 7 on host)": how other processes see this one.
  static std::string process_name();

  explicit PgSession(std::string conninfo);
  ~PgSession();
  PgSession(const PgSession&) = delete;
  PgSession& operator=(const PgSession&) = delete;

  // Takes the advisory lock (a, b) unless another process, or another
  // holder in this one, has it. Throws as pqxx does when the server cannot
  // be reached. `generation` (when not null) receives the connection's
  // generation, for unlock() and confirm().
  bool try_lock(int a, int b, uint64_t* generation = nullptr);
  // Gives back a lock taken in `generation` (one lost with its connection
  // is gone already).
  void unlock(int a, int b, uint64_t generation);
  bool holds(int a, int b);
  // Holds (a, b) from now on: it already did, or took it now (false:
  // another holds it). Re-entrant, for leases asked for on every turn.
  bool hold(int a, int b) { return holds(a, b) || try_lock(a, b); }

  uint64_t generation() const { return m_generation.load(); }
  // Whether the connection of `generation` still answers (a round trip):
  // the locks taken on it are still held.
  bool confirm(uint64_t generation);

  // Calls `fn`, on the session's thread, after a commit to the change log
  // by any process, once soon after it is added, and after the connection
  // came back (for what was missed). Returns an id for unlisten().
  uint64_t listen(std::function<void()> fn);
  // Connects now, on the session's thread, rather than at the first lock:
  // a process about to run sources has the connection ready by then (its
  // setup took 4-5 ms of a 10,000-resource baseline's 300).
  void connect_soon();
  void unlisten(uint64_t id);

private:
  class Receiver;
  void connect_locked();
  void lost_locked();
  void drain_locked();
  void wake();
  void loop();

  const std::string m_conninfo;
  std::mutex m_mutex; // the connection, locks
  std::unique_ptr<pqxx::connection> m_conn;
  std::unique_ptr<Receiver> m_receiver;
  std::set<std::pair<int, int>> m_held;
  std::atomic<uint64_t> m_generation{1};
  std::atomic<bool> m_pending{false};
  std::atomic<bool> m_wanted{false}; // connect_soon()
  std::string m_last_error;

  std::mutex m_call_mutex; // held while listeners are called
  std::mutex m_listeners_mutex;
  std::map<uint64_t, std::function<void()>> m_listeners;
  uint64_t m_next_listener = 1;

  int m_wake[2] = {-1, -1};
  std::atomic<bool> m_stop{false};
  std::thread m_thread;
};

} // namespace tributary::store

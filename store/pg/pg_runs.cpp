// PgStore's runs and locks: sessions from the pool, the per-source lease,
// the run log and its pruning.
#include "store/pg/pg_store_internal.h"

namespace tributary::store {

Result<std::unique_ptr<Store>> PgStore::open_session() {
  return m_impl->conn.run("open session", [&]() -> Result<std::unique_ptr<Store>> {
    std::shared_ptr<Impl::Pool> pool;
    {
      std::lock_guard lock(m_impl->mutex);
      if (!m_impl->pool) {
        m_impl->pool = std::make_shared<Impl::Pool>();
      }
      pool = m_impl->pool;
    }
    std::unique_ptr<Impl> impl;
    for (;;) {
      {
        std::lock_guard lock(pool->mutex);
        if (pool->idle.empty()) {
          break;
        }
        impl = std::move(pool->idle.back());
        pool->idle.pop_back();
      }
      // One that idled through an outage says it is open until used.
      if (impl->conn.alive()) {
        break;
      }
      impl.reset();
    }
    if (!impl) {
      impl = std::make_unique<Impl>(m_impl->conninfo);
    }
    impl->pool = std::move(pool);
    impl->session = true;
    // A run's transactions are not tried again on a new connection: its
    // source lease went with the old server (see PgConn::set_retry).
    impl->conn.set_retry(false);
    return std::unique_ptr<Store>(new PgStore(std::move(impl)));
  });
}

Result<LockAttempt> PgStore::try_lock_source(int64_t source_id, const std::string& who) {
  // A session advisory lock on a connection of the lease's own: held while
  // the run lasts, whatever its transactions do, and released by
  // PostgreSQL when the connection ends (the process exiting or killed).
  // A lease given back unlocks and leaves its connection for the next run
  // (a connection costs as much as a short run).
  struct Lease : SourceLease {
    Lease(std::unique_ptr<pqxx::connection> c, std::shared_ptr<Impl::Pool> p, int id)
        : conn(std::move(c)), pool(std::move(p)), source(id) {}
    ~Lease() override {
      if (!pool || !conn) {
        return;
      }
      try {
        pqxx::nontransaction tx(*conn);
        if (locked &&
            !tx.exec_params1("SELECT pg_advisory_unlock($1, $2)", k_source_lock_class, source)[0].as<bool>()) {
          return; // not held any more: this connection is not to be trusted
        }
        tx.exec("SELECT set_config('application_name', 'tributary (idle)', false)");
      } catch (const std::exception&) {
        return; // closed with the connection
      }
      std::lock_guard lock(pool->mutex);
      if (pool->idle_leases.size() < k_idle_sessions) {
        pool->idle_leases.push_back(std::move(conn));
      }
    }
    std::unique_ptr<pqxx::connection> conn;
    std::shared_ptr<Impl::Pool> pool;
    int source = 0;
    bool locked = false;
  };
  return m_impl->conn.run("lock source", [&]() -> Result<LockAttempt> {
    std::shared_ptr<Impl::Pool> pool;
    {
      std::lock_guard lock(m_impl->mutex);
      if (!m_impl->pool) {
        m_impl->pool = std::make_shared<Impl::Pool>();
      }
      pool = m_impl->pool;
    }
    std::unique_ptr<pqxx::connection> conn;
    for (;;) {
      {
        std::lock_guard lock(pool->mutex);
        if (pool->idle_leases.empty()) {
          break;
        }
        conn = std::move(pool->idle_leases.back());
        pool->idle_leases.pop_back();
      }
      // One that idled through an outage says it is open until used.
      try {
        if (conn->is_open()) {
          pqxx::nontransaction ping(*conn);
          ping.exec("SELECT 1");
          break;
        }
      } catch (const std::exception&) {
      }
      conn.reset();
    }
    if (!conn) {
      conn = std::make_unique<pqxx::connection>(m_impl->conninfo);
    }
    auto lease = std::make_unique<Lease>(std::move(conn), pool, static_cast<int>(source_id));
    pqxx::nontransaction tx(*lease->conn);
    tx.exec_params("SELECT set_config('application_name', $1, false)", who.substr(0, 60));
    // A daemon whose host died (no FIN reaches the server) holds its lease
    // until the server notices: keepalive probes bound that to about 25 s
    // instead of the kernel's two hours (over a Unix socket they do not
    // apply, nor are they needed: the peer's exit closes it).
    tx.exec("SET tcp_keepalives_idle = 10");
    tx.exec("SET tcp_keepalives_interval = 5");
    tx.exec("SET tcp_keepalives_count = 3");
    LockAttempt out;
    if (!tx.exec_params1("SELECT pg_try_advisory_lock($1, $2)", k_source_lock_class, static_cast<int>(source_id))[0]
             .as<bool>()) {
      auto r = tx.exec_params("SELECT a.application_name, " + us("a.backend_start") +
                                  " FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                                  "WHERE l.locktype = 'advisory' AND l.granted AND l.database = "
                                  "(SELECT oid FROM pg_database WHERE datname = current_database()) "
                                  "AND l.classid = $1::oid AND l.objid = $2::oid AND l.objsubid = 2",
                              k_source_lock_class, static_cast<int>(source_id));
      if (r.empty()) {
        out.holder = "another run (just ended)";
      } else {
        out.holder = r[0][0].as<std::string>();
        if (auto since = read_opt_time(r[0][1])) {
          out.holder += ", connected since " + rs::format_w3c_datetime(*since);
        }
      }
      return out;
    }
    lease->locked = true;
    // Runs left "running" by a process that died: none can be under way now.
    tx.exec_params("UPDATE sync_run SET status = 'failed', finished_at = now(), "
                   "message = coalesce(message || '; ', '') || 'interrupted: its process ended or lost the database' "
                   "WHERE source_id = $1 AND status = 'running'",
                   source_id);
    out.lease = std::move(lease);
    return out;
  });
}

Result<int64_t> PgStore::begin_run(int64_t source_id, RunMode mode, RunTrigger trigger) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("begin run", [&]() -> Result<int64_t> {
    pqxx::work tx(m_impl->conn);
    auto r = tx.exec_params("INSERT INTO sync_run (source_id, mode, status, node, trigger) "
                            "VALUES ($1, $2, 'running', $3, $4) RETURNING id",
                            source_id, std::string(to_string(mode)), node_name(), std::string(to_string(trigger)));
    tx.commit();
    return r[0][0].as<int64_t>();
  });
}

Result<int64_t> PgStore::record_failed_run(int64_t source_id, RunMode mode, Timestamp started,
                                           const std::string& message, RunTrigger trigger) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("record a failed run", [&]() -> Result<int64_t> {
    pqxx::work tx(m_impl->conn);
    auto r = tx.exec_params("INSERT INTO sync_run (source_id, mode, status, node, started_at, finished_at, message, "
                            "trigger) VALUES ($1, $2, 'failed', $3, $4, now(), $5, $6) RETURNING id",
                            source_id, std::string(to_string(mode)), node_name(), rs::format_w3c_datetime(started),
                            message, std::string(to_string(trigger)));
    tx.commit();
    return r[0][0].as<int64_t>();
  });
}

Result<void> PgStore::record_error(int64_t run_id, const std::string& url, const std::string& reason) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("record error", [&]() -> Result<void> {
    pqxx::work tx(m_impl->conn);
    tx.exec_params("INSERT INTO sync_error (run_id, url, reason) VALUES ($1, $2, $3)", run_id, url, reason);
    tx.commit();
    return {};
  });
}

Result<void> PgStore::finish_run(int64_t run_id, RunStatus status, const std::string& message) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("finish run", [&]() -> Result<void> {
    pqxx::work tx(m_impl->conn);
    tx.exec_params("UPDATE sync_run SET status = $2, message = $3, finished_at = now() WHERE id = $1", run_id,
                   std::string(to_string(status)), message);
    tx.commit();
    return {};
  });
}


Result<RunInfo> PgStore::run(int64_t run_id) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read run", [&]() -> Result<RunInfo> {
    pqxx::read_transaction tx(m_impl->conn);
    auto r = tx.exec_params("SELECT " + k_run_columns + " FROM sync_run WHERE id = $1", run_id);
    if (r.empty()) {
      return make_error(ErrorKind::not_found, "no sync run " + std::to_string(run_id));
    }
    return read_run(r[0]);
  });
}


Result<std::vector<RunInfo>> PgStore::recent_runs(const std::string& name, size_t limit) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read recent runs", [&]() -> Result<std::vector<RunInfo>> {
    pqxx::read_transaction tx(m_impl->conn);
    auto r = tx.exec_params("SELECT " + k_run_columns +
                                " FROM sync_run WHERE source_id = (SELECT id FROM source WHERE name = $1) "
                                "ORDER BY id DESC LIMIT $2",
                            name, static_cast<long long>(limit));
    std::vector<RunInfo> out;
    for (const auto& row : r) {
      out.push_back(read_run(row));
    }
    return out;
  });
}

Result<std::vector<RunInfo>> PgStore::runs_page(const std::string& name, int64_t before, size_t limit,
                                                const std::string& status, const std::string& trigger) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read a page of runs", [&]() -> Result<std::vector<RunInfo>> {
    pqxx::read_transaction tx(m_impl->conn);
    auto r = tx.exec_params("SELECT " + k_run_columns +
                                " FROM sync_run WHERE source_id = (SELECT id FROM source WHERE name = $1) "
                                "AND ($2 = 0 OR id < $2) AND ($3 = '' OR status = $3) "
                                "AND ($4 = '' OR trigger = $4) ORDER BY id DESC LIMIT $5",
                            name, static_cast<long long>(before), status, trigger, static_cast<long long>(limit));
    std::vector<RunInfo> out;
    for (const auto& row : r) {
      out.push_back(read_run(row));
    }
    return out;
  });
}

Result<uint64_t> PgStore::prune_runs(std::chrono::seconds older_than, size_t limit) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("prune runs", [&]() -> Result<uint64_t> {
    pqxx::work tx(m_impl->conn);
    auto r = tx.exec_params(
        "DELETE FROM sync_run WHERE id IN ("
        "  SELECT id FROM sync_run r WHERE finished_at < now() - make_interval(secs => $1) "
        "  AND id <> coalesce((SELECT max(id) FROM sync_run WHERE source_id = r.source_id AND status = 'succeeded'), 0) "
        "  AND id <> coalesce((SELECT max(id) FROM sync_run WHERE source_id = r.source_id AND status = 'failed'), 0) "
        "  ORDER BY finished_at LIMIT $2)",
        static_cast<double>(older_than.count()), static_cast<long long>(limit));
    tx.commit();
    return static_cast<uint64_t>(r.affected_rows());
  });
}

} // namespace tributary::store

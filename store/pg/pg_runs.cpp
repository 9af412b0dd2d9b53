// PgStore's runs and locks: sessions from the pool, the per-source lease,
// the run log and its pruning.
#include "store/pg/pg_runs.h"

#include "store/pg/pg_store_internal.h"

namespace tributary::store {

using namespace pg_detail;

Result<LockAttempt> PgRuns::try_lock_source(int64_t source_id, const std::string& who) {
  // A session advisory lock on the process's session connection: held
  // while the run lasts, whatever its transactions do, and released by
  // PostgreSQL when that connection ends (the process exiting or killed),
  // so another node takes the source over at once.
  struct Lease : SourceLease {
    Lease(std::shared_ptr<PgSession> s, int id, uint64_t g) : session(std::move(s)), source(id), generation(g) {}
    ~Lease() override { session->unlock(k_source_lock_class, source, generation); }
    std::shared_ptr<PgSession> session;
    int source = 0;
    uint64_t generation = 0;
  };
  return guarded("lock source", [&]() -> Result<LockAttempt> {
    const int id = static_cast<int>(source_id);
    uint64_t generation = 0;
    LockAttempt out;
    if (!m_db.session->try_lock(k_source_lock_class, id, &generation)) {
      auto holder = m_db.conn.run("name the source's holder", [&]() -> Result<std::string> {
        pqxx::read_transaction tx(m_db.conn);
        auto r = tx.exec_params("SELECT holder, " + us("since") + " FROM source_lease WHERE source_id = $1",
                                source_id);
        if (r.empty()) {
          return std::string("another run (just ended)");
        }
        std::string h = r[0][0].as<std::string>();
        if (auto since = read_opt_time(r[0][1])) {
          h += ", since " + rs::format_w3c_datetime(*since);
        }
        return h;
      });
      out.holder = holder ? *holder : "another run";
      return out;
    }
    auto lease = std::make_unique<Lease>(m_db.session, id, generation);
    auto recorded = m_db.conn.run("record the source's lease", [&]() -> Result<void> {
      pqxx::work tx(m_db.conn);
      tx.exec_params("INSERT INTO source_lease (source_id, holder, since) VALUES ($1, $2, now()) "
                     "ON CONFLICT (source_id) DO UPDATE SET holder = EXCLUDED.holder, since = EXCLUDED.since",
                     source_id, who.substr(0, 200));
      // Runs left "running" by a process that died: none can be under way now.
      tx.exec_params("UPDATE sync_run SET status = 'failed', finished_at = now(), "
                     "message = coalesce(message || '; ', '') || 'interrupted: its process ended or lost the database' "
                     "WHERE source_id = $1 AND status = 'running'",
                     source_id);
      tx.commit();
      return {};
    });
    if (!recorded) {
      return tl::unexpected(recorded.error()); // the lease goes back
    }
    out.lease = std::move(lease);
    return out;
  });
}

Result<int64_t> PgRuns::begin_run(int64_t source_id, RunMode mode, RunTrigger trigger) {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("begin run", [&]() -> Result<int64_t> {
    pqxx::work tx(m_db.conn);
    auto r = tx.exec_params("INSERT INTO sync_run (source_id, mode, status, node, trigger) "
                            "VALUES ($1, $2, 'running', $3, $4) RETURNING id",
                            source_id, std::string(to_string(mode)), node_name(), std::string(to_string(trigger)));
    tx.commit();
    return r[0][0].as<int64_t>();
  });
}

Result<int64_t> PgRuns::record_failed_run(int64_t source_id, RunMode mode, Timestamp started,
                                           const std::string& message, RunTrigger trigger) {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("record a failed run", [&]() -> Result<int64_t> {
    pqxx::work tx(m_db.conn);
    auto r = tx.exec_params("INSERT INTO sync_run (source_id, mode, status, node, started_at, finished_at, message, "
                            "trigger) VALUES ($1, $2, 'failed', $3, $4, now(), $5, $6) RETURNING id",
                            source_id, std::string(to_string(mode)), node_name(), rs::format_w3c_datetime(started),
                            message, std::string(to_string(trigger)));
    tx.commit();
    return r[0][0].as<int64_t>();
  });
}

Result<void> PgRuns::record_error(int64_t run_id, const std::string& url, const std::string& reason) {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("record error", [&]() -> Result<void> {
    pqxx::work tx(m_db.conn);
    tx.exec_params("INSERT INTO sync_error (run_id, url, reason) VALUES ($1, $2, $3)", run_id, url, reason);
    tx.commit();
    return {};
  });
}

Result<void> PgRuns::finish_run(int64_t run_id, RunStatus status, const std::string& message, RunMode mode) {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("finish run", [&]() -> Result<void> {
    pqxx::work tx(m_db.conn);
    tx.exec_params("UPDATE sync_run SET status = $2, message = $3, finished_at = now(), mode = $4 WHERE id = $1",
                   run_id, std::string(to_string(status)), message, std::string(to_string(mode)));
    tx.commit();
    return {};
  });
}


Result<RunInfo> PgRuns::run(int64_t run_id) {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("read run", [&]() -> Result<RunInfo> {
    pqxx::read_transaction tx(m_db.conn);
    auto r = tx.exec_params("SELECT " + k_run_columns + " FROM sync_run WHERE id = $1", run_id);
    if (r.empty()) {
      return make_error(ErrorKind::not_found, "no sync run " + std::to_string(run_id));
    }
    return read_run(r[0]);
  });
}


Result<std::vector<RunInfo>> PgRuns::recent_runs(const std::string& name, size_t limit) {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("read recent runs", [&]() -> Result<std::vector<RunInfo>> {
    pqxx::read_transaction tx(m_db.conn);
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

Result<std::vector<RunInfo>> PgRuns::runs_page(const std::string& name, int64_t before, size_t limit,
                                                const std::string& status, const std::string& trigger) {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("read a page of runs", [&]() -> Result<std::vector<RunInfo>> {
    pqxx::read_transaction tx(m_db.conn);
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

Result<uint64_t> PgRuns::prune_runs(std::chrono::seconds older_than, size_t limit) {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("prune runs", [&]() -> Result<uint64_t> {
    pqxx::work tx(m_db.conn);
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

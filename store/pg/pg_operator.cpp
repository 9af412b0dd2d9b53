#include "store/pg/pg_operator.h"

#include "store/pg/migrations.h"
#include "store/pg/pg_conn.h"
#include "store/pg/pg_fields.h"

#include <mutex>

namespace tributary::store {

struct PgOperatorStore::Impl {
  explicit Impl(const std::string& conninfo) : conn(conninfo) {}
  std::mutex mutex;
  PgConn conn; // borrowed per transaction
};

PgOperatorStore::PgOperatorStore(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
PgOperatorStore::~PgOperatorStore() = default;

Result<std::unique_ptr<PgOperatorStore>> PgOperatorStore::open(const std::string& conninfo) {
  if (auto ok = check_schema(conninfo); !ok) {
    return tl::unexpected(ok.error());
  }
  return guarded("open the operator store", [&]() -> Result<std::unique_ptr<PgOperatorStore>> {
    return std::unique_ptr<PgOperatorStore>(new PgOperatorStore(std::make_unique<Impl>(conninfo)));
  });
}

Result<std::vector<PauseInfo>> PgOperatorStore::pauses() {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read pauses", [&]() -> Result<std::vector<PauseInfo>> {
    pqxx::read_transaction tx(m_impl->conn);
    std::vector<PauseInfo> out;
    for (const auto& row : tx.exec("SELECT source, " + us("paused_at") + ", paused_by, reason FROM source_pause "
                                   "ORDER BY source")) {
      out.push_back({row[0].as<std::string>(), read_time(row[1]), row[2].as<std::string>(),
                     row[3].as<std::string>()});
    }
    return out;
  });
}

Result<void> PgOperatorStore::pause(const std::string& source, const std::string& by, const std::string& reason) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("pause a source", [&]() -> Result<void> {
    pqxx::work tx(m_impl->conn);
    tx.exec_params("INSERT INTO source_pause (source, paused_by, reason) VALUES ($1, $2, $3) "
                   "ON CONFLICT (source) DO UPDATE SET paused_at = now(), paused_by = $2, reason = $3",
                   source, by, reason);
    tx.exec_params("INSERT INTO operator_action (source, action, actor, detail) VALUES ($1, 'pause', $2, $3)", source,
                   by, reason);
    tx.commit();
    return {};
  });
}

Result<bool> PgOperatorStore::resume(const std::string& source, const std::string& by) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("resume a source", [&]() -> Result<bool> {
    pqxx::work tx(m_impl->conn);
    const bool was = tx.exec_params("DELETE FROM source_pause WHERE source = $1", source).affected_rows() > 0;
    if (was) {
      tx.exec_params("INSERT INTO operator_action (source, action, actor) VALUES ($1, 'resume', $2)", source, by);
    }
    tx.commit();
    return was;
  });
}

Result<void> PgOperatorStore::record_action(const std::string& source, const std::string& action,
                                          const std::string& actor, const std::string& detail) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("record an operator action", [&]() -> Result<void> {
    pqxx::work tx(m_impl->conn);
    tx.exec_params("INSERT INTO operator_action (source, action, actor, detail) VALUES ($1, $2, $3, $4)", source,
                   action, actor, detail);
    tx.commit();
    return {};
  });
}

Result<std::vector<OperatorAction>> PgOperatorStore::actions(const std::string& source, size_t limit) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read operator actions", [&]() -> Result<std::vector<OperatorAction>> {
    pqxx::read_transaction tx(m_impl->conn);
    std::vector<OperatorAction> out;
    for (const auto& row : tx.exec_params("SELECT id, source, action, actor, " + us("at") + ", detail "
                                          "FROM operator_action WHERE source = $1 ORDER BY id DESC LIMIT $2",
                                          source, static_cast<long long>(limit))) {
      out.push_back({row[0].as<int64_t>(), row[1].as<std::string>(), row[2].as<std::string>(),
                     row[3].as<std::string>(), read_time(row[4]), row[5].as<std::string>()});
    }
    return out;
  });
}

Result<uint64_t> PgOperatorStore::retry_now(const std::string& source) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("retry now", [&]() -> Result<uint64_t> {
    pqxx::work tx(m_impl->conn);
    auto r = tx.exec_params("UPDATE retry SET next_attempt_at = now() WHERE next_attempt_at > now() AND feed_id IN "
                            "(SELECT f.id FROM feed f JOIN source s ON s.id = f.source_id WHERE s.name = $1)",
                            source);
    tx.commit();
    return static_cast<uint64_t>(r.affected_rows());
  });
}

Result<std::vector<std::string>> PgOperatorStore::mark_removed(const std::vector<std::string>& configured) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("mark removed sources", [&]() -> Result<std::vector<std::string>> {
    pqxx::work tx(m_impl->conn);
    std::string names = "{";
    for (size_t i = 0; i < configured.size(); ++i) {
      std::string quoted;
      for (char c : configured[i]) {
        if (c == '"' || c == '\\') {
          quoted += '\\';
        }
        quoted += c;
      }
      names += (i ? ",\"" : "\"") + quoted + "\"";
    }
    names += "}";
    tx.exec_params("DELETE FROM source_removed WHERE source = ANY($1::text[])", names);
    std::vector<std::string> out;
    for (const auto& row : tx.exec_params("INSERT INTO source_removed (source) SELECT name FROM source "
                                          "WHERE NOT (name = ANY($1::text[])) ON CONFLICT DO NOTHING RETURNING source",
                                          names)) {
      out.push_back(row[0].as<std::string>());
    }
    tx.commit();
    return out;
  });
}

Result<bool> PgOperatorStore::purge_source(const std::string& source, bool keep_mark) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("purge a source", [&]() -> Result<bool> {
    pqxx::work tx(m_impl->conn);
    // Everything of it hangs off its row (ON DELETE CASCADE): feeds,
    // resources, retries, the change log, watermarks, runs and errors, the
    // status history.
    const bool had = tx.exec_params("DELETE FROM source WHERE name = $1", source).affected_rows() > 0;
    tx.exec_params("DELETE FROM source_pause WHERE source = $1", source);
    if (!keep_mark) {
      tx.exec_params("DELETE FROM source_removed WHERE source = $1", source);
    } else if (had) {
      // Its URLs answer 410 Gone until the mark's retention passes (gc).
      tx.exec_params("INSERT INTO source_removed (source) VALUES ($1) ON CONFLICT DO NOTHING", source);
    }
    tx.commit();
    return had;
  });
}

Result<std::vector<std::string>> PgOperatorStore::removed_before(std::chrono::seconds older_than) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("list removed sources", [&]() -> Result<std::vector<std::string>> {
    pqxx::read_transaction tx(m_impl->conn);
    std::vector<std::string> out;
    for (const auto& row : tx.exec_params("SELECT source FROM source_removed "
                                          "WHERE removed_at < now() - make_interval(secs => $1) ORDER BY source",
                                          static_cast<double>(older_than.count()))) {
      out.push_back(row[0].as<std::string>());
    }
    return out;
  });
}

Result<uint64_t> PgOperatorStore::refuse_deletions(const std::string& source) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("refuse held deletions", [&]() -> Result<uint64_t> {
    pqxx::work tx(m_impl->conn);
    auto r = tx.exec_params("UPDATE feed SET deletion_hold_unseen = NULL, deletion_hold_live = NULL, "
                            "deletion_hold_since = NULL, deletion_hold_run = NULL, deletions_confirmed = false "
                            "WHERE deletion_hold_unseen IS NOT NULL AND source_id = "
                            "(SELECT id FROM source WHERE name = $1)",
                            source);
    tx.commit();
    return static_cast<uint64_t>(r.affected_rows());
  });
}

} // namespace tributary::store

#include "store/pg/pg_status_store.h"

#include "store/pg/pg_conn.h"
#include "store/pg/migrations.h"
#include "store/pg/pg_fields.h"

#include <mutex>

namespace tributary::store {

struct PgStatusStore::Impl {
  explicit Impl(const std::string& conninfo) : conn(conninfo) {}
  std::mutex mutex;
  PgConn conn; // borrowed per transaction
};

namespace {

// The bucket a time falls in, in SQL.
std::string bucket_of(const std::string& expr) {
  return "date_bin('" + std::to_string(PgStatusStore::k_bucket.count()) + " seconds', " + expr +
         ", timestamptz '2000-01-01 00:00:00+00')";
}

} // namespace

PgStatusStore::PgStatusStore(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
PgStatusStore::~PgStatusStore() = default;

Result<std::unique_ptr<PgStatusStore>> PgStatusStore::open(const std::string& conninfo) {
  if (auto ok = check_schema(conninfo); !ok) {
    return tl::unexpected(ok.error());
  }
  return guarded("open the status store", [&]() -> Result<std::unique_ptr<PgStatusStore>> {
    return std::unique_ptr<PgStatusStore>(new PgStatusStore(std::make_unique<Impl>(conninfo)));
  });
}

Result<void> PgStatusStore::sample(const std::vector<HistorySample>& samples, std::chrono::seconds retention) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("sample the status history", [&]() -> Result<void> {
    pqxx::work tx(m_impl->conn);
    for (const auto& s : samples) {
      tx.exec_params("INSERT INTO source_history AS h (source_id, bucket, lag_seconds, failing) "
                     "SELECT id, " + bucket_of("now()") + ", $2, $3 FROM source WHERE name = $1 "
                     "ON CONFLICT (source_id, bucket) DO UPDATE "
                     "SET lag_seconds = EXCLUDED.lag_seconds, failing = EXCLUDED.failing",
                     s.source, s.lag_seconds, s.failing);
    }
    tx.exec_params("DELETE FROM source_history WHERE bucket < now() - make_interval(secs => $1)",
                   static_cast<double>(retention.count()));
    tx.commit();
    return {};
  });
}

Result<void> PgStatusStore::record_run(const std::string& source, bool baseline, uint64_t applied) {
  if (applied == 0) {
    return {};
  }
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("count a run in the status history", [&]() -> Result<void> {
    pqxx::work tx(m_impl->conn);
    const std::string column = baseline ? "baseline" : "changes";
    tx.exec_params("INSERT INTO source_history AS h (source_id, bucket, " + column + ") "
                   "SELECT id, " + bucket_of("now()") + ", $2 FROM source WHERE name = $1 "
                   "ON CONFLICT (source_id, bucket) DO UPDATE SET " + column + " = h." + column + " + EXCLUDED." +
                   column,
                   source, static_cast<long long>(applied));
    tx.commit();
    return {};
  });
}

Result<std::vector<SourceHistory>> PgStatusStore::history(rs::Timestamp since, const std::string& source) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read the status history", [&]() -> Result<std::vector<SourceHistory>> {
    pqxx::read_transaction tx(m_impl->conn);
    auto rows = tx.exec_params("SELECT s.name, " + us("h.bucket") + ", h.lag_seconds, h.changes, h.failing, h.baseline "
                               "FROM source_history h JOIN source s ON s.id = h.source_id "
                               "WHERE h.bucket >= to_timestamp($1::double precision / 1000000) "
                               "AND ($2 = '' OR s.name = $2) ORDER BY s.name, h.bucket",
                               static_cast<long long>(since.time_since_epoch().count()), source);
    std::vector<SourceHistory> out;
    for (const auto& row : rows) {
      const std::string name = row[0].as<std::string>();
      if (out.empty() || out.back().source != name) {
        out.push_back({name, {}});
      }
      HistoryPoint p;
      p.bucket = read_time(row[1]);
      p.lag_seconds = row[2].as<std::optional<double>>();
      p.changes = row[3].as<uint64_t>();
      p.failing = row[4].as<bool>();
      p.baseline = row[5].as<uint64_t>();
      out.back().points.push_back(p);
    }
    return out;
  });
}

Result<std::vector<FeedStatus>> PgStatusStore::feeds(const std::string& source) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read a source's feeds", [&]() -> Result<std::vector<FeedStatus>> {
    pqxx::read_transaction tx(m_impl->conn);
    auto rows = tx.exec_params(
        "SELECT f.id, f.capability_list_url, coalesce(st.live, 0), coalesce(st.deleted, 0), coalesce(st.bytes, 0), "
        "(SELECT count(*) FROM retry r WHERE r.feed_id = f.id), " + us("w.baseline_at") + ", w.change_list_url, " +
            us("w.last_time") + ", w.last_uri, w.last_position, " + us("w.updated_at") +
            " FROM feed f JOIN source s ON s.id = f.source_id LEFT JOIN feed_stats st ON st.feed_id = f.id "
            "LEFT JOIN watermark w ON w.feed_id = f.id WHERE s.name = $1 ORDER BY f.capability_list_url",
        source);
    std::vector<FeedStatus> out;
    for (const auto& row : rows) {
      FeedStatus f;
      f.id = row[0].as<long long>();
      f.capability_list_url = row[1].as<std::string>();
      f.live = row[2].as<uint64_t>();
      f.deleted = row[3].as<uint64_t>();
      f.bytes = row[4].as<uint64_t>();
      f.retrying = row[5].as<uint64_t>();
      f.baseline_at = read_opt_time(row[6]);
      f.change_list_url = text_or_empty(row[7]);
      f.last_time = read_opt_time(row[8]);
      f.last_uri = text_or_empty(row[9]);
      f.last_position = row[10].as<std::optional<int>>();
      f.updated_at = read_opt_time(row[11]);
      out.push_back(std::move(f));
    }
    return out;
  });
}

Result<std::vector<RunError>> PgStatusStore::recent_errors(const std::string& source, size_t limit) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read a source's errors", [&]() -> Result<std::vector<RunError>> {
    pqxx::read_transaction tx(m_impl->conn);
    // The newest runs first, through sync_error's run index.
    auto rows = tx.exec_params("SELECT e.run_id, " + us("e.at") + ", e.url, e.reason FROM sync_error e "
                               "WHERE e.run_id IN (SELECT r.id FROM sync_run r JOIN source s ON s.id = r.source_id "
                               "                   WHERE s.name = $1 ORDER BY r.id DESC LIMIT 200) "
                               "ORDER BY e.id DESC LIMIT $2",
                               source, static_cast<long long>(limit));
    std::vector<RunError> out;
    for (const auto& row : rows) {
      out.push_back({row[0].as<long long>(), read_time(row[1]), row[2].as<std::string>(), row[3].as<std::string>()});
    }
    return out;
  });
}

Result<std::pair<uint64_t, std::vector<RetryingResource>>> PgStatusStore::retrying(const std::string& source,
                                                                                   size_t limit) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read a source's retrying resources",
                 [&]() -> Result<std::pair<uint64_t, std::vector<RetryingResource>>> {
                   pqxx::read_transaction tx(m_impl->conn);
                   const std::string from = " FROM retry r JOIN feed f ON f.id = r.feed_id JOIN source s ON "
                                            "s.id = f.source_id WHERE s.name = $1";
                   const auto total = tx.exec_params1("SELECT count(*)" + from, source)[0].as<uint64_t>();
                   auto rows = tx.exec_params("SELECT f.capability_list_url, r.uri, coalesce(r.change, ''), r.reason, "
                                              "r.attempts, " + us("r.first_failed_at") + ", " +
                                                  us("r.next_attempt_at") + from +
                                                  " ORDER BY r.next_attempt_at, r.uri LIMIT $2",
                                              source, static_cast<long long>(limit));
                   std::vector<RetryingResource> out;
                   for (const auto& row : rows) {
                     out.push_back({row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::string>(),
                                    row[3].as<std::string>(), row[4].as<int>(), read_time(row[5]),
                                    read_time(row[6])});
                   }
                   return std::make_pair(total, std::move(out));
                 });
}

} // namespace tributary::store

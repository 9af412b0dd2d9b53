// PgStore's read side (StoreReader): feeds, resources, the change log as
// the republisher reads it, statistics; and the pool of readers.
#include "store/pg/pg_reader.h"

#include "store/pg/pg_store_internal.h"

namespace tributary::store {

using namespace pg_detail;

Result<std::vector<FeedInfo>> PgReadSide::feeds() {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("list feeds", [&]() -> Result<std::vector<FeedInfo>> {
    pqxx::read_transaction tx(m_db.conn);
    auto r = tx.exec("SELECT f.id, f.source_id, s.name, f.capability_list_url FROM feed f "
                     "JOIN source s ON s.id = f.source_id "
                     "WHERE NOT EXISTS (SELECT 1 FROM source_removed x WHERE x.source = s.name) "
                     "ORDER BY s.name, f.id");
    std::vector<FeedInfo> out;
    for (const auto& row : r) {
      out.push_back(FeedInfo{row[0].as<int64_t>(), row[1].as<int64_t>(), row[2].as<std::string>(),
                             row[3].as<std::string>()});
    }
    return out;
  });
}

Result<std::vector<std::string>> PgReadSide::removed_sources() {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("list removed sources", [&]() -> Result<std::vector<std::string>> {
    pqxx::read_transaction tx(m_db.conn);
    std::vector<std::string> out;
    for (const auto& row : tx.exec("SELECT source FROM source_removed ORDER BY source")) {
      out.push_back(row[0].as<std::string>());
    }
    return out;
  });
}

Result<std::vector<ResourceRecord>> PgReadSide::live_resources(int64_t feed_id, const std::string& after_uri,
                                                            size_t limit) {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("list live resources", [&]() -> Result<std::vector<ResourceRecord>> {
    pqxx::read_transaction tx(m_db.conn);
    auto r = tx.exec_params(resource_select() +
                                "WHERE feed_id = $1 AND state = 'live' AND uri > $2 ORDER BY uri LIMIT $3",
                            feed_id, after_uri, static_cast<long long>(limit));
    std::vector<ResourceRecord> out;
    out.reserve(r.size());
    for (const auto& row : r) {
      out.push_back(read_resource(row));
    }
    return out;
  });
}

Result<std::optional<ResourceRecord>> PgReadSide::resource(int64_t feed_id, const std::string& uri) {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("read resource", [&]() -> Result<std::optional<ResourceRecord>> {
    pqxx::read_transaction tx(m_db.conn);
    auto r = tx.exec_params(resource_select() + "WHERE feed_id = $1 AND uri = $2", feed_id, uri);
    if (r.empty()) {
      return std::optional<ResourceRecord>();
    }
    return std::optional<ResourceRecord>(read_resource(r[0]));
  });
}

Result<std::vector<ChangedKey>> PgReadSide::changed_keys(const std::vector<int64_t>& feed_ids, int64_t after_seq,
                                                      int64_t up_to_seq, size_t limit) {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("read change log", [&]() -> Result<std::vector<ChangedKey>> {
    const std::string ids = bigint_array(feed_ids);
    pqxx::read_transaction tx(m_db.conn);
    auto r = tx.exec_params("SELECT seq, feed_id, uri FROM change_log WHERE feed_id = ANY($1::bigint[]) AND seq > $2 "
                            "AND seq <= $3 ORDER BY seq LIMIT $4",
                            ids, static_cast<long long>(after_seq), static_cast<long long>(up_to_seq),
                            static_cast<long long>(limit));
    std::vector<ChangedKey> out;
    out.reserve(r.size());
    for (const auto& row : r) {
      out.push_back(ChangedKey{row[0].as<int64_t>(), row[1].as<int64_t>(), row[2].as<std::string>()});
    }
    return out;
  });
}

Result<std::vector<LoggedChange>> PgReadSide::changes(const std::vector<int64_t>& feed_ids, int64_t after_seq,
                                                   size_t limit) {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("read change log", [&]() -> Result<std::vector<LoggedChange>> {
    const std::string ids = bigint_array(feed_ids);
    pqxx::read_transaction tx(m_db.conn);
    auto r = tx.exec_params("SELECT seq, change, " + us("recorded_at") + ", " + us("upstream_datetime") + ", uri, " +
                                us("lastmod") +
                                ", length, md5, sha1, sha256, type, encoding, links::text, blob_sha256, feed_id "
                                "FROM change_log WHERE feed_id = ANY($1::bigint[]) AND seq > $2 ORDER BY seq LIMIT $3",
                            ids, static_cast<long long>(after_seq), static_cast<long long>(limit));
    std::vector<LoggedChange> out;
    out.reserve(r.size());
    for (const auto& row : r) {
      LoggedChange c;
      c.seq = row[0].as<int64_t>();
      c.feed_id = row[14].as<int64_t>();
      c.change = *rs::change_from_string(row[1].as<std::string>());
      c.recorded_at = *read_opt_time(row[2]);
      c.upstream_datetime = read_opt_time(row[3]);
      ResourceRecord rec;
      rec.uri = row[4].as<std::string>();
      rec.state = c.change == rs::Change::deleted ? ResourceState::deleted : ResourceState::live;
      rec.lastmod = read_opt_time(row[5]);
      rec.change_datetime = c.upstream_datetime;
      rec.length = read_length(row[6]);
      const std::pair<int, const char*> digests[] = {{7, "md5"}, {8, "sha-1"}, {9, "sha-256"}};
      for (const auto& [col, alg] : digests) {
        if (!row[col].is_null()) {
          rec.hashes.push_back({alg, row[col].as<std::string>()});
        }
      }
      rec.type = read_str(row[10]);
      rec.encoding = read_str(row[11]);
      rec.links = links_from_json(row[12].as<std::string>());
      rec.blob_sha256 = read_str(row[13]);
      c.resource = std::move(rec);
      out.push_back(std::move(c));
    }
    return out;
  });
}

Result<std::vector<SourceStats>> PgReadSide::source_stats() {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("read source statistics", [&]() -> Result<std::vector<SourceStats>> {
    pqxx::read_transaction tx(m_db.conn);
    std::vector<SourceStats> out;
    std::map<int64_t, size_t> index;
    for (const auto& row : tx.exec("SELECT id, name, url, kind, clock_ahead_seconds, " + us("created_at") +
                                   " FROM source ORDER BY name")) {
      SourceStats st;
      st.source_id = row[0].as<int64_t>();
      st.name = row[1].as<std::string>();
      st.url = row[2].as<std::string>();
      st.kind = row[3].is_null() ? std::string() : row[3].as<std::string>();
      if (!row[4].is_null()) {
        st.clock_ahead_seconds = row[4].as<double>();
      }
      st.created_at = read_opt_time(row[5]).value_or(Timestamp{});
      index[st.source_id] = out.size();
      out.push_back(std::move(st));
    }
    // Counts kept by triggers as resources change (schema 0003): a few rows,
    // not a scan of every resource.
    for (const auto& row : tx.exec("SELECT f.source_id, sum(s.live), sum(s.deleted), sum(s.bytes) "
                                   "FROM feed_stats s JOIN feed f ON f.id = s.feed_id GROUP BY f.source_id")) {
      if (auto it = index.find(row[0].as<int64_t>()); it != index.end()) {
        out[it->second].live = row[1].as<unsigned long long>();
        out[it->second].deleted = row[2].as<unsigned long long>();
        out[it->second].bytes = row[3].as<unsigned long long>();
      }
    }
    for (const auto& row : tx.exec("SELECT f.source_id, count(*), " + us("min(r.first_failed_at)") +
                                   " FROM retry r JOIN feed f ON f.id = r.feed_id GROUP BY f.source_id")) {
      if (auto it = index.find(row[0].as<int64_t>()); it != index.end()) {
        out[it->second].retrying = row[1].as<unsigned long long>();
        out[it->second].retrying_since = read_opt_time(row[2]);
      }
    }
    for (const auto& row : tx.exec("SELECT f.source_id, " + us("max(greatest(w.last_time, w.baseline_at))") + ", " + us("max(w.baseline_at)") +
                                   " FROM watermark w JOIN feed f ON f.id = w.feed_id GROUP BY f.source_id")) {
      if (auto it = index.find(row[0].as<int64_t>()); it != index.end()) {
        out[it->second].newest_change = read_opt_time(row[1]);
        out[it->second].baseline_at = read_opt_time(row[2]);
      }
    }
    for (const auto& row : tx.exec("SELECT " + k_hold_columns +
                                   ", source_id FROM feed WHERE deletion_hold_unseen IS NOT NULL ORDER BY id")) {
      if (auto it = index.find(row[7].as<int64_t>()); it != index.end()) {
        out[it->second].deletion_holds.push_back(read_hold(row));
      }
    }
    // The newest run per source and status class: three index probes per
    // source (sync_run_source_status, sync_run_source), never a sort of the
    // whole history.
    for (const auto& row : tx.exec(
             "SELECT " + k_run_columns + ", kind FROM (SELECT r.*, x.kind FROM source s CROSS JOIN LATERAL ("
             "  (SELECT 's' AS kind, id AS run_id FROM sync_run WHERE source_id = s.id AND status = 'succeeded' "
             "   ORDER BY id DESC LIMIT 1) UNION ALL "
             "  (SELECT 'f', id FROM sync_run WHERE source_id = s.id AND status = 'failed' ORDER BY id DESC LIMIT 1) "
             "  UNION ALL (SELECT 'l', id FROM sync_run WHERE source_id = s.id ORDER BY id DESC LIMIT 1)) x "
             "  JOIN sync_run r ON r.id = x.run_id) q")) {
      RunInfo run = read_run(row);
      const std::string kind = row[15].as<std::string>();
      auto it = index.find(run.source_id);
      if (it == index.end()) {
        continue;
      }
      SourceStats& st = out[it->second];
      (kind == "s" ? st.last_success : kind == "f" ? st.last_failure : st.last_run) = std::move(run);
    }
    // Failing since: the first failed run after the last run that stored
    // anything (succeeded or partial), if any (sync_run_source_status: an
    // index probe per source).
    for (const auto& row : tx.exec(
             "SELECT s.id, " + us("f.first") + " FROM source s CROSS JOIN LATERAL ("
             "  SELECT min(r.started_at) AS first FROM sync_run r WHERE r.source_id = s.id AND r.status = 'failed' "
             "  AND r.id > coalesce((SELECT max(id) FROM sync_run WHERE source_id = s.id "
             "                       AND status IN ('succeeded', 'partial')), 0)) f "
             "WHERE f.first IS NOT NULL")) {
      if (auto it = index.find(row[0].as<int64_t>()); it != index.end()) {
        out[it->second].failing_since = read_opt_time(row[1]);
      }
    }
    return out;
  });
}


Result<int> PgReadSide::schema_version() {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("schema version", [&]() -> Result<int> {
    pqxx::read_transaction tx(m_db.conn);
    return read_schema_version(tx);
  });
}

Result<int64_t> PgReadSide::last_seq() {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("read last seq", [&]() -> Result<int64_t> {
    pqxx::read_transaction tx(m_db.conn);
    return tx.exec1("SELECT coalesce(max(seq), 0) FROM change_log")[0].as<int64_t>();
  });
}

Result<std::shared_ptr<PgReaderPool>> PgReaderPool::open(const std::string& conninfo, size_t connections) {
  auto pool = std::make_shared<PgReaderPool>();
  for (size_t i = 0; i < std::max<size_t>(1, connections); ++i) {
    auto store = PgStore::open(conninfo);
    if (!store) {
      return tl::unexpected(store.error());
    }
    pool->m_stores.push_back(std::move(*store));
  }
  return pool;
}

PgStore& PgReaderPool::next() { return *m_stores[m_next.fetch_add(1, std::memory_order_relaxed) % m_stores.size()]; }

Result<std::vector<FeedInfo>> PgReaderPool::feeds() { return next().feeds(); }

Result<std::vector<std::string>> PgReaderPool::removed_sources() { return next().removed_sources(); }

Result<std::vector<ResourceRecord>> PgReaderPool::live_resources(int64_t feed_id, const std::string& after_uri,
                                                                 size_t limit) {
  return next().live_resources(feed_id, after_uri, limit);
}

Result<std::optional<ResourceRecord>> PgReaderPool::resource(int64_t feed_id, const std::string& uri) {
  return next().resource(feed_id, uri);
}

Result<std::vector<LoggedChange>> PgReaderPool::changes(const std::vector<int64_t>& feed_ids, int64_t after_seq,
                                                        size_t limit) {
  return next().changes(feed_ids, after_seq, limit);
}

Result<std::vector<ChangedKey>> PgReaderPool::changed_keys(const std::vector<int64_t>& feed_ids, int64_t after_seq,
                                                           int64_t up_to_seq, size_t limit) {
  return next().changed_keys(feed_ids, after_seq, up_to_seq, limit);
}

Result<int64_t> PgReaderPool::last_seq() { return next().last_seq(); }

Result<std::vector<SourceStats>> PgReaderPool::source_stats() { return next().source_stats(); }

Result<std::vector<RunInfo>> PgReaderPool::recent_runs(const std::string& name, size_t limit) {
  return next().recent_runs(name, limit);
}

Result<std::vector<Compaction>> PgReaderPool::compactions() { return next().compactions(); }

Result<std::vector<int64_t>> PgReaderPool::changed_feeds(int64_t after_seq, int64_t up_to_seq) {
  return next().changed_feeds(after_seq, up_to_seq);
}

Result<Timestamp> PgReaderPool::datestamp_horizon() { return next().datestamp_horizon(); }

Result<std::vector<DatedResource>> PgReaderPool::dated_resources(const DatedQuery& q) {
  return next().dated_resources(q);
}

Result<std::optional<DatedResource>> PgReaderPool::dated_resource(int64_t feed_id, const std::string& uri) {
  return next().dated_resource(feed_id, uri);
}

Result<std::optional<Timestamp>> PgReaderPool::earliest_datestamp() { return next().earliest_datestamp(); }

Result<std::vector<std::string>> PgReaderPool::link_targets(const std::vector<int64_t>& feed_ids,
                                                            const std::string& rel, size_t limit) {
  return next().link_targets(feed_ids, rel, limit);
}

} // namespace tributary::store

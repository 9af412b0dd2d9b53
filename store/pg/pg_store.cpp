// PgStore: opening, and the rows a run writes: sources, feeds, watermarks,
// resources (apply), deletions and their holds, and the retry queue.
#include "store/pg/pg_store_internal.h"

#include "store/pg/pg_blob_refs.h"
#include "store/pg/pg_change_log.h"
#include "store/pg/pg_harvest.h"
#include "store/pg/pg_history.h"
#include "store/pg/pg_planner_stats.h"
#include "store/pg/pg_reader.h"
#include "store/pg/pg_runs.h"
#include "store/pg/pg_shared_dumps.h"

#include "common/log.h"

#include <string_view>
#include <unordered_set>

namespace tributary::store {

using namespace pg_detail;

struct PgStore::Parts {
  explicit Parts(PgStoreConnection& db)
      : runs(db), read(db), harvest(db), change_log(db), history(db), dumps(db), blob_refs(db), planner(db) {}
  PgRuns runs;
  PgReadSide read;
  PgHarvest harvest;
  PgChangeLog change_log;
  PgHistory history;
  PgSharedDumps dumps;
  PgBlobRefs blob_refs;
  PlannerStats planner; // under the connection's mutex
};

PgStore::PgStore(std::unique_ptr<PgStoreConnection> db)
    : m_db(std::move(db)), m_parts(std::make_unique<Parts>(*m_db)) {}

PgStore::~PgStore() = default;

Result<std::unique_ptr<PgStore>> PgStore::open(const std::string& conninfo) {
  // The session (leases) connects while the schema is checked: a store is
  // opened to run sources, or briefly.
  auto session = PgSession::of(conninfo);
  session->connect_soon();
  if (auto ok = check_schema(conninfo); !ok) {
    return tl::unexpected(ok.error());
  }
  return guarded("open store", [&]() -> Result<std::unique_ptr<PgStore>> {
    return std::unique_ptr<PgStore>(new PgStore(std::make_unique<PgStoreConnection>(conninfo)));
  });
}

Result<int64_t> PgStore::ensure_source(const std::string& name, const std::string& url) {
  std::lock_guard lock(m_db->mutex);
  return m_db->conn.run("ensure source", [&]() -> Result<int64_t> {
    pqxx::work tx(m_db->conn);
    auto r = tx.exec_params("INSERT INTO source (name, url) VALUES ($1, $2) "
                            "ON CONFLICT (name) DO UPDATE SET url = EXCLUDED.url RETURNING id",
                            name, url);
    tx.commit();
    return r[0][0].as<int64_t>();
  });
}

Result<void> PgStore::set_source_kind(int64_t source_id, const std::string& kind) {
  std::lock_guard lock(m_db->mutex);
  return m_db->conn.run("record the source's kind", [&]() -> Result<void> {
    pqxx::work tx(m_db->conn);
    tx.exec_params("UPDATE source SET kind = $2 WHERE id = $1 AND kind IS DISTINCT FROM $2", source_id, kind);
    tx.commit();
    return {};
  });
}

Result<void> PgStore::set_source_clock(int64_t source_id, std::optional<double> ahead_seconds) {
  std::lock_guard lock(m_db->mutex);
  return m_db->conn.run("record the source's clock", [&]() -> Result<void> {
    pqxx::work tx(m_db->conn);
    const std::optional<std::string> ahead =
        ahead_seconds ? std::optional<std::string>(std::to_string(*ahead_seconds)) : std::nullopt;
    tx.exec_params("UPDATE source SET clock_ahead_seconds = $2 WHERE id = $1", source_id, ahead);
    tx.commit();
    return {};
  });
}

Result<int64_t> PgStore::ensure_feed(int64_t source_id, const std::string& capability_list_url) {
  std::lock_guard lock(m_db->mutex);
  return m_db->conn.run("ensure feed", [&]() -> Result<int64_t> {
    pqxx::work tx(m_db->conn);
    auto r = tx.exec_params("INSERT INTO feed (source_id, capability_list_url) VALUES ($1, $2) "
                            "ON CONFLICT (source_id, capability_list_url) DO UPDATE SET source_id = EXCLUDED.source_id "
                            "RETURNING id",
                            source_id, capability_list_url);
    tx.commit();
    return r[0][0].as<int64_t>();
  });
}

Result<Watermark> PgStore::watermark(int64_t feed_id) {
  std::lock_guard lock(m_db->mutex);
  return m_db->conn.run("read watermark", [&]() -> Result<Watermark> {
    pqxx::read_transaction tx(m_db->conn);
    auto r = tx.exec_params("SELECT " + us("baseline_at") + ", change_list_url, " + us("last_time") +
                                ", last_uri, last_position, resume FROM watermark WHERE feed_id = $1",
                            feed_id);
    Watermark w;
    if (r.empty()) {
      return w;
    }
    w.baseline_at = read_opt_time(r[0][0]);
    w.change_list_url = read_str(r[0][1]);
    w.last_time = read_opt_time(r[0][2]);
    w.last_uri = r[0][3].is_null() ? "" : r[0][3].as<std::string>();
    w.last_position = r[0][4].is_null() ? -1 : r[0][4].as<int64_t>();
    w.resume = r[0][5].is_null() ? "" : r[0][5].as<std::string>();
    return w;
  });
}

Result<std::unordered_map<std::string, ResourceRecord>> PgStore::resources(int64_t feed_id,
                                                                          const std::vector<std::string>& uris) {
  std::lock_guard lock(m_db->mutex);
  return m_db->conn.run("read resources", [&]() -> Result<std::unordered_map<std::string, ResourceRecord>> {
    std::unordered_map<std::string, ResourceRecord> out;
    if (uris.empty()) {
      return out;
    }
    pqxx::read_transaction tx(m_db->conn);
    auto r = tx.exec_params(resource_select() + "WHERE feed_id = $1 AND uri = ANY($2::text[])", feed_id,
                            text_array(uris));
    for (const auto& row : r) {
      ResourceRecord rec = read_resource(row);
      std::string key = rec.uri;
      out.emplace(std::move(key), std::move(rec));
    }
    return out;
  });
}

Result<bool> PgStore::holds_any(int64_t feed_id) {
  std::lock_guard lock(m_db->mutex);
  return m_db->conn.run("read resources", [&]() -> Result<bool> {
    pqxx::read_transaction tx(m_db->conn);
    return tx.exec_params1("SELECT EXISTS (SELECT 1 FROM resource WHERE feed_id = $1) OR "
                           "EXISTS (SELECT 1 FROM change_log WHERE feed_id = $1)",
                           feed_id)[0]
        .as<bool>();
  });
}

Result<void> PgStore::for_each_resource(int64_t feed_id, const std::function<void(const ResourceRecord&)>& fn) {
  std::lock_guard lock(m_db->mutex);
  return m_db->conn.run("list resources", [&]() -> Result<void> {
    // Keyset pagination keeps memory flat for feeds of millions; the order
    // is the database's collation, which the primary key index serves.
    std::optional<std::string> after;
    for (;;) {
      pqxx::read_transaction tx(m_db->conn);
      pqxx::result r = after ? tx.exec_params(resource_select() +
                                                  "WHERE feed_id = $1 AND uri > $2 ORDER BY uri LIMIT 10000",
                                              feed_id, *after)
                             : tx.exec_params(resource_select() + "WHERE feed_id = $1 ORDER BY uri LIMIT 10000",
                                              feed_id);
      tx.commit();
      for (const auto& row : r) {
        fn(read_resource(row));
      }
      if (r.size() < 10000) {
        return {};
      }
      after = r[r.size() - 1][0].as<std::string>();
    }
  });
}

namespace {

// Writes a batch's upserts, none of which the feed holds (Batch::upserts_new:
// a first baseline), straight into resource with one COPY: no staging
// table, no conflict check, each row's seen mark written with it. Under a
// savepoint: false, and nothing written, when a row exists after all (a
// writer the engine did not see), and the batch then goes the ordinary way.
// Half the database's time for a first baseline's batch went to staging
// and INSERT ... ON CONFLICT (bench/RESULTS.md, session 25).
bool copy_new_resources(pqxx::work& tx, const Batch& b, bool mark_seen) {
  std::unordered_set<std::string_view> upserted;
  for (const auto& r : b.upserts) {
    upserted.insert(r.uri);
  }
  std::unordered_set<std::string_view> seen;
  if (mark_seen) {
    for (const auto& u : b.seen) {
      if (!upserted.count(u)) {
        return false; // listed and not written here: its mark needs the ordinary way
      }
      seen.insert(u);
    }
  }
  try {
    pqxx::subtransaction sub(tx, "copy_new_resources");
    {
      CopyRows s(sub, "resource",
                 std::vector<std::string>{"feed_id", "uri", "state", "lastmod", "change_datetime", "length", "md5",
                                          "sha1", "sha256", "type", "encoding", "links", "blob_sha256",
                                          "fetched_at", "fetched_from", "last_seen_run"});
      const auto feed = static_cast<long long>(b.feed_id);
      for (const auto& r : b.upserts) {
        CopyText& t = s.row();
        t.field(feed);
        put_resource(t, r);
        if (seen.count(r.uri)) {
          t.field(static_cast<long long>(b.run_id));
        } else {
          t.null();
        }
        s.end_row();
      }
      s.complete();
    }
    sub.commit();
    return true;
  } catch (const pqxx::unique_violation&) {
    return false;
  }
}

Result<RunCounters> finish_apply(pqxx::work& tx, const Batch& b, std::unordered_map<std::string, LogHead>& heads);

} // namespace

Result<RunCounters> PgStore::apply(const Batch& b) {
  std::lock_guard lock(m_db->mutex);
  auto applied = apply_locked(b);
  if (applied) {
    m_parts->planner.wrote(std::max(b.upserts.size(), b.changes.size()));
  }
  return applied;
}

Result<RunCounters> PgStore::apply_locked(const Batch& b) {
  return m_db->conn.run("apply batch", [&]() -> Result<RunCounters> {
    pqxx::work tx(m_db->conn);
    // The feed must exist until this commits: one row lock a batch where a
    // foreign key checked every row written (schema 0023).
    auto feed = tx.exec_params("SELECT EXISTS (SELECT 1 FROM retry WHERE feed_id = $1) FROM feed WHERE id = $1 "
                               "FOR KEY SHARE",
                               b.feed_id);
    if (feed.empty()) {
      return make_error(ErrorKind::conflict, "feed " + std::to_string(b.feed_id) + " no longer exists");
    }
    const bool feed_has_retries = feed[0][0].as<bool>();
    // What the log says of the batch's URIs, before their rows are written.
    auto heads = b.logs_new ? std::unordered_map<std::string, LogHead>() : read_heads(tx, b.feed_id, uris_of(b.changes));
    const bool mark_seen = !b.seen.empty() && b.run_id != 0;
    if (b.upserts_new && !b.upserts.empty() && b.retries.empty() && !feed_has_retries &&
        copy_new_resources(tx, b, mark_seen)) {
      // Written with their seen marks; no retry to clear or mark.
      return finish_apply(tx, b, heads);
    }
    ensure_stage_tables(tx);
    // Seen marks first: rows upserted below take theirs in the same write
    // (one write per row instead of an insert and then an update).
    if (mark_seen) {
      CopyRows s(tx, "stage_seen", std::vector<std::string>{"uri"});
      for (const auto& u : b.seen) {
        s.row().field(u);
        s.end_row();
      }
      s.complete();
    }
    if (!b.upserts.empty()) {
      CopyRows s(tx, "stage_resource",
                 std::vector<std::string>{"uri", "state", "lastmod", "change_datetime", "length", "md5", "sha1",
                                          "sha256", "type", "encoding", "links", "blob_sha256", "fetched_at",
                                          "fetched_from"});
      for (const auto& r : b.upserts) {
        put_resource(s.row(), r);
        s.end_row();
      }
      s.complete();
      std::string staged = "SELECT $1, ";
      for (const char* c = k_resource_columns_sql;; ) {
        const char* comma = std::strchr(c, ',');
        std::string col(c, comma ? static_cast<size_t>(comma - c) : std::strlen(c));
        while (!col.empty() && col.front() == ' ') {
          col.erase(0, 1);
        }
        staged += "st." + col + ", ";
        if (!comma) {
          break;
        }
        c = comma + 1;
      }
      staged += mark_seen ? "CASE WHEN ss.uri IS NOT NULL THEN $2::bigint END, now() FROM stage_resource st "
                            "LEFT JOIN (SELECT DISTINCT uri FROM stage_seen) ss ON ss.uri = st.uri "
                          : "NULL::bigint, now() FROM stage_resource st ";
      const std::string sql =
          std::string("INSERT INTO resource (feed_id, ") + k_resource_columns_sql + ", last_seen_run, updated_at) " +
          staged +
          "ON CONFLICT (feed_id, uri) DO UPDATE SET state = EXCLUDED.state, lastmod = EXCLUDED.lastmod, "
          "change_datetime = EXCLUDED.change_datetime, length = EXCLUDED.length, md5 = EXCLUDED.md5, "
          "sha1 = EXCLUDED.sha1, sha256 = EXCLUDED.sha256, type = EXCLUDED.type, "
          "encoding = EXCLUDED.encoding, links = EXCLUDED.links, blob_sha256 = EXCLUDED.blob_sha256, "
          "fetched_at = EXCLUDED.fetched_at, fetched_from = EXCLUDED.fetched_from, updated_at = now(), "
          "last_seen_run = coalesce(EXCLUDED.last_seen_run, resource.last_seen_run)";
      if (mark_seen) {
        tx.exec_params(sql, b.feed_id, b.run_id);
      } else {
        tx.exec_params(sql, b.feed_id);
      }
    }
    if (!b.upserts.empty()) {
      // A stored resource needs no retry.
      tx.exec_params("DELETE FROM retry r USING stage_resource st WHERE r.feed_id = $1 AND r.uri = st.uri", b.feed_id);
    }
    for (const auto& r : b.retries) {
      // (Its seen mark, if this batch lists it, follows.)
      tx.exec_params("INSERT INTO retry (feed_id, uri, entry, change, change_datetime, reason, attempts, "
                     "next_attempt_at) VALUES ($1, $2, $3::jsonb, $4, $5, $6, $7, $8) "
                     "ON CONFLICT (feed_id, uri) DO UPDATE SET entry = EXCLUDED.entry, change = EXCLUDED.change, "
                     "change_datetime = EXCLUDED.change_datetime, reason = EXCLUDED.reason, "
                     "attempts = EXCLUDED.attempts, next_attempt_at = EXCLUDED.next_attempt_at",
                     b.feed_id, r.uri, entry_to_json(r.entry),
                     r.change ? std::optional<std::string>(std::string(rs::to_string(*r.change))) : std::nullopt,
                     ts(r.change_datetime), r.reason, r.attempts, *ts(r.next_attempt_at));
    }
    if (mark_seen) {
      tx.exec_params("UPDATE retry r SET last_seen_run = $2 FROM stage_seen s WHERE r.feed_id = $1 AND r.uri = s.uri",
                     b.feed_id, b.run_id);
    }
    if (mark_seen && b.seen.size() > b.upserts.size()) {
      // Seen but not upserted (unchanged): mark them now.
      tx.exec_params("UPDATE resource r SET last_seen_run = $2 FROM stage_seen s "
                     "WHERE r.feed_id = $1 AND r.uri = s.uri AND r.last_seen_run IS DISTINCT FROM $2",
                     b.feed_id, b.run_id);
    }
    return finish_apply(tx, b, heads);
  });
}

namespace {

// The rest of a batch, after its resources, retries and seen marks:
// watermark, the change log (what the rule admits of the batch's changes,
// against `heads`), the run's counters (its changes as logged); then
// commits.
Result<RunCounters> finish_apply(pqxx::work& tx, const Batch& b, std::unordered_map<std::string, LogHead>& heads) {
  if (b.watermark) {
    upsert_watermark(tx, b.feed_id, *b.watermark);
  }
  RunCounters c = b.counters;
  const RunCounters logged = log_changes(tx, b.feed_id, heads, b.changes, b.upserts);
  c.created = logged.created;
  c.updated = logged.updated;
  c.deleted = logged.deleted;
  if (b.run_id != 0) {
    tx.exec_params("UPDATE sync_run SET created = created + $2, updated = updated + $3, deleted = deleted + $4, "
                   "unchanged = unchanged + $5, failed = failed + $6, bytes = bytes + $7 WHERE id = $1",
                   b.run_id, static_cast<long long>(c.created), static_cast<long long>(c.updated),
                   static_cast<long long>(c.deleted), static_cast<long long>(c.unchanged),
                   static_cast<long long>(c.failed), static_cast<long long>(c.bytes));
  }
  tx.commit();
  return c;
}

} // namespace


Result<DeletionOutcome> PgStore::delete_unseen(int64_t feed_id, int64_t run_id, const std::optional<Watermark>& w,
                                               double max_share, bool all_seen, const DeferLog& defer) {
  std::lock_guard lock(m_db->mutex);
  return m_db->conn.run("delete unseen resources", [&]() -> Result<DeletionOutcome> {
    pqxx::work tx(m_db->conn);
    DeletionOutcome out;
    // When they were deleted upstream: by the time of the list that no
    // longer named them (what a change read again in the overlap before it
    // is ordered against), else now.
    const std::string deleted_at = w && w->baseline_at ? *ts(w->baseline_at) : rs::format_w3c_datetime(
        std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now()));
    // The feed's row, locked: a confirmation arriving now waits for this.
    const bool confirmed =
        tx.exec_params1("SELECT deletions_confirmed FROM feed WHERE id = $1 FOR UPDATE", feed_id)[0].as<bool>();
    if (!all_seen) {
      // (One changed after the list was made is not unseen: the list is
      // older than it.)
      auto counts = tx.exec_params1("SELECT count(*) FILTER (WHERE last_seen_run IS DISTINCT FROM $2 AND "
                                    "(change_datetime IS NULL OR change_datetime <= $3::timestamptz)), count(*) "
                                    "FROM resource WHERE feed_id = $1 AND state = 'live'",
                                    feed_id, run_id, deleted_at);
      out.unseen = counts[0].as<unsigned long long>();
      out.live = counts[1].as<unsigned long long>();
    }
    if (w) {
      upsert_watermark(tx, feed_id, *w);
    }
    if (!confirmed && max_share < 1.0 && static_cast<double>(out.unseen) > max_share * static_cast<double>(out.live)) {
      out.held = true;
      tx.exec_params("UPDATE feed SET deletion_hold_unseen = $2, deletion_hold_live = $3, "
                     "deletion_hold_since = coalesce(deletion_hold_since, now()), deletion_hold_run = $4 "
                     "WHERE id = $1",
                     feed_id, static_cast<long long>(out.unseen), static_cast<long long>(out.live), run_id);
      tx.commit();
      return out;
    }
    tx.exec_params("UPDATE feed SET deletion_hold_unseen = NULL, deletion_hold_live = NULL, "
                   "deletion_hold_since = NULL, deletion_hold_run = NULL, deletions_confirmed = false "
                   "WHERE id = $1",
                   feed_id);
    if (out.unseen > 0) {
      // (Counted under the feed's lock, which every writer of its resources
      // holds: none appeared since. With none unseen, this second pass over
      // the feed cost a clean baseline of 10,000 about 4 ms.)
      ensure_stage_tables(tx);
      auto r = tx.exec_params(
          "WITH d AS (UPDATE resource SET state = 'deleted', updated_at = now(), change_datetime = $3::timestamptz "
          "  WHERE feed_id = $1 AND state = 'live' AND last_seen_run IS DISTINCT FROM $2 "
          "  AND (change_datetime IS NULL OR change_datetime <= $3::timestamptz) "
          "  RETURNING uri, lastmod, length, md5, sha1, sha256, type, encoding, links) "
          "INSERT INTO stage_deleted SELECT * FROM d",
          feed_id, run_id, deleted_at);
      out.deleted = static_cast<uint64_t>(r.affected_rows());
    }
    // The listing no longer names them: nothing left to retry.
    tx.exec_params("DELETE FROM retry WHERE feed_id = $1 AND last_seen_run IS DISTINCT FROM $2", feed_id, run_id);
    if (out.deleted > 0) {
      out.logged = log_deletions(tx, feed_id, rs::parse_w3c_datetime(deleted_at), defer);
      tx.exec_params("UPDATE sync_run SET deleted = deleted + $2 WHERE id = $1", run_id,
                     static_cast<long long>(out.logged));
    }
    tx.commit();
    return out;
  });
}


Result<std::vector<DeletionHold>> PgStore::confirm_deletions(int64_t source_id) {
  std::lock_guard lock(m_db->mutex);
  return m_db->conn.run("confirm deletions", [&]() -> Result<std::vector<DeletionHold>> {
    pqxx::work tx(m_db->conn);
    std::vector<DeletionHold> out;
    for (const auto& row : tx.exec_params("UPDATE feed SET deletions_confirmed = true WHERE source_id = $1 AND "
                                          "deletion_hold_unseen IS NOT NULL RETURNING " + k_hold_columns,
                                          source_id)) {
      out.push_back(read_hold(row));
    }
    tx.commit();
    return out;
  });
}

namespace {

// The columns read_retry() reads, in its order.
std::string retry_columns() {
  return "uri, entry::text, change, " + us("change_datetime") + ", reason, attempts, " + us("next_attempt_at");
}

RetryRecord read_retry(const pqxx::row& row) {
  RetryRecord r;
  r.uri = row[0].as<std::string>();
  r.entry = entry_from_json(row[1].as<std::string>(), r.uri);
  if (!row[2].is_null()) {
    r.change = rs::change_from_string(row[2].as<std::string>());
  }
  r.change_datetime = read_opt_time(row[3]);
  r.reason = row[4].as<std::string>();
  r.attempts = row[5].as<int>();
  r.next_attempt_at = *read_opt_time(row[6]);
  return r;
}

} // namespace

Result<std::unordered_map<std::string, RetryRecord>> PgStore::pending_changes(int64_t feed_id,
                                                                             const std::vector<std::string>& uris) {
  std::lock_guard lock(m_db->mutex);
  return m_db->conn.run("read pending changes", [&]() -> Result<std::unordered_map<std::string, RetryRecord>> {
    std::unordered_map<std::string, RetryRecord> out;
    if (uris.empty()) {
      return out;
    }
    pqxx::read_transaction tx(m_db->conn);
    for (const auto& row : tx.exec_params("SELECT " + retry_columns() +
                                              " FROM retry WHERE feed_id = $1 AND uri = ANY($2::text[]) "
                                              "AND change IS NOT NULL",
                                          feed_id, text_array(uris))) {
      RetryRecord r = read_retry(row);
      std::string key = r.uri;
      out.emplace(std::move(key), std::move(r));
    }
    return out;
  });
}

Result<std::vector<RetryRecord>> PgStore::due_retries(int64_t feed_id, Timestamp now, size_t limit) {
  std::lock_guard lock(m_db->mutex);
  return m_db->conn.run("read due retries", [&]() -> Result<std::vector<RetryRecord>> {
    pqxx::read_transaction tx(m_db->conn);
    std::vector<RetryRecord> out;
    for (const auto& row : tx.exec_params("SELECT " + retry_columns() +
                                              " FROM retry WHERE feed_id = $1 AND next_attempt_at <= $2 "
                                              "ORDER BY next_attempt_at, uri LIMIT $3",
                                          feed_id, *ts(now), static_cast<long long>(limit))) {
      out.push_back(read_retry(row));
    }
    return out;
  });
}

Result<std::unique_ptr<Store>> PgStore::open_session() {
  // A store object of its own (its calls do not queue behind the daemon's
  // on one mutex), on the same pool: it holds no connection between calls.
  return guarded("open session", [&]() -> Result<std::unique_ptr<Store>> {
    auto impl = std::make_unique<PgStoreConnection>(m_db->conninfo);
    // A run's transactions go on only while the session connection, on
    // which its source lease is held, is the one it was when the run began
    // (and are tried again on a new connection only when it still
    // answers): a run must fail rather than carry on unleased.
    auto session = impl->session;
    const uint64_t generation = session->generation();
    impl->conn.fence([session, generation] { return session->generation() == generation; },
                     [session, generation] { return session->confirm(generation); });
    return std::unique_ptr<Store>(new PgStore(std::move(impl)));
  });
}

// ---- the parts ---------------------------------------------------------------

const char* PgStore::referenced_blobs_sql() { return PgBlobRefs::referenced_blobs_sql(); }

Result<void> PgStore::for_each_history(int64_t feed_id, const std::function<void(const UriHistory&)>& fn) {
  return m_parts->history.for_each_history(feed_id, fn);
}

Result<LockAttempt> PgStore::try_lock_source(int64_t source_id, const std::string& who) {
  return m_parts->runs.try_lock_source(source_id, who);
}

Result<int64_t> PgStore::begin_run(int64_t source_id, RunMode mode, RunTrigger trigger) {
  return m_parts->runs.begin_run(source_id, mode, trigger);
}

Result<void> PgStore::record_error(int64_t run_id, const std::string& url, const std::string& reason) {
  return m_parts->runs.record_error(run_id, url, reason);
}

Result<void> PgStore::finish_run(int64_t run_id, RunStatus status, const std::string& message, RunMode mode) {
  return m_parts->runs.finish_run(run_id, status, message, mode);
}

Result<int64_t> PgStore::record_failed_run(int64_t source_id, RunMode mode, Timestamp started, const std::string& message, RunTrigger trigger) {
  return m_parts->runs.record_failed_run(source_id, mode, started, message, trigger);
}

Result<RunInfo> PgStore::run(int64_t run_id) {
  return m_parts->runs.run(run_id);
}

Result<std::vector<FeedInfo>> PgStore::feeds() {
  return m_parts->read.feeds();
}

Result<std::vector<std::string>> PgStore::removed_sources() {
  return m_parts->read.removed_sources();
}

Result<std::vector<ResourceRecord>> PgStore::live_resources(int64_t feed_id, const std::string& after_uri, size_t limit) {
  return m_parts->read.live_resources(feed_id, after_uri, limit);
}

Result<std::optional<ResourceRecord>> PgStore::resource(int64_t feed_id, const std::string& uri) {
  return m_parts->read.resource(feed_id, uri);
}

Result<std::vector<LoggedChange>> PgStore::changes(const std::vector<int64_t>& feed_ids, int64_t after_seq, size_t limit) {
  return m_parts->read.changes(feed_ids, after_seq, limit);
}

Result<std::vector<ChangedKey>> PgStore::changed_keys(const std::vector<int64_t>& feed_ids, int64_t after_seq, int64_t up_to_seq, size_t limit) {
  return m_parts->read.changed_keys(feed_ids, after_seq, up_to_seq, limit);
}

Result<int64_t> PgStore::last_seq() {
  return m_parts->read.last_seq();
}

Result<std::vector<SourceStats>> PgStore::source_stats() {
  return m_parts->read.source_stats();
}

Result<std::vector<RunInfo>> PgStore::recent_runs(const std::string& name, size_t limit) {
  return m_parts->runs.recent_runs(name, limit);
}

Result<std::vector<RunInfo>> PgStore::runs_page(const std::string& name, int64_t before, size_t limit, const std::string& status, const std::string& trigger) {
  return m_parts->runs.runs_page(name, before, limit, status, trigger);
}

Result<std::optional<SharedDumps::ResourceDump>> PgStore::resource_dump(const std::string& set) {
  return m_parts->dumps.resource_dump(set);
}

Result<std::vector<std::pair<std::string, SharedDumps::ResourceDump>>> PgStore::resource_dumps() {
  return m_parts->dumps.resource_dumps();
}

Result<bool> PgStore::put_resource_dump(const std::string& set, const ResourceDump& dump, const std::vector<File>& files) {
  return m_parts->dumps.put_resource_dump(set, dump, files);
}

Result<bool> PgStore::claim(const std::string& set) {
  return m_parts->dumps.claim(set);
}

Result<void> PgStore::release(const std::string& set) {
  return m_parts->dumps.release(set);
}

Result<void> PgStore::put_change_package(const std::string& set, const ChangePackage& p) {
  return m_parts->dumps.put_change_package(set, p);
}

Result<std::vector<SharedDumps::ChangePackage>> PgStore::change_packages(const std::string& set) {
  return m_parts->dumps.change_packages(set);
}

Result<void> PgStore::drop_change_packages(const std::string& set, size_t up_to_part) {
  return m_parts->dumps.drop_change_packages(set, up_to_part);
}

Result<std::optional<SharedDumps::File>> PgStore::file(const std::string& url_path) {
  return m_parts->dumps.file(url_path);
}

Result<uint64_t> PgStore::prune_runs(std::chrono::seconds older_than, size_t limit) {
  return m_parts->runs.prune_runs(older_than, limit);
}

Result<void> PgStore::for_each_referenced_blob(const std::function<void(const std::string& sha256)>& fn) {
  return m_parts->blob_refs.for_each_referenced_blob(fn);
}

Result<void> PgStore::for_each_unplaced_blob(const std::function<void(const std::string& sha256)>& fn) {
  return m_parts->blob_refs.for_each_unplaced_blob(fn);
}

Result<void> PgStore::for_each_placed_blob(const std::function<void(const std::string& sha256)>& fn) {
  return m_parts->blob_refs.for_each_placed_blob(fn);
}

Result<Timestamp> PgStore::datestamp_horizon() { return m_parts->harvest.horizon(); }

Result<std::vector<DatedResource>> PgStore::dated_resources(const DatedQuery& q) { return m_parts->harvest.page(q); }

Result<std::optional<DatedResource>> PgStore::dated_resource(int64_t feed_id, const std::string& uri) {
  return m_parts->harvest.one(feed_id, uri);
}

Result<std::optional<Timestamp>> PgStore::earliest_datestamp() { return m_parts->harvest.earliest(); }

Result<std::vector<std::string>> PgStore::link_targets(const std::vector<int64_t>& feed_ids, const std::string& rel,
                                                       size_t limit) {
  return m_parts->harvest.link_targets(feed_ids, rel, limit);
}

Result<std::vector<Compaction>> PgStore::compactions() {
  return m_parts->change_log.compactions();
}

Result<std::vector<int64_t>> PgStore::changed_feeds(int64_t after_seq, int64_t up_to_seq) {
  return m_parts->change_log.changed_feeds(after_seq, up_to_seq);
}

Result<uint64_t> PgStore::compact_change_log(const std::vector<Compaction>& done, const std::map<std::string, std::vector<int64_t>>& published) {
  return m_parts->change_log.compact_change_log(done, published);
}

Result<int> PgStore::schema_version() {
  return m_parts->read.schema_version();
}

} // namespace tributary::store

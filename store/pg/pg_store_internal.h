#pragma once

// What the files of PgStore share (rows, runs and locks, the read side,
// the change log, blob references, shared dumps): row conversions, lock
// keys, and the store's connection state. Not for use outside store/pg/.

#include "store/pg/pg_store.h"

#include "store/pg/copy_rows.h"
#include "store/pg/entry_json.h"
#include "store/pg/migrations.h"
#include "store/pg/pg_conn.h"
#include "store/pg/pg_fields.h"
#include "store/pg/pg_session.h"
#include "store/history_rule.h"


#include <nlohmann/json.hpp>

#include <cstring>
#include <map>
#include <mutex>

namespace tributary::store {

namespace pg_detail {

inline std::optional<std::string> ts(const std::optional<Timestamp>& t) {
  return t ? std::optional<std::string>(rs::format_w3c_datetime(*t)) : std::nullopt;
}

// A length column as the model holds it. Rows written before lengths were
// capped at 2^63 - 1 may hold a negative one: read as unknown, never thrown
// on (a throw here once froze every set's documents).
inline std::optional<uint64_t> read_length(const pqxx::field& f) {
  if (f.is_null()) {
    return std::nullopt;
  }
  const long long n = f.as<long long>();
  return n < 0 ? std::nullopt : std::optional<uint64_t>(static_cast<uint64_t>(n));
}

inline std::optional<std::string> read_str(const pqxx::field& f) {
  return f.is_null() ? std::nullopt : std::optional<std::string>(f.as<std::string>());
}

// The change log is republished in `seq` order and read incrementally
// (parts close at a `seq`; a follower resumes after one), so a row must
// never become visible after a row with a higher `seq`. Two transactions
// could take `seq` values in one order and commit in the other (two
// sources of a named set syncing at once, a daemon beside a CLI run): the
// late row was then never published. Every writer of the log takes this
// transaction lock first and holds it to its commit, so `seq` order is
// commit order, across processes. The lock is taken at the end of a batch,
// just before its log rows, so it is held for the insert and the commit
// only. (A safe horizon, publishing only below the oldest running writer,
// would keep writers concurrent but needs the reader to know of writers it
// cannot see, and a stalled writer would still hold publication back. The
// cost here is one lock hand-off per batch: commits of concurrent sources
// queue for the insert and commit, not for fetching or staging.)
constexpr long long k_change_log_lock = 0x74726962636c6f67LL; // "tribclog"

// The class (first key) of the per-source session advisory locks; the
// second key is the source id.
constexpr int k_source_lock_class = 0x74726962; // "trib"

// `ids` as a PostgreSQL array literal, for `= ANY($n::bigint[])`.
inline std::string bigint_array(const std::vector<int64_t>& ids) {
  std::string out = "{";
  for (size_t i = 0; i < ids.size(); ++i) {
    out += (i ? "," : "") + std::to_string(ids[i]);
  }
  return out + "}";
}

inline void lock_change_log(pqxx::work& tx) {
  tx.exec("SELECT pg_advisory_xact_lock(" + std::to_string(k_change_log_lock) + ")");
  // Serve replicas and other daemons learn of the commit at once (see
  // ChangeListener); PostgreSQL delivers it on commit, once per transaction.
  tx.exec("NOTIFY " + std::string(k_change_channel));
}

inline std::string links_to_json(const std::vector<rs::Link>& links) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& l : links) {
    nlohmann::json j{{"rel", l.rel}, {"href", l.href}};
    if (!l.hash.empty()) {
      j["hash"] = rs::format_hash_list(l.hash);
    }
    if (l.length) {
      j["length"] = *l.length;
    }
    if (l.modified) {
      j["modified"] = rs::format_w3c_datetime(*l.modified);
    }
    if (l.path) {
      j["path"] = *l.path;
    }
    if (l.pri) {
      j["pri"] = *l.pri;
    }
    if (l.type) {
      j["type"] = *l.type;
    }
    if (l.encoding) {
      j["encoding"] = *l.encoding;
    }
    if (!l.extensions.empty()) {
      nlohmann::json ext = nlohmann::json::array();
      for (const auto& x : l.extensions) {
        ext.push_back({x.ns, x.prefix, x.name, x.value});
      }
      j["ext"] = ext;
    }
    a.push_back(std::move(j));
  }
  return a.dump();
}

inline std::vector<rs::Link> links_from_json(const std::string& text) {
  std::vector<rs::Link> out;
  auto a = nlohmann::json::parse(text);
  for (const auto& j : a) {
    rs::Link l;
    l.rel = j.value("rel", "");
    l.href = j.value("href", "");
    if (j.contains("hash")) {
      l.hash = rs::parse_hash_list(j["hash"].get<std::string>()).values;
    }
    if (j.contains("length")) {
      l.length = j["length"].get<uint64_t>();
    }
    if (j.contains("modified")) {
      l.modified = rs::parse_w3c_datetime(j["modified"].get<std::string>());
    }
    if (j.contains("path")) {
      l.path = j["path"].get<std::string>();
    }
    if (j.contains("pri")) {
      l.pri = j["pri"].get<uint32_t>();
    }
    if (j.contains("type")) {
      l.type = j["type"].get<std::string>();
    }
    if (j.contains("encoding")) {
      l.encoding = j["encoding"].get<std::string>();
    }
    if (j.contains("ext")) {
      for (const auto& x : j["ext"]) {
        l.extensions.push_back(rs::ExtensionAttribute{x[0], x[1], x[2], x[3]});
      }
    }
    out.push_back(std::move(l));
  }
  return out;
}

// A PostgreSQL text[] literal.
inline std::string text_array(const std::vector<std::string>& items) {
  std::string out = "{";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) {
      out.push_back(',');
    }
    out.push_back('"');
    for (char c : items[i]) {
      if (c == '"' || c == '\\') {
        out.push_back('\\');
      }
      out.push_back(c);
    }
    out.push_back('"');
  }
  out.push_back('}');
  return out;
}

inline const char* const k_resource_columns_sql =
    "uri, state, lastmod, change_datetime, length, md5, sha1, sha256, type, encoding, links, "
    "blob_sha256, fetched_at, fetched_from";

inline std::string resource_select() {
  return "SELECT uri, state, " + us("lastmod") + ", " + us("change_datetime") +
         ", length, md5, sha1, sha256, type, encoding, links::text, blob_sha256, " + us("fetched_at") +
         ", fetched_from FROM resource ";
}

// The md5, sha-1 and sha-256 columns of a row, from column `first` on, as
// hash values (NULLs left out).
inline std::vector<rs::HashValue> read_hashes(const pqxx::row& r, int first) {
  std::vector<rs::HashValue> out;
  const char* const algorithms[] = {"md5", "sha-1", "sha-256"};
  for (int i = 0; i < 3; ++i) {
    if (!r[first + i].is_null()) {
      out.push_back({algorithms[i], r[first + i].as<std::string>()});
    }
  }
  return out;
}

inline ResourceRecord read_resource(const pqxx::row& r) {
  ResourceRecord rec;
  rec.uri = r[0].as<std::string>();
  rec.state = r[1].as<std::string>() == "live" ? ResourceState::live : ResourceState::deleted;
  rec.lastmod = read_opt_time(r[2]);
  rec.change_datetime = read_opt_time(r[3]);
  rec.length = read_length(r[4]);
  rec.hashes = read_hashes(r, 5);
  rec.type = read_str(r[8]);
  rec.encoding = read_str(r[9]);
  rec.links = links_from_json(r[10].as<std::string>());
  rec.blob_sha256 = read_str(r[11]);
  rec.fetched_at = read_opt_time(r[12]);
  rec.fetched_from = read_str(r[13]);
  return rec;
}

inline void upsert_watermark(pqxx::transaction_base& tx, int64_t feed_id, const Watermark& w) {
  tx.exec_params("INSERT INTO watermark (feed_id, baseline_at, change_list_url, last_time, last_uri, "
                 "last_position, resume, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, now()) "
                 "ON CONFLICT (feed_id) DO UPDATE SET baseline_at = EXCLUDED.baseline_at, "
                 "change_list_url = EXCLUDED.change_list_url, last_time = EXCLUDED.last_time, "
                 "last_uri = EXCLUDED.last_uri, last_position = EXCLUDED.last_position, "
                 "resume = EXCLUDED.resume, updated_at = now()",
                 feed_id, ts(w.baseline_at), w.change_list_url, ts(w.last_time),
                 w.last_uri.empty() ? std::nullopt : std::optional<std::string>(w.last_uri),
                 w.last_position < 0 ? std::nullopt : std::optional<long long>(w.last_position),
                 w.resume.empty() ? std::nullopt : std::optional<std::string>(w.resume));
}

// The change log's rule, PgStore's side (pg_history.cpp; the rule itself
// is store/history_rule.h): the last logged entry of each of `uris` (read
// before the transaction writes their resources), and the one writer of log
// rows, which logs what the rule admits of `proposed` and advances `heads`.
// `stored`: the resources the same transaction writes.
// `held_fallback`: a URI with no entry left (retention compacted them) is
// ordered by its resource row instead, if written before the compaction.
std::unordered_map<std::string, LogHead> read_heads(pqxx::transaction_base& tx, int64_t feed_id,
                                                    const std::vector<std::string>& uris, bool held_fallback = true);
std::vector<std::string> uris_of(const std::vector<ChangeRecord>& changes);
// Returns how many it logged, by kind.
RunCounters log_changes(pqxx::work& tx, int64_t feed_id, std::unordered_map<std::string, LogHead>& heads,
                        const std::vector<ChangeRecord>& proposed, const std::vector<ResourceRecord>& stored);
// Logs the deletions delete_unseen staged (its stage_deleted table), through
// the change log's rule, in slices; `defer` may take any (a log window).
uint64_t log_deletions(pqxx::work& tx, int64_t feed_id, std::optional<Timestamp> at, const DeferLog& defer);

// The columns read_hold() reads, in its order, of `feed`.
inline const std::string k_hold_columns = "id, capability_list_url, deletion_hold_unseen, deletion_hold_live, " +
                                   us("deletion_hold_since") + ", deletion_hold_run, deletions_confirmed";

inline DeletionHold read_hold(const pqxx::row& row) {
  DeletionHold h;
  h.feed_id = row[0].as<int64_t>();
  h.capability_list_url = row[1].as<std::string>();
  h.unseen = row[2].as<unsigned long long>();
  h.live = row[3].as<unsigned long long>();
  h.since = *read_opt_time(row[4]);
  h.run_id = row[5].as<int64_t>();
  h.confirmed = row[6].as<bool>();
  return h;
}

inline const std::string k_run_columns = "id, source_id, mode, status, " + us("started_at") + ", " + us("finished_at") +
                                  ", created, updated, deleted, unchanged, failed, bytes, coalesce(message, ''), "
                                  "coalesce(node, ''), coalesce(trigger, '')";

inline RunInfo read_run(const pqxx::row& row) {
  RunInfo info;
  info.id = row[0].as<int64_t>();
  info.source_id = row[1].as<int64_t>();
  const std::string mode = row[2].as<std::string>();
  info.mode = mode == "baseline" ? RunMode::baseline : mode == "audit" ? RunMode::audit : RunMode::incremental;
  const std::string st = row[3].as<std::string>();
  info.status = st == "running"     ? RunStatus::running
                : st == "succeeded" ? RunStatus::succeeded
                : st == "partial"   ? RunStatus::partial
                : st == "interrupted" ? RunStatus::interrupted
                                    : RunStatus::failed;
  info.started_at = *read_opt_time(row[4]);
  info.finished_at = read_opt_time(row[5]);
  info.counters.created = row[6].as<unsigned long long>();
  info.counters.updated = row[7].as<unsigned long long>();
  info.counters.deleted = row[8].as<unsigned long long>();
  info.counters.unchanged = row[9].as<unsigned long long>();
  info.counters.failed = row[10].as<unsigned long long>();
  info.counters.bytes = row[11].as<unsigned long long>();
  info.message = row[12].as<std::string>();
  info.node = row[13].as<std::string>();
  info.trigger = parse_trigger(row[14].as<std::string>());
  return info;
}

// The staging tables of apply() and delete_unseen(), made within the
// transaction that uses them when its connection has none yet: a
// connection is lent one transaction at a time (PgPool), and through
// PgBouncer in transaction mode the next transaction may run on another
// server connection, so they cannot be made once per connection. Kept
// (ON COMMIT DELETE ROWS) for the next transaction on the same server
// connection; one round trip, no catalog change, when they are there.
inline void ensure_stage_tables(pqxx::work& tx) {
  tx.exec0("DO $$ BEGIN IF to_regclass('pg_temp.stage_resource') IS NULL THEN "
           "CREATE TEMP TABLE stage_resource ("
           "uri text COLLATE \"C\", state text, lastmod timestamptz, change_datetime timestamptz, length bigint, "
           "md5 text, sha1 text, sha256 text, type text, encoding text, links jsonb, blob_sha256 text, "
           "fetched_at timestamptz, fetched_from text) ON COMMIT DELETE ROWS; "
           "CREATE TEMP TABLE stage_seen (uri text COLLATE \"C\") ON COMMIT DELETE ROWS; "
           "CREATE TEMP TABLE stage_deleted (uri text COLLATE \"C\", lastmod timestamptz, length bigint, md5 text, "
           "sha1 text, sha256 text, type text, encoding text, links jsonb) ON COMMIT DELETE ROWS; "
           "END IF; END $$");
}

} // namespace pg_detail

// What every part of one PgStore works through: the connection (borrowed
// from the pool per transaction), the lock that serialises calls on one
// store object, and the session connection that holds leases and claims.
struct PgStoreConnection {
  explicit PgStoreConnection(const std::string& info) : conninfo(info), conn(info), session(PgSession::of(info)) {}
  std::string conninfo;
  std::mutex mutex;
  PgConn conn;                         // borrowed per transaction
  std::shared_ptr<PgSession> session; // leases and claims
};

} // namespace tributary::store

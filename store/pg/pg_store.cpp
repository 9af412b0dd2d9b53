#include "store/pg/pg_store.h"

#include "store/pg/migrations.h"
#include "store/pg/pg_conn.h"
#include "store/pg/pg_fields.h"

#include "common/log.h"

#include "resourcesync/reader.h"
#include "resourcesync/writer.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <map>
#include <mutex>

namespace tributary::store {

namespace {

std::optional<std::string> ts(const std::optional<Timestamp>& t) {
  return t ? std::optional<std::string>(rs::format_w3c_datetime(*t)) : std::nullopt;
}

// A length column as the model holds it. Rows written before lengths were
// capped at 2^63 - 1 may hold a negative one: read as unknown, never thrown
// on (a throw here once froze every set's documents).
std::optional<uint64_t> read_length(const pqxx::field& f) {
  if (f.is_null()) {
    return std::nullopt;
  }
  const long long n = f.as<long long>();
  return n < 0 ? std::nullopt : std::optional<uint64_t>(static_cast<uint64_t>(n));
}

std::optional<std::string> read_str(const pqxx::field& f) {
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
std::string bigint_array(const std::vector<int64_t>& ids) {
  std::string out = "{";
  for (size_t i = 0; i < ids.size(); ++i) {
    out += (i ? "," : "") + std::to_string(ids[i]);
  }
  return out + "}";
}

void lock_change_log(pqxx::work& tx) {
  tx.exec("SELECT pg_advisory_xact_lock(" + std::to_string(k_change_log_lock) + ")");
  // Serve replicas and other daemons learn of the commit at once (see
  // ChangeListener); PostgreSQL delivers it on commit, once per transaction.
  tx.exec("NOTIFY " + std::string(k_change_channel));
}

// A retry's entry is kept as a one-entry urlset: the upstream's own XML
// form, every attribute and link included.
std::string entry_to_xml(const rs::Entry& e) {
  rs::Document doc;
  doc.header.md = rs::Metadata{};
  doc.header.md->capability = "resourcelist";
  doc.entries.push_back(e);
  return rs::write_document(doc);
}

// Reads it back; should the text not be one entry for `uri` (it cannot be,
// unless the row was edited), the entry names the URI alone, so the
// resource is still fetched (unverified) rather than never.
rs::Entry entry_from_xml(const std::string& xml, const std::string& uri) {
  auto parsed = rs::parse_document(xml);
  if (parsed.document.entries.size() == 1 && parsed.document.entries[0].loc == uri) {
    return std::move(parsed.document.entries[0]);
  }
  rs::Entry bare;
  bare.loc = uri;
  return bare;
}

std::string links_to_json(const std::vector<rs::Link>& links) {
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

std::vector<rs::Link> links_from_json(const std::string& text) {
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

std::optional<std::string> hash_of(const std::vector<rs::HashValue>& hashes, rs::HashAlgorithm a) {
  for (const auto& h : hashes) {
    if (h.known() == a) {
      return h.hex;
    }
  }
  return std::nullopt;
}

// A PostgreSQL text[] literal.
std::string text_array(const std::vector<std::string>& items) {
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

const char* k_resource_columns_sql =
    "uri, state, lastmod, change_datetime, length, md5, sha1, sha256, type, encoding, links, "
    "blob_sha256, fetched_at, fetched_from";

std::string resource_select() {
  return "SELECT uri, state, " + us("lastmod") + ", " + us("change_datetime") +
         ", length, md5, sha1, sha256, type, encoding, links::text, blob_sha256, " + us("fetched_at") +
         ", fetched_from FROM resource ";
}

ResourceRecord read_resource(const pqxx::row& r) {
  ResourceRecord rec;
  rec.uri = r[0].as<std::string>();
  rec.state = r[1].as<std::string>() == "live" ? ResourceState::live : ResourceState::deleted;
  rec.lastmod = read_opt_time(r[2]);
  rec.change_datetime = read_opt_time(r[3]);
  rec.length = read_length(r[4]);
  if (!r[5].is_null()) {
    rec.hashes.push_back({"md5", r[5].as<std::string>()});
  }
  if (!r[6].is_null()) {
    rec.hashes.push_back({"sha-1", r[6].as<std::string>()});
  }
  if (!r[7].is_null()) {
    rec.hashes.push_back({"sha-256", r[7].as<std::string>()});
  }
  rec.type = read_str(r[8]);
  rec.encoding = read_str(r[9]);
  rec.links = links_from_json(r[10].as<std::string>());
  rec.blob_sha256 = read_str(r[11]);
  rec.fetched_at = read_opt_time(r[12]);
  rec.fetched_from = read_str(r[13]);
  return rec;
}

using ResourceRow =
    std::tuple<std::string, std::string, std::optional<std::string>, std::optional<std::string>,
               std::optional<long long>, std::optional<std::string>, std::optional<std::string>,
               std::optional<std::string>, std::optional<std::string>, std::optional<std::string>, std::string,
               std::optional<std::string>, std::optional<std::string>, std::optional<std::string>>;

ResourceRow resource_row(const ResourceRecord& r) {
  return ResourceRow{r.uri,
                     r.state == ResourceState::live ? "live" : "deleted",
                     ts(r.lastmod),
                     ts(r.change_datetime),
                     r.length ? std::optional<long long>(static_cast<long long>(*r.length)) : std::nullopt,
                     hash_of(r.hashes, rs::HashAlgorithm::md5),
                     hash_of(r.hashes, rs::HashAlgorithm::sha1),
                     hash_of(r.hashes, rs::HashAlgorithm::sha256),
                     r.type,
                     r.encoding,
                     links_to_json(r.links),
                     r.blob_sha256,
                     ts(r.fetched_at),
                     r.fetched_from};
}

void upsert_watermark(pqxx::transaction_base& tx, int64_t feed_id, const Watermark& w) {
  tx.exec_params("INSERT INTO watermark (feed_id, baseline_at, change_list_url, last_time, last_uri, "
                 "last_position, updated_at) VALUES ($1, $2, $3, $4, $5, $6, now()) "
                 "ON CONFLICT (feed_id) DO UPDATE SET baseline_at = EXCLUDED.baseline_at, "
                 "change_list_url = EXCLUDED.change_list_url, last_time = EXCLUDED.last_time, "
                 "last_uri = EXCLUDED.last_uri, last_position = EXCLUDED.last_position, updated_at = now()",
                 feed_id, ts(w.baseline_at), w.change_list_url, ts(w.last_time),
                 w.last_uri.empty() ? std::nullopt : std::optional<std::string>(w.last_uri),
                 w.last_position < 0 ? std::nullopt : std::optional<long long>(w.last_position));
}

} // namespace

struct PgStore::Impl {
  explicit Impl(const std::string& info) : conninfo(info), conn(info, &create_stage_tables) {}
  // A session's temporary tables: made again with every new connection.
  static void create_stage_tables(pqxx::connection& c) {
    pqxx::work tx(c);
    tx.exec0("CREATE TEMP TABLE stage_resource ("
             "uri text COLLATE \"C\", state text, lastmod timestamptz, change_datetime timestamptz, length bigint, "
             "md5 text, sha1 text, sha256 text, type text, encoding text, links jsonb, blob_sha256 text, "
             "fetched_at timestamptz, fetched_from text) ON COMMIT DELETE ROWS");
    tx.exec0("CREATE TEMP TABLE stage_seen (uri text COLLATE \"C\") ON COMMIT DELETE ROWS");
    tx.exec0("CREATE TEMP TABLE stage_deleted (uri text COLLATE \"C\", lastmod timestamptz, length bigint, md5 text, sha1 text, "
             "sha256 text, type text, encoding text, links jsonb) ON COMMIT DELETE ROWS");
    tx.commit();
  }
  std::string conninfo;
  std::mutex mutex;
  PgConn conn;
  // Sessions (open_session) go back to their root store's pool when done:
  // a connection with its temporary tables costs 15-20 ms to set up, as
  // much as a whole incremental run of one change (measured for #16's
  // push, where every notification is a run).
  struct Pool {
    std::mutex mutex;
    std::vector<std::unique_ptr<Impl>> idle;
    std::vector<std::unique_ptr<pqxx::connection>> idle_leases; // unlocked, ready for the next run
  };
  std::shared_ptr<Pool> pool; // a session's, while it is in use
  bool session = false;
};

namespace {
// Idle sessions kept per root store.
constexpr size_t k_idle_sessions = 8;
} // namespace

PgStore::PgStore(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}

PgStore::~PgStore() {
  if (!m_impl || !m_impl->session || !m_impl->pool) {
    return;
  }
  auto pool = std::move(m_impl->pool); // an idle connection holds no pool (no cycle)
  // Only a connection that still has its session (its temporary tables:
  // a server restart, or a connection re-established underneath, would
  // have lost them) goes back.
  bool healthy = false;
  try {
    if (m_impl->conn.is_open()) {
      pqxx::nontransaction tx(m_impl->conn);
      healthy = tx.exec1("SELECT to_regclass('pg_temp.stage_resource') IS NOT NULL")[0].as<bool>();
    }
  } catch (const std::exception&) {
  }
  if (healthy) {
    std::lock_guard lock(pool->mutex);
    if (pool->idle.size() < k_idle_sessions) {
      pool->idle.push_back(std::move(m_impl));
    }
  }
}

Result<std::unique_ptr<PgStore>> PgStore::open(const std::string& conninfo) {
  if (auto ok = check_schema(conninfo); !ok) {
    return tl::unexpected(ok.error());
  }
  return guarded("open store", [&]() -> Result<std::unique_ptr<PgStore>> {
    return std::unique_ptr<PgStore>(new PgStore(std::make_unique<Impl>(conninfo)));
  });
}

Result<int64_t> PgStore::ensure_source(const std::string& name, const std::string& url) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("ensure source", [&]() -> Result<int64_t> {
    pqxx::work tx(m_impl->conn);
    auto r = tx.exec_params("INSERT INTO source (name, url) VALUES ($1, $2) "
                            "ON CONFLICT (name) DO UPDATE SET url = EXCLUDED.url RETURNING id",
                            name, url);
    tx.commit();
    return r[0][0].as<int64_t>();
  });
}

Result<void> PgStore::set_source_kind(int64_t source_id, const std::string& kind) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("record the source's kind", [&]() -> Result<void> {
    pqxx::work tx(m_impl->conn);
    tx.exec_params("UPDATE source SET kind = $2 WHERE id = $1 AND kind IS DISTINCT FROM $2", source_id, kind);
    tx.commit();
    return {};
  });
}

Result<void> PgStore::set_source_clock(int64_t source_id, std::optional<double> ahead_seconds) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("record the source's clock", [&]() -> Result<void> {
    pqxx::work tx(m_impl->conn);
    const std::optional<std::string> ahead =
        ahead_seconds ? std::optional<std::string>(std::to_string(*ahead_seconds)) : std::nullopt;
    tx.exec_params("UPDATE source SET clock_ahead_seconds = $2 WHERE id = $1", source_id, ahead);
    tx.commit();
    return {};
  });
}

Result<int64_t> PgStore::ensure_feed(int64_t source_id, const std::string& capability_list_url) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("ensure feed", [&]() -> Result<int64_t> {
    pqxx::work tx(m_impl->conn);
    auto r = tx.exec_params("INSERT INTO feed (source_id, capability_list_url) VALUES ($1, $2) "
                            "ON CONFLICT (source_id, capability_list_url) DO UPDATE SET source_id = EXCLUDED.source_id "
                            "RETURNING id",
                            source_id, capability_list_url);
    tx.commit();
    return r[0][0].as<int64_t>();
  });
}

Result<Watermark> PgStore::watermark(int64_t feed_id) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read watermark", [&]() -> Result<Watermark> {
    pqxx::read_transaction tx(m_impl->conn);
    auto r = tx.exec_params("SELECT " + us("baseline_at") + ", change_list_url, " + us("last_time") +
                                ", last_uri, last_position FROM watermark WHERE feed_id = $1",
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
    return w;
  });
}

Result<std::unordered_map<std::string, ResourceRecord>> PgStore::resources(int64_t feed_id,
                                                                          const std::vector<std::string>& uris) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read resources", [&]() -> Result<std::unordered_map<std::string, ResourceRecord>> {
    std::unordered_map<std::string, ResourceRecord> out;
    if (uris.empty()) {
      return out;
    }
    pqxx::read_transaction tx(m_impl->conn);
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

Result<void> PgStore::for_each_resource(int64_t feed_id, const std::function<void(const ResourceRecord&)>& fn) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("list resources", [&]() -> Result<void> {
    // Keyset pagination keeps memory flat for feeds of millions; the order
    // is the database's collation, which the primary key index serves.
    std::optional<std::string> after;
    for (;;) {
      pqxx::read_transaction tx(m_impl->conn);
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

Result<void> PgStore::apply(const Batch& b) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("apply batch", [&]() -> Result<void> {
    pqxx::work tx(m_impl->conn);
    // Seen marks first: rows upserted below take theirs in the same write
    // (one write per row instead of an insert and then an update).
    const bool mark_seen = !b.seen.empty() && b.run_id != 0;
    if (mark_seen) {
      pqxx::stream_to s(tx, "stage_seen", std::vector<std::string>{"uri"});
      for (const auto& u : b.seen) {
        s << std::make_tuple(u);
      }
      s.complete();
    }
    if (!b.upserts.empty()) {
      pqxx::stream_to s(tx, "stage_resource",
                        std::vector<std::string>{"uri", "state", "lastmod", "change_datetime", "length", "md5", "sha1",
                                                 "sha256", "type", "encoding", "links", "blob_sha256", "fetched_at",
                                                 "fetched_from"});
      for (const auto& r : b.upserts) {
        s << resource_row(r);
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
                     "next_attempt_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) "
                     "ON CONFLICT (feed_id, uri) DO UPDATE SET entry = EXCLUDED.entry, change = EXCLUDED.change, "
                     "change_datetime = EXCLUDED.change_datetime, reason = EXCLUDED.reason, "
                     "attempts = EXCLUDED.attempts, next_attempt_at = EXCLUDED.next_attempt_at",
                     b.feed_id, r.uri, entry_to_xml(r.entry),
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
    if (b.watermark) {
      upsert_watermark(tx, b.feed_id, *b.watermark);
    }
    if (b.run_id != 0) {
      const RunCounters& c = b.counters;
      tx.exec_params("UPDATE sync_run SET created = created + $2, updated = updated + $3, deleted = deleted + $4, "
                     "unchanged = unchanged + $5, failed = failed + $6, bytes = bytes + $7 WHERE id = $1",
                     b.run_id, static_cast<long long>(c.created), static_cast<long long>(c.updated),
                     static_cast<long long>(c.deleted), static_cast<long long>(c.unchanged),
                     static_cast<long long>(c.failed), static_cast<long long>(c.bytes));
    }
    if (!b.changes.empty()) {
      // Last, under the change-log lock held to commit: see lock_change_log().
      lock_change_log(tx);
      pqxx::stream_to s(tx, "change_log",
                        std::vector<std::string>{"feed_id", "uri", "change", "upstream_datetime", "lastmod", "length",
                                                 "md5", "sha1", "sha256", "type", "encoding", "links", "blob_sha256"});
      for (const auto& c : b.changes) {
        const ResourceRecord& r = c.resource;
        s << std::make_tuple(
            static_cast<long long>(b.feed_id), r.uri, std::string(rs::to_string(c.change)), ts(c.upstream_datetime),
            ts(r.lastmod),
            r.length ? std::optional<long long>(static_cast<long long>(*r.length)) : std::nullopt,
            hash_of(r.hashes, rs::HashAlgorithm::md5), hash_of(r.hashes, rs::HashAlgorithm::sha1),
            hash_of(r.hashes, rs::HashAlgorithm::sha256), r.type, r.encoding, links_to_json(r.links), r.blob_sha256);
      }
      s.complete();
    }
    tx.commit();
    return {};
  });
}

Result<DeletionOutcome> PgStore::delete_unseen(int64_t feed_id, int64_t run_id, const std::optional<Watermark>& w,
                                               double max_share) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("delete unseen resources", [&]() -> Result<DeletionOutcome> {
    pqxx::work tx(m_impl->conn);
    DeletionOutcome out;
    // The feed's row, locked: a confirmation arriving now waits for this.
    const bool confirmed =
        tx.exec_params1("SELECT deletions_confirmed FROM feed WHERE id = $1 FOR UPDATE", feed_id)[0].as<bool>();
    auto counts = tx.exec_params1("SELECT count(*) FILTER (WHERE last_seen_run IS DISTINCT FROM $2), count(*) "
                                  "FROM resource WHERE feed_id = $1 AND state = 'live'",
                                  feed_id, run_id);
    out.unseen = counts[0].as<unsigned long long>();
    out.live = counts[1].as<unsigned long long>();
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
    auto r = tx.exec_params(
        "WITH d AS (UPDATE resource SET state = 'deleted', updated_at = now() "
        "  WHERE feed_id = $1 AND state = 'live' AND last_seen_run IS DISTINCT FROM $2 "
        "  RETURNING uri, lastmod, length, md5, sha1, sha256, type, encoding, links) "
        "INSERT INTO stage_deleted SELECT * FROM d",
        feed_id, run_id);
    out.deleted = static_cast<uint64_t>(r.affected_rows());
    // The listing no longer names them: nothing left to retry.
    tx.exec_params("DELETE FROM retry WHERE feed_id = $1 AND last_seen_run IS DISTINCT FROM $2", feed_id, run_id);
    tx.exec_params("UPDATE sync_run SET deleted = deleted + $2 WHERE id = $1", run_id,
                   static_cast<long long>(out.deleted));
    if (out.deleted > 0) {
      // Last, under the change-log lock held to commit: see lock_change_log().
      lock_change_log(tx);
      tx.exec_params(
          "INSERT INTO change_log (feed_id, uri, change, lastmod, length, md5, sha1, sha256, type, encoding, links) "
          "SELECT $1, uri, 'deleted', lastmod, length, md5, sha1, sha256, type, encoding, links FROM stage_deleted "
          "ORDER BY uri",
          feed_id);
    }
    tx.commit();
    return out;
  });
}

namespace {

// The columns read_hold() reads, in its order, of `feed`.
const std::string k_hold_columns = "id, capability_list_url, deletion_hold_unseen, deletion_hold_live, " +
                                   us("deletion_hold_since") + ", deletion_hold_run, deletions_confirmed";

DeletionHold read_hold(const pqxx::row& row) {
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

} // namespace

Result<std::vector<DeletionHold>> PgStore::confirm_deletions(int64_t source_id) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("confirm deletions", [&]() -> Result<std::vector<DeletionHold>> {
    pqxx::work tx(m_impl->conn);
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
  return "uri, entry, change, " + us("change_datetime") + ", reason, attempts, " + us("next_attempt_at");
}

RetryRecord read_retry(const pqxx::row& row) {
  RetryRecord r;
  r.uri = row[0].as<std::string>();
  r.entry = entry_from_xml(row[1].as<std::string>(), r.uri);
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
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read pending changes", [&]() -> Result<std::unordered_map<std::string, RetryRecord>> {
    std::unordered_map<std::string, RetryRecord> out;
    if (uris.empty()) {
      return out;
    }
    pqxx::read_transaction tx(m_impl->conn);
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
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read due retries", [&]() -> Result<std::vector<RetryRecord>> {
    pqxx::read_transaction tx(m_impl->conn);
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

Result<int64_t> PgStore::begin_run(int64_t source_id, RunMode mode) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("begin run", [&]() -> Result<int64_t> {
    pqxx::work tx(m_impl->conn);
    auto r = tx.exec_params("INSERT INTO sync_run (source_id, mode, status, node) VALUES ($1, $2, 'running', $3) "
                            "RETURNING id",
                            source_id, std::string(to_string(mode)), node_name());
    tx.commit();
    return r[0][0].as<int64_t>();
  });
}

Result<int64_t> PgStore::record_failed_run(int64_t source_id, RunMode mode, Timestamp started,
                                           const std::string& message) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("record a failed run", [&]() -> Result<int64_t> {
    pqxx::work tx(m_impl->conn);
    auto r = tx.exec_params("INSERT INTO sync_run (source_id, mode, status, node, started_at, finished_at, message) "
                            "VALUES ($1, $2, 'failed', $3, $4, now(), $5) RETURNING id",
                            source_id, std::string(to_string(mode)), node_name(), rs::format_w3c_datetime(started),
                            message);
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

namespace {

const std::string k_run_columns = "id, source_id, mode, status, " + us("started_at") + ", " + us("finished_at") +
                                  ", created, updated, deleted, unchanged, failed, bytes, coalesce(message, ''), "
                                  "coalesce(node, '')";

RunInfo read_run(const pqxx::row& row) {
  RunInfo info;
  info.id = row[0].as<int64_t>();
  info.source_id = row[1].as<int64_t>();
  const std::string mode = row[2].as<std::string>();
  info.mode = mode == "baseline" ? RunMode::baseline : mode == "audit" ? RunMode::audit : RunMode::incremental;
  const std::string st = row[3].as<std::string>();
  info.status = st == "running"     ? RunStatus::running
                : st == "succeeded" ? RunStatus::succeeded
                : st == "partial"   ? RunStatus::partial
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
  return info;
}

} // namespace

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

Result<std::vector<FeedInfo>> PgStore::feeds() {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("list feeds", [&]() -> Result<std::vector<FeedInfo>> {
    pqxx::read_transaction tx(m_impl->conn);
    auto r = tx.exec("SELECT f.id, f.source_id, s.name, f.capability_list_url FROM feed f "
                     "JOIN source s ON s.id = f.source_id ORDER BY s.name, f.id");
    std::vector<FeedInfo> out;
    for (const auto& row : r) {
      out.push_back(FeedInfo{row[0].as<int64_t>(), row[1].as<int64_t>(), row[2].as<std::string>(),
                             row[3].as<std::string>()});
    }
    return out;
  });
}

Result<std::vector<ResourceRecord>> PgStore::live_resources(int64_t feed_id, const std::string& after_uri,
                                                            size_t limit) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("list live resources", [&]() -> Result<std::vector<ResourceRecord>> {
    pqxx::read_transaction tx(m_impl->conn);
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

Result<std::optional<ResourceRecord>> PgStore::resource(int64_t feed_id, const std::string& uri) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read resource", [&]() -> Result<std::optional<ResourceRecord>> {
    pqxx::read_transaction tx(m_impl->conn);
    auto r = tx.exec_params(resource_select() + "WHERE feed_id = $1 AND uri = $2", feed_id, uri);
    if (r.empty()) {
      return std::optional<ResourceRecord>();
    }
    return std::optional<ResourceRecord>(read_resource(r[0]));
  });
}

Result<std::vector<ChangedKey>> PgStore::changed_keys(const std::vector<int64_t>& feed_ids, int64_t after_seq,
                                                      int64_t up_to_seq, size_t limit) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read change log", [&]() -> Result<std::vector<ChangedKey>> {
    const std::string ids = bigint_array(feed_ids);
    pqxx::read_transaction tx(m_impl->conn);
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

Result<std::vector<LoggedChange>> PgStore::changes(const std::vector<int64_t>& feed_ids, int64_t after_seq,
                                                   size_t limit) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read change log", [&]() -> Result<std::vector<LoggedChange>> {
    const std::string ids = bigint_array(feed_ids);
    pqxx::read_transaction tx(m_impl->conn);
    auto r = tx.exec_params("SELECT seq, change, " + us("recorded_at") + ", " + us("upstream_datetime") + ", uri, " +
                                us("lastmod") +
                                ", length, md5, sha1, sha256, type, encoding, links::text, blob_sha256 "
                                "FROM change_log WHERE feed_id = ANY($1::bigint[]) AND seq > $2 ORDER BY seq LIMIT $3",
                            ids, static_cast<long long>(after_seq), static_cast<long long>(limit));
    std::vector<LoggedChange> out;
    out.reserve(r.size());
    for (const auto& row : r) {
      LoggedChange c;
      c.seq = row[0].as<int64_t>();
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

Result<std::vector<SourceStats>> PgStore::source_stats() {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read source statistics", [&]() -> Result<std::vector<SourceStats>> {
    pqxx::read_transaction tx(m_impl->conn);
    std::vector<SourceStats> out;
    std::map<int64_t, size_t> index;
    for (const auto& row : tx.exec("SELECT id, name, url, kind, clock_ahead_seconds FROM source ORDER BY name")) {
      SourceStats st;
      st.source_id = row[0].as<int64_t>();
      st.name = row[1].as<std::string>();
      st.url = row[2].as<std::string>();
      st.kind = row[3].is_null() ? std::string() : row[3].as<std::string>();
      if (!row[4].is_null()) {
        st.clock_ahead_seconds = row[4].as<double>();
      }
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
    for (const auto& row : tx.exec("SELECT f.source_id, count(*) FROM retry r JOIN feed f ON f.id = r.feed_id "
                                   "GROUP BY f.source_id")) {
      if (auto it = index.find(row[0].as<int64_t>()); it != index.end()) {
        out[it->second].retrying = row[1].as<unsigned long long>();
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
      const std::string kind = row[14].as<std::string>();
      auto it = index.find(run.source_id);
      if (it == index.end()) {
        continue;
      }
      SourceStats& st = out[it->second];
      (kind == "s" ? st.last_success : kind == "f" ? st.last_failure : st.last_run) = std::move(run);
    }
    return out;
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

namespace {
const char* k_referenced_blobs =
    "SELECT blob_sha256 FROM resource WHERE state = 'live' AND blob_sha256 IS NOT NULL "
    "UNION ALL "
    "SELECT blob_sha256 FROM change_log WHERE change <> 'deleted' AND blob_sha256 IS NOT NULL "
    "UNION ALL "
    "SELECT sha256 FROM shared_dump_file "
    "UNION ALL "
    "SELECT sha256 FROM archived_document";
} // namespace

Result<void> PgStore::for_each_unplaced_blob(const std::function<void(const std::string&)>& fn) {
  return for_each_blob_of(std::string("SELECT DISTINCT x.blob_sha256 FROM (") + k_referenced_blobs +
                              ") x WHERE NOT EXISTS (SELECT 1 FROM content_object o WHERE o.sha256 = x.blob_sha256)",
                          fn);
}

const char* PgStore::referenced_blobs_sql() {
  return k_referenced_blobs;
}

Result<void> PgStore::for_each_placed_blob(const std::function<void(const std::string&)>& fn) {
  return for_each_blob_of("SELECT sha256 FROM content_object", fn);
}

Result<void> PgStore::for_each_referenced_blob(const std::function<void(const std::string&)>& fn) {
  return for_each_blob_of(k_referenced_blobs, fn);
}

Result<void> PgStore::for_each_blob_of(const std::string& query, const std::function<void(const std::string&)>& fn) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("list referenced blobs", [&]() -> Result<void> {
    pqxx::work tx(m_impl->conn);
    tx.exec0("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY");
    tx.exec0("DECLARE referenced NO SCROLL CURSOR FOR " + query);
    for (;;) {
      pqxx::result r = tx.exec("FETCH 20000 FROM referenced");
      for (const auto& row : r) {
        fn(row[0].as<std::string>());
      }
      if (r.size() < 20000) {
        break;
      }
    }
    tx.commit();
    return {};
  });
}

namespace {

std::vector<int64_t> read_bigint_array(const pqxx::field& f) {
  std::vector<int64_t> out;
  auto parser = f.as_array();
  for (auto [kind, text] = parser.get_next(); kind != pqxx::array_parser::done; std::tie(kind, text) = parser.get_next()) {
    if (kind == pqxx::array_parser::string_value) {
      out.push_back(std::stoll(text));
    }
  }
  return out;
}

std::vector<Compaction> read_compactions(pqxx::transaction_base& tx) {
  std::vector<Compaction> out;
  for (const auto& row : tx.exec("SELECT set_name, feeds, part_size, parts, last_seq, " + us("until") +
                                 " FROM change_log_compaction ORDER BY set_name")) {
    Compaction c;
    c.set_name = row[0].as<std::string>();
    c.feeds = read_bigint_array(row[1]);
    c.part_size = row[2].as<size_t>();
    c.parts = row[3].as<size_t>();
    c.last_seq = row[4].as<int64_t>();
    c.until = *read_opt_time(row[5]);
    out.push_back(std::move(c));
  }
  return out;
}

} // namespace

Result<std::vector<int64_t>> PgStore::changed_feeds(int64_t after_seq, int64_t up_to_seq) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read change log", [&]() -> Result<std::vector<int64_t>> {
    pqxx::read_transaction tx(m_impl->conn);
    std::vector<int64_t> out;
    for (const auto& row : tx.exec_params("SELECT DISTINCT feed_id FROM change_log WHERE seq > $1 AND seq <= $2",
                                          static_cast<long long>(after_seq), static_cast<long long>(up_to_seq))) {
      out.push_back(row[0].as<int64_t>());
    }
    return out;
  });
}

Result<std::vector<Compaction>> PgStore::compactions() {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read compactions", [&]() -> Result<std::vector<Compaction>> {
    pqxx::read_transaction tx(m_impl->conn);
    return read_compactions(tx);
  });
}

Result<uint64_t> PgStore::compact_change_log(const std::vector<Compaction>& done,
                                             const std::map<std::string, std::vector<int64_t>>& published) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("compact the change log", [&]() -> Result<uint64_t> {
    pqxx::work tx(m_impl->conn);
    for (const auto& c : done) {
      tx.exec_params("INSERT INTO change_log_compaction AS k (set_name, feeds, part_size, parts, last_seq, until) "
                     "VALUES ($1, $2::bigint[], $3, $4, $5, timestamptz 'epoch' + $6 * interval '1 microsecond') "
                     "ON CONFLICT (set_name) DO UPDATE SET feeds = EXCLUDED.feeds, part_size = EXCLUDED.part_size, "
                     "parts = EXCLUDED.parts, last_seq = EXCLUDED.last_seq, until = EXCLUDED.until, "
                     "compacted_at = now() "
                     "WHERE k.feeds <> EXCLUDED.feeds OR k.part_size <> EXCLUDED.part_size OR k.parts < EXCLUDED.parts",
                     c.set_name, bigint_array(c.feeds), static_cast<long long>(c.part_size),
                     static_cast<long long>(c.parts), static_cast<long long>(c.last_seq),
                     static_cast<long long>(
                         std::chrono::duration_cast<std::chrono::microseconds>(c.until.time_since_epoch()).count()));
    }
    std::map<std::string, Compaction> rows;
    for (auto& c : read_compactions(tx)) {
      if (!published.count(c.set_name)) {
        tx.exec_params("DELETE FROM change_log_compaction WHERE set_name = $1", c.set_name);
        continue;
      }
      rows[c.set_name] = std::move(c);
    }
    // Per feed, the highest seq that every set published over it compacted
    // (a set that compacted nothing of it, or over other feeds, keeps all).
    std::map<int64_t, int64_t> bound;
    for (const auto& [name, feeds] : published) {
      auto it = rows.find(name);
      const int64_t upto = it != rows.end() && it->second.feeds == feeds ? it->second.last_seq : 0;
      for (int64_t f : feeds) {
        auto [b, fresh] = bound.emplace(f, upto);
        if (!fresh) {
          b->second = std::min(b->second, upto);
        }
      }
    }
    uint64_t removed = 0;
    for (const auto& [feed, upto] : bound) {
      if (upto > 0) {
        removed += static_cast<uint64_t>(
            tx.exec_params("DELETE FROM change_log WHERE feed_id = $1 AND seq <= $2", feed, static_cast<long long>(upto))
                .affected_rows());
      }
    }
    tx.exec("NOTIFY " + std::string(k_change_channel));
    tx.commit();
    return removed;
  });
}

Result<int> PgStore::schema_version() {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("schema version", [&]() -> Result<int> {
    pqxx::read_transaction tx(m_impl->conn);
    return read_schema_version(tx);
  });
}

Result<int64_t> PgStore::last_seq() {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read last seq", [&]() -> Result<int64_t> {
    pqxx::read_transaction tx(m_impl->conn);
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

namespace {

class Receiver : public pqxx::notification_receiver {
public:
  Receiver(pqxx::connection_base& c, std::function<void()>& f) : notification_receiver(c, k_change_channel), m_f(f) {}
  void operator()(const std::string&, int) override { m_f(); }

private:
  std::function<void()>& m_f;
};

} // namespace

ChangeListener::ChangeListener(std::string conninfo, std::function<void()> on_change)
    : m_conninfo(std::move(conninfo)), m_on_change(std::move(on_change)) {
  m_thread = std::thread([this] { run(); });
}

ChangeListener::~ChangeListener() {
  m_stop = true;
  if (m_thread.joinable()) {
    m_thread.join();
  }
}

void ChangeListener::run() {
  std::string last_error;
  while (!m_stop) {
    try {
      pqxx::connection c(m_conninfo);
      Receiver r(c, m_on_change);
      if (!last_error.empty()) {
        log::info("", "listening for changes again");
        last_error.clear();
      }
      m_on_change(); // whatever was committed while not listening
      while (!m_stop) {
        c.await_notification(1, 0);
      }
    } catch (const std::exception& e) {
      if (e.what() != last_error) {
        log::warn("", std::string("not listening for changes (documents follow on their own schedule): ") + e.what());
        last_error = e.what();
      }
      for (int i = 0; i < 50 && !m_stop; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  }
}

} // namespace tributary::store

namespace tributary::store {

Result<std::optional<SharedDumps::ResourceDump>> PgStore::resource_dump(const std::string& set) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read the shared Resource Dump", [&]() -> Result<std::optional<ResourceDump>> {
    pqxx::read_transaction tx(m_impl->conn);
    auto rows = tx.exec_params("SELECT generation, document, seq, (extract(epoch FROM built_at) * 1000000)::bigint "
                               "FROM shared_dump WHERE set_name = $1",
                               set);
    if (rows.empty()) {
      return std::nullopt;
    }
    ResourceDump d;
    d.generation = rows[0][0].as<std::string>();
    d.document = rows[0][1].as<std::string>();
    d.seq = rows[0][2].as<int64_t>();
    d.built_at = std::chrono::system_clock::time_point(std::chrono::microseconds(rows[0][3].as<int64_t>()));
    return d;
  });
}

Result<std::vector<std::pair<std::string, SharedDumps::ResourceDump>>> PgStore::resource_dumps() {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read the shared Resource Dumps", [&]() -> Result<std::vector<std::pair<std::string, ResourceDump>>> {
    pqxx::read_transaction tx(m_impl->conn);
    std::vector<std::pair<std::string, ResourceDump>> out;
    for (const auto& row : tx.exec("SELECT set_name, generation, seq, (extract(epoch FROM built_at) * 1000000)::bigint "
                                   "FROM shared_dump ORDER BY set_name")) {
      ResourceDump d;
      d.generation = row[1].as<std::string>();
      d.seq = row[2].as<int64_t>();
      d.built_at = std::chrono::system_clock::time_point(std::chrono::microseconds(row[3].as<int64_t>()));
      out.emplace_back(row[0].as<std::string>(), std::move(d));
    }
    return out;
  });
}

Result<bool> PgStore::put_resource_dump(const std::string& set, const ResourceDump& dump,
                                        const std::vector<File>& files) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("record the shared Resource Dump", [&]() -> Result<bool> {
    pqxx::work tx(m_impl->conn);
    auto current = tx.exec_params("SELECT seq, generation FROM shared_dump WHERE set_name = $1 FOR UPDATE", set);
    if (!current.empty() && current[0][0].as<int64_t>() > dump.seq) {
      return false; // a newer one is there
    }
    const std::string replaced = current.empty() ? "" : current[0][1].as<std::string>();
    tx.exec_params("INSERT INTO shared_dump (set_name, generation, document, seq) VALUES ($1, $2, $3, $4) "
                   "ON CONFLICT (set_name) DO UPDATE SET generation = EXCLUDED.generation, "
                   "document = EXCLUDED.document, seq = EXCLUDED.seq, built_at = now()",
                   set, dump.generation, dump.document, dump.seq);
    for (const auto& f : files) {
      tx.exec_params("INSERT INTO shared_dump_file (url_path, set_name, generation, sha256, length) "
                     "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (url_path) DO NOTHING",
                     f.url_path, set, dump.generation, f.sha256, static_cast<long long>(f.length));
    }
    tx.exec_params("DELETE FROM shared_dump_file WHERE set_name = $1 AND generation IS NOT NULL "
                   "AND generation <> $2 AND generation <> $3",
                   set, dump.generation, replaced);
    tx.commit();
    return true;
  });
}

// Session advisory locks of the two-key form (a space apart from the
// sources' leases, which take one bigint key): this constant, then the
// set name's hash.
constexpr int k_dump_lock_space = 0x74726475; // "trdu"

Result<bool> PgStore::claim(const std::string& set) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("claim a set's Resource Dump", [&]() -> Result<bool> {
    pqxx::nontransaction tx(m_impl->conn);
    return tx.exec_params1("SELECT pg_try_advisory_lock($1, hashtext($2))", k_dump_lock_space, set)[0].as<bool>();
  });
}

Result<void> PgStore::release(const std::string& set) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("release a set's Resource Dump", [&]() -> Result<void> {
    pqxx::nontransaction tx(m_impl->conn);
    tx.exec_params1("SELECT pg_advisory_unlock($1, hashtext($2))", k_dump_lock_space, set);
    return {};
  });
}

Result<void> PgStore::put_change_package(const std::string& set, const ChangePackage& p) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("record a shared Change Dump package", [&]() -> Result<void> {
    pqxx::work tx(m_impl->conn);
    for (const File* f : {&p.zip, &p.manifest}) {
      tx.exec_params("INSERT INTO shared_dump_file (url_path, set_name, part, part_from, part_until, sha256, length) "
                     "VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (url_path) DO NOTHING",
                     f->url_path, set, static_cast<long long>(p.part), rs::format_w3c_datetime(p.from),
                     rs::format_w3c_datetime(p.until), f->sha256, static_cast<long long>(f->length));
    }
    tx.commit();
    return {};
  });
}

Result<std::vector<SharedDumps::ChangePackage>> PgStore::change_packages(const std::string& set) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read shared Change Dump packages", [&]() -> Result<std::vector<ChangePackage>> {
    pqxx::read_transaction tx(m_impl->conn);
    // Each part's two files, written in one transaction: its package and
    // the copy of its manifest.
    auto rows = tx.exec_params("SELECT part, " + us("part_from") + ", " + us("part_until") +
                                   ", url_path, sha256, length FROM shared_dump_file "
                                   "WHERE set_name = $1 AND part IS NOT NULL ORDER BY part",
                               set);
    std::vector<ChangePackage> out;
    for (const auto& row : rows) {
      const auto part = row[0].as<size_t>();
      if (out.empty() || out.back().part != part) {
        ChangePackage p;
        p.part = part;
        p.from = rs::Timestamp(std::chrono::microseconds(row[1].as<int64_t>()));
        p.until = rs::Timestamp(std::chrono::microseconds(row[2].as<int64_t>()));
        out.push_back(std::move(p));
      }
      File f{row[3].as<std::string>(), row[4].as<std::string>(), row[5].as<uint64_t>()};
      const bool zip = f.url_path.size() > 4 && f.url_path.compare(f.url_path.size() - 4, 4, ".zip") == 0;
      (zip ? out.back().zip : out.back().manifest) = std::move(f);
    }
    return out;
  });
}

Result<void> PgStore::drop_change_packages(const std::string& set, size_t up_to_part) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("drop shared Change Dump packages", [&]() -> Result<void> {
    pqxx::work tx(m_impl->conn);
    tx.exec_params("DELETE FROM shared_dump_file WHERE set_name = $1 AND part <= $2", set,
                   static_cast<long long>(up_to_part));
    tx.commit();
    return {};
  });
}

Result<std::optional<SharedDumps::File>> PgStore::file(const std::string& url_path) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read a shared dump file", [&]() -> Result<std::optional<File>> {
    pqxx::read_transaction tx(m_impl->conn);
    auto rows = tx.exec_params("SELECT sha256, length FROM shared_dump_file WHERE url_path = $1", url_path);
    if (rows.empty()) {
      return std::nullopt;
    }
    return File{url_path, rows[0][0].as<std::string>(), rows[0][1].as<uint64_t>()};
  });
}

} // namespace tributary::store

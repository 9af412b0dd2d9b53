// PgStore's side of the change log's rule (store/history_rule.h): the last
// logged entry of each URI a batch names, and the one writer of log rows.
#include "store/pg/pg_history.h"

#include "store/pg/pg_store_internal.h"

#include "store/history_check.h"
#include "store/history_rule.h"

#include <unordered_set>

namespace tributary::store::pg_detail {

std::unordered_map<std::string, LogHead> read_heads(pqxx::transaction_base& tx, int64_t feed_id,
                                                    const std::vector<std::string>& uris, bool held_fallback) {
  std::unordered_map<std::string, LogHead> out;
  if (uris.empty()) {
    return out;
  }
  // The last entry of each (index change_log_feed_uri: one backward step a
  // URI; joining the resource row in the same query doubled the cost).
  const std::string sql =
      "SELECT u.uri, l.change, " + us("l.upstream_datetime") +
      ", l.md5, l.sha1, l.sha256, l.blob_sha256 FROM unnest($2::text[]) AS u(uri) "
      "JOIN LATERAL (SELECT change, upstream_datetime, md5, sha1, sha256, blob_sha256 "
      "  FROM change_log c WHERE c.feed_id = $1 AND c.uri = u.uri ORDER BY seq DESC LIMIT 1) l ON true";
  for (const auto& row : tx.exec_params(sql, feed_id, text_array(uris))) {
    LogHead h;
    h.change = rs::change_from_string(row[1].as<std::string>()).value_or(rs::Change::updated);
    h.time = read_opt_time(row[2]);
    h.hashes = read_hashes(row, 3);
    h.blob_sha256 = read_str(row[6]);
    out.emplace(row[0].as<std::string>(), std::move(h));
  }
  if (!held_fallback || out.size() == uris.size()) {
    return out;
  }
  // A URI with no entry left because retention compacted them is ordered by
  // the state we hold (read before this transaction writes it), if that was
  // written before the feed's newest compaction: a row written since (a
  // baseline whose entries a LogWindow holds) is no log entry. A feed that
  // no compaction ever covered has no such URI: the statement's one-time
  // filter (EXISTS) then skips the scan, which otherwise probes every URI
  // for no row (a baseline's deferred entries are all without one: a
  // million probes in a baseline of a million, 0.3 s of PostgreSQL with
  // fresh statistics, 10.4 s in a run whose plans had gone wrong).
  std::vector<std::string> rest;
  for (const auto& u : uris) {
    if (!out.count(u)) {
      rest.push_back(u);
    }
  }
  for (const auto& row : tx.exec_params("SELECT uri, state, " + us("change_datetime") +
                                            ", md5, sha1, sha256, blob_sha256 FROM resource "
                                            "WHERE EXISTS (SELECT 1 FROM change_log_compaction "
                                            "              WHERE $1 = ANY(feeds)) "
                                            "AND feed_id = $1 AND uri = ANY($2::text[]) AND updated_at <= "
                                            "(SELECT max(compacted_at) FROM change_log_compaction "
                                            " WHERE $1 = ANY(feeds))",
                                        feed_id, text_array(rest))) {
    LogHead h;
    h.change = row[1].as<std::string>() == "deleted" ? rs::Change::deleted : rs::Change::updated;
    h.time = read_opt_time(row[2]);
    h.hashes = read_hashes(row, 3);
    h.blob_sha256 = read_str(row[6]);
    out.emplace(row[0].as<std::string>(), std::move(h));
  }
  return out;
}

std::vector<std::string> uris_of(const std::vector<ChangeRecord>& changes) {
  std::vector<std::string> out;
  std::unordered_set<std::string_view> seen;
  out.reserve(changes.size());
  for (const auto& c : changes) {
    if (seen.insert(c.resource.uri).second) {
      out.push_back(c.resource.uri);
    }
  }
  return out;
}

RunCounters log_changes(pqxx::work& tx, int64_t feed_id, std::unordered_map<std::string, LogHead>& heads,
                        const std::vector<ChangeRecord>& proposed, const std::vector<ResourceRecord>& stored) {
  std::unordered_map<std::string, const ResourceRecord*> held_after;
  for (const auto& r : stored) {
    held_after.emplace(r.uri, &r);
  }
  const std::vector<Admitted> admitted = admit_each(heads, proposed, held_after, /*keep_heads=*/false);
  RunCounters logged;
  if (admitted.empty()) {
    return logged;
  }
  // Last, under the change-log lock held to commit: see lock_change_log().
  lock_change_log(tx);
  CopyRows s(tx, "change_log",
             std::vector<std::string>{"feed_id", "uri", "change", "upstream_datetime", "lastmod", "length", "md5",
                                      "sha1", "sha256", "type", "encoding", "links", "blob_sha256"});
  const auto feed = static_cast<long long>(feed_id);
  for (const Admitted& a : admitted) {
    const ChangeRecord& c = *a.change;
    ++(c.change == rs::Change::created ? logged.created
       : c.change == rs::Change::deleted ? logged.deleted
                                          : logged.updated);
    const ResourceRecord& r = c.resource;
    CopyText& t = s.row();
    t.field(feed);
    t.field(r.uri);
    t.field(rs::to_string(c.change));
    put_time(t, a.time);
    put_time(t, r.lastmod);
    put_content(t, r);
    s.end_row();
  }
  s.complete();
  return logged;
}

// Logs the deletions delete_unseen staged, through the change log's rule,
// in slices (a confirmed mass deletion may hold a million).
uint64_t log_deletions(pqxx::work& tx, int64_t feed_id, std::optional<Timestamp> at, const DeferLog& defer) {
  uint64_t logged = 0;
  std::string after;
  for (;;) {
    std::vector<ChangeRecord> slice;
    std::vector<ResourceRecord> stored;
    for (const auto& row : tx.exec_params("SELECT uri, " + us("lastmod") + ", length, md5, sha1, sha256, type, "
                                          "encoding, links::text FROM stage_deleted WHERE uri > $1 ORDER BY uri "
                                          "LIMIT 10000",
                                          after)) {
      ResourceRecord r;
      r.uri = row[0].as<std::string>();
      r.state = ResourceState::deleted;
      r.lastmod = read_opt_time(row[1]);
      r.length = read_length(row[2]);
      r.hashes = read_hashes(row, 3);
      r.type = read_str(row[6]);
      r.encoding = read_str(row[7]);
      r.links = links_from_json(row[8].as<std::string>());
      r.change_datetime = at;
      stored.push_back(r);
      after = r.uri;
      ChangeRecord c{rs::Change::deleted, at, std::move(r)};
      if (!defer || !defer(c)) {
        slice.push_back(std::move(c));
      }
    }
    if (stored.empty()) {
      return logged;
    }
    // Their rows say deleted already: only the log's own entries count.
    auto heads = read_heads(tx, feed_id, uris_of(slice), /*held_fallback=*/false);
    logged += log_changes(tx, feed_id, heads, slice, stored).deleted;
  }
}

} // namespace tributary::store::pg_detail

namespace tributary::store {

using namespace pg_detail;

Result<void> PgHistory::for_each_history(int64_t feed_id, const std::function<void(const UriHistory&)>& fn) {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("read the change log's history", [&]() -> Result<void> {
    constexpr int k_chunk = 2000;
    std::string after;
    bool compacted = false;
    {
      pqxx::read_transaction tx(m_db.conn);
      compacted = tx.exec_params1("SELECT EXISTS (SELECT 1 FROM change_log_compaction WHERE $1 = ANY(feeds))",
                                  feed_id)[0]
                      .as<bool>();
    }
    for (;;) {
      // Each chunk in one snapshot: its log, its rows and its retries agree.
      pqxx::read_transaction tx(m_db.conn);
      std::vector<std::string> uris;
      for (const auto& row : tx.exec_params(
               "SELECT uri FROM (SELECT uri FROM (SELECT uri FROM resource WHERE feed_id = $1 AND uri > $2 "
               "ORDER BY uri LIMIT $3) a UNION SELECT uri FROM (SELECT DISTINCT uri FROM change_log "
               "WHERE feed_id = $1 AND uri > $2 ORDER BY uri LIMIT $3) b) u ORDER BY uri LIMIT $3",
               feed_id, after, k_chunk)) {
        uris.push_back(row[0].as<std::string>());
      }
      if (uris.empty()) {
        return {};
      }
      std::map<std::string, UriHistory> chunk;
      for (const auto& u : uris) {
        UriHistory& h = chunk[u];
        h.feed_id = feed_id;
        h.uri = u;
        h.compacted = compacted;
      }
      const std::string list = text_array(uris);
      for (const auto& row : tx.exec_params("SELECT uri, seq, change, " + us("upstream_datetime") +
                                                ", md5, sha1, sha256, blob_sha256 FROM change_log "
                                                "WHERE feed_id = $1 AND uri = ANY($2::text[]) ORDER BY uri, seq",
                                            feed_id, list)) {
        HistoryEntry e;
        e.seq = row[1].as<int64_t>();
        e.change = rs::change_from_string(row[2].as<std::string>()).value_or(rs::Change::updated);
        e.time = read_opt_time(row[3]);
        e.hashes = read_hashes(row, 4);
        e.blob_sha256 = read_str(row[7]);
        chunk[row[0].as<std::string>()].log.push_back(std::move(e));
      }
      for (const auto& row :
           tx.exec_params(resource_select() + "WHERE feed_id = $1 AND uri = ANY($2::text[])", feed_id, list)) {
        ResourceRecord r = read_resource(row);
        std::string uri = r.uri;
        chunk[uri].held = std::move(r);
      }
      for (const auto& row :
           tx.exec_params("SELECT uri FROM retry WHERE feed_id = $1 AND uri = ANY($2::text[])", feed_id, list)) {
        chunk[row[0].as<std::string>()].retrying = true;
      }
      tx.commit();
      for (const auto& [uri, h] : chunk) {
        fn(h);
      }
      after = uris.back();
    }
  });
}

} // namespace tributary::store

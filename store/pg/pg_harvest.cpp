// The resources held by datestamp, for our OAI-PMH face (#52): a
// resource's datestamp is the time its last change entered the change log
// (schema/0025).
#include "store/pg/pg_harvest.h"

#include "store/pg/pg_store_internal.h"

namespace tributary::store {

using namespace pg_detail;

namespace {

long long micros(Timestamp t) {
  return static_cast<long long>(std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count());
}

// A timestamp parameter given as microseconds since the epoch (exact, where
// to_timestamp's double might not be).
std::string at(int n) { return "('epoch'::timestamptz + $" + std::to_string(n) + "::bigint * interval '1 microsecond')"; }

// A resource's columns (as read_resource reads them), its feed and its
// datestamp, from the resource row `r` and the datestamp `h.d`.
std::string dated_columns() {
  return "SELECT r.uri, r.state, " + us("r.lastmod") + ", " + us("r.change_datetime") +
         ", r.length, r.md5, r.sha1, r.sha256, r.type, r.encoding, r.links::text, r.blob_sha256, " +
         us("r.fetched_at") + ", r.fetched_from, r.feed_id, " + us("h.d") + " ";
}

DatedResource read_dated(const pqxx::row& row) {
  DatedResource d;
  d.resource = read_resource(row);
  d.feed_id = row[14].as<int64_t>();
  d.datestamp = read_time(row[15]);
  return d;
}

} // namespace

// Writers set a datestamp under the change log's lock (log_changes): once
// this transaction holds it, every writer that set one before has committed,
// and every later one sets one after the time read here.
Result<Timestamp> PgHarvest::horizon() {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("read the datestamp horizon", [&]() -> Result<Timestamp> {
    pqxx::work tx(m_db.conn);
    // Shared: readers do not wait for one another, only for a writer
    // between its log insert and its commit (writers take it exclusive).
    tx.exec("SELECT pg_advisory_xact_lock_shared(" + std::to_string(k_change_log_lock) + ")");
    const Timestamp t = read_time(tx.exec1("SELECT " + us("clock_timestamp()"))[0]);
    tx.commit();
    return t;
  });
}

Result<std::vector<DatedResource>> PgHarvest::page(const DatedQuery& q) {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("read resources by datestamp", [&]() -> Result<std::vector<DatedResource>> {
    pqxx::read_transaction tx(m_db.conn);
    // From `from` (feed 0 and the empty URI sort before every row of that
    // time), or past the last row of the page before.
    const DatedKey key_of = q.after ? *q.after
                                    : DatedKey{q.from.value_or(Timestamp(std::chrono::seconds(-62135596800))), 0, ""};
    // A resource's datestamp is its last change-log entry's time (the
    // head: no later entry of its URI), or, once retention compacted its
    // entries, the time kept on its row. Each side read by its index from
    // the key on, the two merged.
    const std::string key = "(" + at(3) + ", $4::bigint, $5::text)";
    // In an upstream set: the resource carries its collection link (read
    // on each side before the limit, so that a page is never cut short).
    const std::string in_set =
        q.collection_link.empty()
            ? std::string(" AND $7::text = ''") // no set: $7 is '' (every parameter must be typed)
            : " AND EXISTS (SELECT 1 FROM resource s WHERE s.feed_id = {t}.feed_id AND s.uri = {t}.uri AND s.links @> "
              "jsonb_build_array(jsonb_build_object('rel', 'collection', 'href', $7::text)))";
    const auto filter = [&](const std::string& t) {
      std::string f = in_set;
      for (size_t p = f.find("{t}"); p != std::string::npos; p = f.find("{t}")) {
        f.replace(p, 3, t);
      }
      return f;
    };
    auto r = tx.exec_params(
        dated_columns() +
            "FROM (SELECT feed_id, uri, d FROM ("
            "(SELECT c.feed_id, c.uri, c.recorded_at AS d FROM change_log c WHERE c.feed_id = ANY($1::bigint[]) "
            "AND c.recorded_at < " + at(2) + " AND (c.recorded_at, c.feed_id, c.uri) > " + key +
            " AND NOT EXISTS (SELECT 1 FROM change_log n WHERE n.feed_id = c.feed_id AND n.uri = c.uri AND "
            "n.seq > c.seq)" + filter("c") + " ORDER BY c.recorded_at, c.feed_id, c.uri LIMIT $6) "
            "UNION ALL "
            "(SELECT k.feed_id, k.uri, k.logged_at AS d FROM resource k WHERE k.logged_at IS NOT NULL AND "
            "k.feed_id = ANY($1::bigint[]) AND k.logged_at < " + at(2) + " AND (k.logged_at, k.feed_id, k.uri) > " +
            key + " AND NOT EXISTS (SELECT 1 FROM change_log c WHERE c.feed_id = k.feed_id AND c.uri = k.uri)" +
            filter("k") + " ORDER BY k.logged_at, k.feed_id, k.uri LIMIT $6)"
            ") u ORDER BY d, feed_id, uri LIMIT $6) h "
            "JOIN resource r ON r.feed_id = h.feed_id AND r.uri = h.uri ORDER BY h.d, h.feed_id, h.uri",
        bigint_array(q.feed_ids), micros(q.before), micros(key_of.datestamp), static_cast<long long>(key_of.feed_id),
        key_of.uri, static_cast<long long>(q.limit), q.collection_link);
    std::vector<DatedResource> out;
    out.reserve(r.size());
    for (const auto& row : r) {
      out.push_back(read_dated(row));
    }
    return out;
  });
}

Result<std::optional<DatedResource>> PgHarvest::one(int64_t feed_id, const std::string& uri) {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("read a resource's datestamp", [&]() -> Result<std::optional<DatedResource>> {
    pqxx::read_transaction tx(m_db.conn);
    auto r = tx.exec_params(dated_columns() +
                                "FROM resource r CROSS JOIN LATERAL (SELECT coalesce((SELECT max(recorded_at) FROM "
                                "change_log c WHERE c.feed_id = r.feed_id AND c.uri = r.uri), r.logged_at, "
                                "r.updated_at) AS d) h WHERE r.feed_id = $1 AND r.uri = $2",
                            feed_id, uri);
    if (r.empty()) {
      return std::optional<DatedResource>();
    }
    return std::optional<DatedResource>(read_dated(r[0]));
  });
}

Result<std::optional<Timestamp>> PgHarvest::earliest() {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("read the earliest datestamp", [&]() -> Result<std::optional<Timestamp>> {
    pqxx::read_transaction tx(m_db.conn);
    return read_opt_time(tx.exec1("SELECT " + us("least((SELECT min(recorded_at) FROM change_log), "
                                                 "(SELECT min(logged_at) FROM resource))"))[0]);
  });
}

Result<std::vector<std::string>> PgHarvest::link_targets(const std::vector<int64_t>& feed_ids, const std::string& rel,
                                                         size_t limit) {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("read link targets", [&]() -> Result<std::vector<std::string>> {
    pqxx::read_transaction tx(m_db.conn);
    auto r = tx.exec_params("SELECT DISTINCT l->>'href' AS href FROM resource r, jsonb_array_elements(r.links) l "
                            "WHERE r.feed_id = ANY($1::bigint[]) AND l->>'rel' = $2 AND l->>'href' IS NOT NULL "
                            "ORDER BY href LIMIT $3",
                            bigint_array(feed_ids), rel, static_cast<long long>(limit));
    std::vector<std::string> out;
    out.reserve(r.size());
    for (const auto& row : r) {
      out.push_back(row[0].as<std::string>());
    }
    return out;
  });
}

} // namespace tributary::store

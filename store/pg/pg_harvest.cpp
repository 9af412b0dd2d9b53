// The resources held by datestamp, for our OAI-PMH face (#52).
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

// resource_select() with the feed and the datestamp after its columns.
std::string dated_select() {
  std::string sql = resource_select();
  const std::string tail = ", fetched_from FROM resource ";
  sql.replace(sql.rfind(tail), tail.size(), ", fetched_from, feed_id, " + us("logged_at") + " FROM resource ");
  return sql;
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
    tx.exec("SELECT pg_advisory_xact_lock(" + std::to_string(k_change_log_lock) + ")");
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
    const DatedKey key = q.after ? *q.after
                                 : DatedKey{q.from.value_or(Timestamp(std::chrono::seconds(-62135596800))), 0, ""};
    auto r = tx.exec_params(dated_select() + "WHERE feed_id = ANY($1::bigint[]) AND logged_at < " + at(2) +
                                " AND (logged_at, feed_id, uri) > (" + at(3) +
                                ", $4::bigint, $5::text) ORDER BY logged_at, feed_id, uri LIMIT $6",
                            bigint_array(q.feed_ids), micros(q.before), micros(key.datestamp),
                            static_cast<long long>(key.feed_id), key.uri, static_cast<long long>(q.limit));
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
    auto r = tx.exec_params(dated_select() + "WHERE feed_id = $1 AND uri = $2", feed_id, uri);
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
    return read_opt_time(tx.exec1("SELECT " + us("min(logged_at)") + " FROM resource")[0]);
  });
}

} // namespace tributary::store

// The planner's statistics as the store grows: a table that grows faster
// than autovacuum looks keeps the plans of its first few hundred rows.

#include "pg_feed_store.h"

#include <pqxx/pqxx>

#include <chrono>
#include <string>
#include <thread>

using namespace tributary;
using namespace tributary::store;

namespace {

ResourceRecord live(int n) {
  ResourceRecord r;
  // Numbers not padded, as many Sources write them: byte order mixes the
  // new URIs in among the old ones (as in bench/scale.sh's Source).
  r.uri = "http://127.0.0.1:18900/res/" + std::to_string(n);
  r.length = 256;
  r.type = "text/plain";
  r.hashes = {{"md5", "0123456789abcdef0123456789abcdef"}};
  return r;
}

// The plan of the republisher's keyset read of live resources (its
// Resource List's pages), from a cursor in the middle of the feed.
std::string keyset_plan(pqxx::connection& c, int64_t feed) {
  pqxx::nontransaction tx(c);
  std::string plan;
  for (const auto& row : tx.exec_params("EXPLAIN SELECT * FROM resource WHERE feed_id = $1 AND state = 'live' "
                                        "AND uri > $2 ORDER BY uri LIMIT 2000",
                                        feed, "http://127.0.0.1:18900/res/1126")) {
    plan += row[0].as<std::string>() + "\n";
  }
  return plan;
}

} // namespace

TEST_CASE("PgStore: a feed growing by batches past 50,000 rows has its statistics made anew: the keyset read of the "
          "Resource List goes through the index, not a sort of every later row") {
  test::FeedStore fs("http://127.0.0.1:18900/");
  auto& store = *fs.store;
  pqxx::connection c(fs.db.conninfo());
  auto apply = [&](int from, int to) {
    Batch b;
    b.feed_id = fs.feed;
    b.upserts_new = true;
    for (int i = from; i < to; ++i) {
      b.upserts.push_back(live(i));
    }
    REQUIRE(store.apply(b));
  };
  // Young, as autovacuum may first see it (a new database is visited
  // within a minute): analyzed while empty, then left alone (autovacuum's
  // next visit is a minute later; a baseline grows faster than that).
  {
    pqxx::nontransaction tx(c);
    tx.exec0("ANALYZE resource, change_log");
    tx.exec0("ALTER TABLE resource SET (autovacuum_enabled = false)");
    tx.exec0("ALTER TABLE change_log SET (autovacuum_enabled = false)");
  }
  for (int from = 0; from < 60000; from += 1000) {
    apply(from, from + 1000);
  }
  // The ANALYZE runs beside the batches, on a connection of its own: its
  // statistics are awaited (a minute at most; it takes well under a second).
  auto reltuples = [&c] {
    pqxx::nontransaction tx(c);
    return tx.exec1("SELECT reltuples FROM pg_class WHERE oid = 'resource'::regclass")[0].as<double>();
  };
  for (int i = 0; i < 600 && reltuples() < 50000; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const std::string plan = keyset_plan(c, fs.feed);
  INFO(plan);
  CHECK(plan.find("Sort") == std::string::npos);
  CHECK(plan.find("Index Scan using resource_pkey") != std::string::npos);
  CHECK(reltuples() >= 50000);
}

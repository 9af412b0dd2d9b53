// The database goes away under `tributary run` for 30 s and comes back:
// the daemon says so (/readyz, the status API), records the runs that
// failed for it, and is back in step within seconds of its return, not
// after a back-off.
//
// The outage is of the test's own database on the shared cluster (other
// tests run beside it): new connections refused, every connection of it
// ended, as a server restart ends them. bench/run.sh crash stops the
// whole server (case pg-restart).
#include "daemon_client.h"
#include "process.h"
#include "sync_fixture.h"

#include "common/percent.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <thread>

using namespace tributary;
using namespace tributary::test;
using nlohmann::json;

namespace {

void admin(const std::string& sql) {
  pqxx::connection c(admin_conninfo());
  pqxx::nontransaction tx(c);
  tx.exec(sql);
}

// What a stopped server does to one database: no new connection, and
// every one it had ended.
void cut(const TempDatabase& db) {
  admin("ALTER DATABASE " + db.name() + " ALLOW_CONNECTIONS false");
  admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '" + db.name() + "'");
}

void restore(const TempDatabase& db) { admin("ALTER DATABASE " + db.name() + " ALLOW_CONNECTIONS true"); }

} // namespace

TEST_CASE("Database outage: 35 s without the database, the daemon is back in step within 10 s of its return, "
          "says since when it was unreachable, and records the runs that failed") {
  Upstream up;
  Site site(up);
  site.put_numbered(3);
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  TestDaemon d({{"up", up.url("/")}}); // interval 1 s
  d.start();
  INFO(d.log_text());
  REQUIRE(wait_for(d.base, [](const json& st) { return in_sync(st, "up", 3); }));
  const std::string before_outage = scalar(d, "SELECT now()");

  cut(d.db);
  const auto cut_at = std::chrono::steady_clock::now();
  // A change upstream while the database is away.
  site.put("/res/new.txt", "made during the outage");
  site.publish_change_list("/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt,
                           {change_entry(up.url("/res/new.txt"), rs::Change::created, ts("2026-01-02T00:00:00Z"),
                                         "made during the outage")});
  // /readyz says since when; the daemon stays up.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const Answer ready = call(d.base, "GET", "/readyz");
  CHECK(ready.status == 503);
  CHECK(ready.body.find("the database is unreachable since 20") != std::string::npos);
  const Answer api = call(d.base, "GET", "/api/v1/status");
  CHECK(api.status == 503);
  CHECK(api.body.find("the database is unreachable since 20") != std::string::npos);
  // 35 s: past the first failure back-off (30 s +-10%), which a run that
  // waited on it would have used up while the database was still away.
  std::this_thread::sleep_for(std::chrono::seconds(35) - (std::chrono::steady_clock::now() - cut_at));

  restore(d.db);
  const auto back_at = std::chrono::steady_clock::now();
  const std::string encoded = percent_encode(up.url("/res/new.txt"));
  bool applied = false;
  while (!applied && std::chrono::steady_clock::now() - back_at < std::chrono::seconds(60)) {
    applied = scalar(d, "SELECT count(*) FROM resource WHERE uri = '" + up.url("/res/new.txt") +
                            "' AND state = 'live'") == "1";
    if (!applied) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - back_at).count();
  MESSAGE("the change made during a 35 s outage applied " << took << " s after the database returned");
  REQUIRE(applied);
  CHECK(took <= 10);
  CHECK(call(d.base, "GET", "/readyz").status == 200);
  // The runs that failed for the database are in the run history, with
  // their cause; none is left "running".
  REQUIRE(wait_for(d.base, [](const json& st) {
    const json* s = find_source(st, "up");
    return s && !(*s)["last_failure"].is_null();
  }));
  const json st = status_of(d.base);
  const json* s = find_source(st, "up");
  REQUIRE(s);
  CHECK((*s)["last_failure"]["error"].get<std::string>().find("database") != std::string::npos);
  CHECK(scalar(d, "SELECT count(*) FROM sync_run WHERE status = 'failed' AND message LIKE "
                  "'%the database could not be reached%' AND started_at >= '" + before_outage + "'") == "1");
  CHECK(scalar(d, "SELECT count(*) FROM sync_run WHERE status = 'running' AND started_at < now() - "
                  "interval '5 seconds'") == "0");
  // It says so in the log, once when lost and once when back.
  const std::string log = d.log_text();
  CHECK(log.find("the database is unreachable") != std::string::npos);
  CHECK(log.find("the database answers again") != std::string::npos);
  CHECK(d.stop().second == 0);
}

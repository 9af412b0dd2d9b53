// The process's PostgreSQL connections (#38) on a real server: a borrower
// waits for a connection at most `wait` and is counted; a run whose session
// connection (its lease) was lost is not carried on, while one whose pooled
// connection alone was lost is.
#include "pg_fixture.h"

#include "store/pg/pg_budget.h"
#include "store/pg/pg_store.h"

#include <doctest/doctest.h>
#include <pqxx/pqxx>

#include <condition_variable>
#include <mutex>
#include <thread>

using namespace tributary;
using namespace tributary::store;

namespace {

// The budget for one test, the default again after it (it is the
// process's).
struct Budget {
  explicit Budget(PgBudget b) { set_pg_budget(b); }
  ~Budget() { set_pg_budget(PgBudget{}); }
};

// Terminates this test database's backends (but the caller's) whose
// application_name matches `like`.
int terminate(const std::string& conninfo, const std::string& like) {
  pqxx::connection c(conninfo + " application_name=terminator");
  pqxx::nontransaction tx(c);
  auto r = tx.exec_params("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = "
                          "current_database() AND pid <> pg_backend_pid() AND coalesce(application_name, '') LIKE $1",
                          like);
  return r[0][0].as<int>();
}

} // namespace

TEST_CASE("Connection budget: a borrower waits at most database_wait for a connection, and the wait is counted") {
  test::TempDatabase db;
  REQUIRE(migrate(db.conninfo()));
  Budget budget(PgBudget{2, std::chrono::milliseconds(300), ""}); // a pool of one
  auto holder = PgStore::open(db.conninfo());
  auto other = PgStore::open(db.conninfo());
  REQUIRE(holder);
  REQUIRE(other);
  auto sid = (*holder)->ensure_source("s", "http://example.org/");
  REQUIRE(sid);
  auto feed = (*holder)->ensure_feed(*sid, "http://example.org/caps.xml");
  REQUIRE(feed);
  {
    pqxx::connection c(db.conninfo());
    pqxx::work tx(c);
    tx.exec_params("INSERT INTO resource (feed_id, uri, state) VALUES ($1, 'http://example.org/a', 'live')", *feed);
    tx.commit();
  }
  const PgPoolStats before = pg_pool_stats();
  CHECK(before.size == 1);
  // One store reads its feed through a cursor and holds the pool's one
  // connection until told to go on.
  std::mutex m;
  std::condition_variable cv;
  bool inside = false, go_on = false;
  std::thread reader([&] {
    (void)(*holder)->for_each_resource(*feed, [&](const ResourceRecord&) {
      std::unique_lock lock(m);
      inside = true;
      cv.notify_all();
      cv.wait(lock, [&] { return go_on; });
    });
  });
  {
    std::unique_lock lock(m);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return inside; }));
  }
  // The other waits 0.3 s, then gives up with a transient error that says why.
  const auto t0 = std::chrono::steady_clock::now();
  auto refused = (*other)->ensure_source("t", "http://example.org/t/");
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE_FALSE(refused);
  CHECK(refused.error().kind == ErrorKind::transient);
  CHECK(refused.error().message.find("no database connection came free within 0.30 s") != std::string::npos);
  CHECK(waited >= 0.25);
  CHECK(waited < 5);
  // Given back, it serves a waiting borrower at once.
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::lock_guard lock(m);
    go_on = true;
    cv.notify_all();
  });
  auto served = (*other)->ensure_source("t", "http://example.org/t/");
  CHECK(served);
  release.join();
  reader.join();
  const PgPoolStats after = pg_pool_stats();
  MESSAGE("waits " << after.waits - before.waits << ", timeouts " << after.timeouts - before.timeouts
                   << ", waited " << after.wait_seconds - before.wait_seconds << " s");
  CHECK(after.waits - before.waits >= 2);
  CHECK(after.timeouts - before.timeouts == 1);
  CHECK(after.wait_seconds - before.wait_seconds >= 0.3);
  CHECK(after.open <= 1);
}

TEST_CASE("Connection budget: a run whose session connection (its lease) was lost fails, and one whose pooled "
          "connection alone was lost goes on") {
  test::TempDatabase db;
  REQUIRE(migrate(db.conninfo()));
  auto store = PgStore::open(db.conninfo());
  REQUIRE(store);
  auto sid = (*store)->ensure_source("s", "http://example.org/");
  REQUIRE(sid);
  auto lease = (*store)->try_lock_source(*sid, "the first run");
  REQUIRE(lease);
  REQUIRE(lease->lease);
  auto session = (*store)->open_session();
  REQUIRE(session);
  auto run = (*session)->begin_run(*sid, RunMode::baseline);
  REQUIRE(run);

  // Another run is refused, and told who holds the source.
  auto refused = (*store)->try_lock_source(*sid, "a second run");
  REQUIRE(refused);
  CHECK_FALSE(refused->lease);
  CHECK(refused->holder.rfind("the first run, since ", 0) == 0);

  // The pooled connections alone are lost: the run's next transaction is
  // tried again on a new one (its lease is still held).
  CHECK(terminate(db.conninfo(), "") >= 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK((*session)->record_error(*run, "http://example.org/a", "a reason"));

  // The session connection too (as when PostgreSQL restarts): the run's
  // next transaction fails rather than carry on unleased...
  CHECK(terminate(db.conninfo(), "%") >= 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto finished = (*session)->finish_run(*run, RunStatus::succeeded, "", RunMode::baseline);
  REQUIRE_FALSE(finished);
  CHECK(finished.error().kind == ErrorKind::database);
  // ...and another run takes the source, on a new session connection.
  auto second = (*store)->try_lock_source(*sid, "a second run");
  REQUIRE(second);
  CHECK(second->lease);
}

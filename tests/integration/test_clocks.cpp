// A Source's clock: changes dated in the future, a clock put right (its new
// changes dated before the ones it wrote while wrong, and appended after
// them, out of order), and a repair: nothing is lost, nothing skipped, and
// the run says what it saw.
#include "sync_fixture.h"

#include <doctest/doctest.h>

using namespace tributary;
using namespace tributary::test;
using store::RunMode;
using store::RunStatus;

namespace {

rs::Timestamp now_plus(std::chrono::seconds s) {
  return std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now()) + s;
}

} // namespace

TEST_CASE("Clocks: a Source a day ahead, then put right: every change applied, the clock flagged, nothing skipped") {
  Upstream up;
  Site site(up);
  site.put_numbered(4);
  const auto start = now_plus(-std::chrono::hours(1));
  site.publish_start(start);
  SyncEnv env;
  auto src = SyncEnv::source(up.url("/"));
  REQUIRE(env.run(src, RunMode::incremental).status == RunStatus::succeeded);

  // The Source's clock is a day ahead.
  const auto ahead = now_plus(std::chrono::hours(24));
  site.put("/res/new.txt", "new");
  site.put("/res/1.txt", "one, changed");
  std::vector<rs::Entry> changes{
      change_entry(up.url("/res/new.txt"), rs::Change::created, ahead, "new"),
      change_entry(up.url("/res/1.txt"), rs::Change::updated, ahead + std::chrono::seconds(1), "one, changed")};
  site.publish_change_list("/cl.xml", start, std::nullopt, changes);
  auto r = env.run(src, RunMode::incremental);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(r.counters.created == 1);
  CHECK(r.counters.updated == 1);
  REQUIRE(r.clock_ahead_seconds);
  CHECK(*r.clock_ahead_seconds > 86000);
  CHECK(has_note(r, "the Source's clock is ahead"));
  {
    // The watermark did not move into the future.
    pqxx::connection c(env.db.conninfo());
    pqxx::read_transaction tx(c);
    CHECK(tx.exec1("SELECT max(last_time) <= now() FROM watermark")[0].as<bool>());
    CHECK(tx.exec1("SELECT clock_ahead_seconds > 86000 FROM source")[0].as<bool>());
  }

  // Put right: its next changes are dated now, appended after the future
  // ones (out of order).
  site.put("/res/later.txt", "later");
  site.put("/res/2.txt", "two, changed");
  site.erase("/res/3.txt");
  const auto right = now_plus(std::chrono::seconds(0));
  changes.push_back(change_entry(up.url("/res/later.txt"), rs::Change::created, right, "later"));
  changes.push_back(change_entry(up.url("/res/2.txt"), rs::Change::updated, right + std::chrono::milliseconds(1), "two, changed"));
  changes.push_back(change_entry(up.url("/res/3.txt"), rs::Change::deleted, right + std::chrono::milliseconds(2)));
  site.publish_change_list("/cl.xml", start, std::nullopt, changes);
  auto fixed = env.run(src, RunMode::incremental);
  CHECK(fixed.status == RunStatus::succeeded);
  CHECK(has_note(fixed, "changes listed out of time order, applied sorted by time"));
  CHECK(fixed.counters.created == 1);
  CHECK(fixed.counters.updated == 1);
  CHECK(fixed.counters.deleted == 1);
  CHECK(env.live() == expected_live(site));
  CHECK(env.deleted() == std::set<std::string>{up.url("/res/3.txt")});

  // A repair (a baseline from the Resource List, written by the clock now
  // right) leaves a watermark the next real change passes.
  site.publish_resource_list(now_plus(std::chrono::seconds(0)));
  REQUIRE(env.run(src, RunMode::baseline).status == RunStatus::succeeded);
  site.put("/res/0.txt", "zero, changed");
  changes.push_back(change_entry(up.url("/res/0.txt"), rs::Change::updated, now_plus(std::chrono::seconds(1)),
                                 "zero, changed"));
  site.publish_change_list("/cl.xml", start, std::nullopt, changes);
  auto after = env.run(src, RunMode::incremental);
  CHECK(after.status == RunStatus::succeeded);
  CHECK(env.live() == expected_live(site));
  // Each change logged once, however often the future-dated ones were read.
  auto log = env.log();
  for (const std::string& line : {"created " + up.url("/res/new.txt"), "updated " + up.url("/res/1.txt"),
                                 "created " + up.url("/res/later.txt"), "updated " + up.url("/res/2.txt"),
                                 "deleted " + up.url("/res/3.txt"), "updated " + up.url("/res/0.txt")}) {
    CAPTURE(line);
    CHECK(std::count(log.begin(), log.end(), line) == 1);
  }
}

TEST_CASE("Clocks: a Change List out of time order is applied sorted, with a note, not refused") {
  Upstream up;
  Site site(up);
  site.put_numbered(2);
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  SyncEnv env;
  auto src = SyncEnv::source(up.url("/"));
  REQUIRE(env.run(src, RunMode::incremental).status == RunStatus::succeeded);
  site.put("/res/a.txt", "a2");
  site.put("/res/b.txt", "b");
  // a created at 1, b created at 3, a updated at 2: listed 1, 3, 2.
  site.publish_change_list("/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt,
                           {change_entry(up.url("/res/a.txt"), rs::Change::created, ts("2026-01-02T00:00:01Z"), "a1"),
                            change_entry(up.url("/res/b.txt"), rs::Change::created, ts("2026-01-02T00:00:03Z"), "b"),
                            change_entry(up.url("/res/a.txt"), rs::Change::updated, ts("2026-01-02T00:00:02Z"), "a2")});
  auto r = env.run(src, RunMode::incremental);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(has_note(r, "applied sorted by time"));
  CHECK(env.live() == expected_live(site));
  auto log = env.log();
  REQUIRE(log.size() >= 3);
  CHECK(log[log.size() - 3] == "created " + up.url("/res/a.txt"));
  CHECK(log[log.size() - 2] == "updated " + up.url("/res/a.txt"));
  CHECK(log[log.size() - 1] == "created " + up.url("/res/b.txt"));
}

// The history we publish is exact (#49): an operator's baseline, audit,
// repair and another baseline while a Source changes, with a second
// Tributary following ours throughout. Our Change Lists must log every
// upstream change after our first entry for a URI once, in order; our copy
// and the follower's must equal the Source by bytes; `check-history` must
// pass on both.
#include "daemon_client.h"
#include "history_fixture.h"
#include "http_get.h"
#include "process.h"
#include "sync_fixture.h"

#include "resourcesync/reader.h"
#include "tools/simulate/simulate.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <thread>

using namespace tributary;
using namespace tributary::test;

namespace {

// md5 of every live resource the Source lists, sorted (the bytes, whatever
// the URIs they are served under).
std::vector<std::string> source_md5s(const std::string& base) {
  std::vector<std::string> out;
  for (const auto& e : entries_of(base + "/resourcelist.xml")) {
    out.push_back(e.md->hash[0].hex);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> held_md5s(const TestDaemon& d) {
  std::vector<std::string> out;
  pqxx::connection c(d.db.conninfo());
  pqxx::read_transaction tx(c);
  for (const auto& row : tx.exec("SELECT md5 FROM resource WHERE state = 'live'")) {
    out.push_back(row[0].is_null() ? "-" : row[0].as<std::string>());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Whether the daemon's copy equals the Source's now (waits up to `seconds`).
bool converges(const TestDaemon& d, const std::string& source_base, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (held_md5s(d) == source_md5s(source_base)) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return false;
}

// A simulated Source changing at `rate` a second, `changes` times in all.
std::unique_ptr<agg::Simulator> changing_source(uint64_t resources, double rate, uint64_t changes, uint64_t seed,
                                                size_t size, size_t part) {
  agg::SimulateOptions o;
  o.port = 0;
  o.resources = resources;
  o.change_rate = rate;
  o.max_changes = changes;
  o.seed = seed;
  o.size = size;
  o.part_size = part;
  auto sim = std::make_unique<agg::Simulator>(o);
  REQUIRE(sim->start());
  return sim;
}

// Waits until `sim` made all its changes (at most a minute).
void wait_quiet(agg::Simulator& sim, uint64_t changes) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (sim.changes() < changes && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  REQUIRE(sim.changes() >= changes);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100)); // the simulator re-renders its list
}

} // namespace

TEST_CASE("History: baseline, audit, CLI repair and baseline while the Source changes at 20/s, a follower "
          "throughout: every change after a URI's first entry logged once and in order, both copies equal") {
  const uint64_t changes = 500; // 25 s
  auto sim = changing_source(400, 20, changes, 49, 128, 100);
  const std::string sim_base = sim->base_url();

  TestDaemon a({{"sim", sim_base + "/"}});
  a.start();
  TestDaemon b({{"agg", a.base + "/"}});
  b.start();
  const auto started = std::chrono::steady_clock::now();
  auto at = [&](int seconds) { std::this_thread::sleep_until(started + std::chrono::seconds(seconds)); };
  at(4);
  CHECK(call(a.base, "POST", "/api/v1/sources/sim/sync", k_admin, R"({"mode":"baseline"})").status == 202);
  at(8);
  CHECK(call(a.base, "POST", "/api/v1/sources/sim/audit", k_admin, "").status == 202);
  at(12);
  const Run repair = run_tributary("sync --config " + a.cfg + " --source sim --audit --repair --wait");
  INFO(repair.out);
  at(16);
  CHECK(call(a.base, "POST", "/api/v1/sources/sim/sync", k_admin, R"({"mode":"baseline"})").status == 202);
  wait_quiet(*sim, changes);
  INFO(a.log_text());
  REQUIRE(converges(a, sim_base, 30));
  INFO(b.log_text());
  CHECK(converges(b, sim_base, 30));

  // Per URI, after our first entry: exactly the Source's changes, in order.
  const std::string exact = log_against_source(a.db.conninfo(), entries_of(sim_base + "/changelist.xml"));
  CHECK_MESSAGE(exact.empty(), exact);
  CHECK(scalar(a, "SELECT count(*) FROM (SELECT uri, change, upstream_datetime FROM change_log "
                  "WHERE upstream_datetime IS NOT NULL GROUP BY 1, 2, 3 HAVING count(*) > 1) d") == "0");
  const Run check_a = run_tributary("check-history --config " + a.cfg);
  INFO(check_a.out);
  CHECK(check_a.status == 0);
  const Run check_b = run_tributary("check-history --config " + b.cfg);
  INFO(check_b.out);
  CHECK(check_b.status == 0);
  a.stop();
  b.stop();
}

TEST_CASE("History: five SIGKILLs during incrementals at 200 changes/s: every change after a URI's first entry is "
          "logged once, in order") {
  const uint64_t changes = 3000; // 15 s
  auto sim = changing_source(300, 200, changes, 4949, 64, 500);
  const std::string sim_base = sim->base_url();
  TestDaemon a({{"sim", sim_base + "/"}});
  a.start();
  // A kill whenever an incremental run is under way, five times.
  int kills = 0;
  const auto started = std::chrono::steady_clock::now();
  while (kills < 5 && std::chrono::steady_clock::now() - started < std::chrono::seconds(40)) {
    const bool running =
        scalar(a, "SELECT count(*) FROM sync_run WHERE status = 'running' AND mode = 'incremental'") != "0" &&
        scalar(a, "SELECT count(*) FROM sync_run WHERE status = 'succeeded' AND mode = 'incremental'") != "0";
    if (!running) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(kills * 7 % 20)));
    kill(a.pid, SIGKILL);
    waitpid(a.pid, nullptr, 0);
    ++kills;
    a.start();
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  }
  CHECK(kills == 5);
  wait_quiet(*sim, changes);
  INFO(a.log_text());
  REQUIRE(converges(a, sim_base, 30));
  const std::vector<rs::Entry> upstream = entries_of(sim_base + "/changelist.xml");
  CHECK(upstream.size() == changes);
  const std::string exact = log_against_source(a.db.conninfo(), upstream);
  CHECK_MESSAGE(exact.empty(), exact);
  const Run check = run_tributary("check-history --config " + a.cfg);
  INFO(check.out);
  CHECK(check.status == 0);
  a.stop();
}

TEST_CASE("History: check-history finds what older versions logged wrong (an old change again, a change twice, a "
          "deleted resource created again), and --repair makes a follower converge") {
  Upstream up;
  Site site(up);
  site.put("/res/a.txt", "alpha");
  site.put("/res/b.txt", "bravo");
  site.put("/res/c.txt", "charlie");
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  TestDaemon a({{"up", up.url("/")}});
  a.start();
  REQUIRE(wait_for(a.base, [](const json& st) { return in_sync(st, "up", 3); }, 20));
  site.put("/res/a.txt", "alpha v2");
  site.erase("/res/c.txt");
  site.publish_change_list("/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt,
                           {change_entry(up.url("/res/a.txt"), rs::Change::updated, ts("2026-01-02T00:00:00Z"),
                                         "alpha v2"),
                            change_entry(up.url("/res/c.txt"), rs::Change::deleted, ts("2026-01-02T00:00:01Z"))});
  REQUIRE(wait_for(a.base, [](const json& st) { return in_sync(st, "up", 2); }, 20));
  TestDaemon b({{"agg", a.base + "/"}});
  b.start();
  REQUIRE(wait_for(b.base, [](const json& st) { return in_sync(st, "agg", 2); }, 20));
  REQUIRE(run_tributary("check-history --config " + a.cfg).status == 0);

  // What a version before the rule could log: a's update twice, then its
  // old state again; c created again after its deletion.
  {
    pqxx::connection c(a.db.conninfo());
    pqxx::work tx(c);
    const std::string cols = "feed_id, uri, change, upstream_datetime, lastmod, length, md5, sha1, sha256, type, "
                             "encoding, links, blob_sha256";
    const std::string copied = "feed_id, uri, 'updated', upstream_datetime, lastmod, length, md5, sha1, sha256, "
                               "type, encoding, links, blob_sha256";
    tx.exec("INSERT INTO change_log (" + cols + ") SELECT " + cols +
            " FROM change_log WHERE uri LIKE '%/a.txt' AND change = 'updated'");
    tx.exec("INSERT INTO change_log (" + cols + ") SELECT " + copied +
            " FROM change_log WHERE uri LIKE '%/a.txt' AND change = 'created'");
    tx.exec("INSERT INTO change_log (" + cols + ") SELECT " + cols +
            " FROM change_log WHERE uri LIKE '%/c.txt' AND change = 'created'");
    tx.exec("NOTIFY tributary_changes");
    tx.commit();
  }
  const Run found = run_tributary("check-history --config " + a.cfg);
  INFO(found.out);
  CHECK(found.status == 1);
  CHECK(found.out.find("1 logged twice") != std::string::npos);
  CHECK(found.out.find("2 whose last entry is not what we hold") != std::string::npos);
  CHECK(found.out.find("/res/a.txt: updated at 2026-01-02T00:00:00Z logged again") != std::string::npos);
  CHECK(found.out.find("/res/a.txt: the last entry (updated at (no time)) names sha-256") != std::string::npos);
  CHECK(found.out.find("/res/c.txt: the last entry (created at") != std::string::npos);
  // The follower reads them: a's entry names bytes we no longer serve, and
  // c's a resource we no longer hold.
  CHECK(eventually([&] { return scalar(b, "SELECT count(*) FROM retry") != "0"; }, 15));
  // It says which, and why: we list a state we no longer serve.
  bool told = false;
  CHECK(eventually([&] {
    const json d = json::parse(call(b.base, "GET", "/api/v1/sources/agg/detail").body, nullptr, false);
    if (d.is_discarded() || !d.contains("data")) {
      return false;
    }
    for (const auto& r : d["data"]["retrying"]["resources"]) {
      told = told || (r["uri"].get<std::string>().find("a.txt") != std::string::npos && r["why"].is_string() &&
                      r["why"].get<std::string>().find("no longer serves") != std::string::npos);
    }
    return told;
  }, 15));
  INFO(call(b.base, "GET", "/api/v1/sources/agg/detail").body);
  CHECK(told);

  const Run repaired = run_tributary("check-history --config " + a.cfg + " --repair");
  INFO(repaired.out);
  CHECK(repaired.status == 0);
  CHECK(repaired.out.find("appended 2 corrective changes") != std::string::npos);
  CHECK(repaired.out.find("after repair, 0 URIs disagree") != std::string::npos);
  // Nothing in the past was rewritten: the entry logged twice is still there.
  CHECK(run_tributary("check-history --config " + a.cfg).status == 1);
  // The follower converges on what we hold, its retries superseded.
  auto live_md5 = [](const TestDaemon& d) {
    std::vector<std::string> out;
    pqxx::connection c(d.db.conninfo());
    pqxx::read_transaction tx(c);
    for (const auto& row : tx.exec("SELECT md5 FROM resource WHERE state = 'live' ORDER BY md5")) {
      out.push_back(row[0].as<std::string>());
    }
    return out;
  };
  CHECK(eventually([&] { return live_md5(b) == live_md5(a) && scalar(b, "SELECT count(*) FROM retry") == "0"; }, 20));
  const Run theirs = run_tributary("check-history --config " + b.cfg);
  INFO(theirs.out);
  CHECK(theirs.status == 0);
}

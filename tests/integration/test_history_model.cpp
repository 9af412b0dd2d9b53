// The randomized history test (#49): a model Source changes at random
// (create, update, delete, two updates within a millisecond, delete then
// re-create) while, at random points, we run incrementals, baselines from a
// Resource List that may be stale, audits, repairs, runs killed between
// batches, PostgreSQL restarts (every connection cut mid-run), and resources
// fail for a while; a second Tributary follows ours
// through our republished documents throughout. At the end: ours and the
// follower's copies equal the Source by bytes, `check_history` passes on
// both, and each URI's log after its first entry is the Source's changes of
// it, in order.
//
// Seeded: TRIBUTARY_HISTORY_SEEDS seeds (default 20) from
// TRIBUTARY_HISTORY_SEED (default 1); a failure names its seed, and
// TRIBUTARY_HISTORY_SEED=<it> TRIBUTARY_HISTORY_SEEDS=1 replays it.
// `bench/run.sh history` runs 500.
#include "history_fixture.h"
#include "http_get.h"
#include "process.h"
#include "sync_fixture.h"

#include "republisher/server.h"
#include "store/history_check.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <random>
#include <thread>

using namespace tributary;
using namespace tributary::test;
using store::RunMode;

namespace {

uint64_t env_number(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

// The model Source: what it serves, every change it made, and the Resource
// List snapshots it publishes now and then (a baseline may read a stale one).
struct ModelSource {
  Upstream up;
  Site site{up};
  rs::Timestamp clock = ts("2026-01-01T00:00:00Z");
  rs::Timestamp start = clock;
  std::vector<rs::Entry> changes;
  std::map<std::string, rs::Timestamp> lastmod; // path -> its last change
  std::map<std::string, int> failing;           // path -> steps it still fails
  int version = 0;

  std::string bytes_for(const std::string& path) { return path + " v" + std::to_string(++version); }

  std::string trace; // what happened, for a failure's message
  void write(const std::string& path, rs::Change kind) {
    trace += "  " + path + " " + std::string(rs::to_string(kind)) + " at " + rs::format_w3c_datetime(clock) + "\n";
    if (kind == rs::Change::deleted) {
      site.erase(path);
      changes.push_back(change_entry(up.url(path), kind, clock));
    } else {
      const std::string b = bytes_for(path);
      site.put(path, b);
      changes.push_back(change_entry(up.url(path), kind, clock, b));
    }
    lastmod[path] = clock;
    if (failing.count(path) && kind != rs::Change::deleted) {
      up.set(path, Served{404, "gone for a while", "text/plain", {}});
    }
  }

  void publish_changes() { site.publish_change_list("/cl.xml", start, std::nullopt, changes); }

  void publish_snapshot() {
    trace += "  snapshot at " + rs::format_w3c_datetime(clock) + "\n";
    rs::Document rl;
    rl.header.root = rs::RootElement::urlset;
    rl.header.md = rs::Metadata{};
    rl.header.md->capability = "resourcelist";
    rl.header.md->at = clock;
    rl.header.links.push_back(rs::Link{.rel = "up", .href = up.url("/caps.xml")});
    for (const auto& [path, bytes] : site.content) {
      rl.entries.push_back(resource_entry(up.url(path), bytes, lastmod[path]));
    }
    up.set_document("/rl.xml", rl);
  }

  // Mends what failed for a while, and serves it again.
  void tick_failures(bool all) {
    for (auto it = failing.begin(); it != failing.end();) {
      if (all || --it->second <= 0) {
        if (site.content.count(it->first)) {
          up.set(it->first, site.content[it->first], "text/plain");
        }
        it = failing.erase(it);
      } else {
        ++it;
      }
    }
  }
};

// Our side or the follower's: a store and engine, and what they hold.
struct Node {
  SyncEnv env;
  sync::SourceConfig src;

  // Every connection our store holds, cut as a PostgreSQL restart cuts them.
  void cut_connections() {
    pqxx::connection c(env.db.conninfo());
    pqxx::nontransaction tx(c);
    tx.exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()");
  }

  // `kill_after`: stopped once that many are done, as a kill leaves it;
  // `cut_after`: the database's connections cut once that many are done,
  // and the run goes on as far as it can.
  sync::SourceReport run(RunMode mode, bool repair, size_t batch, uint64_t kill_after, uint64_t cut_after = 0) {
    sync::RunOptions o;
    o.mode = mode;
    o.repair = repair;
    o.batch_size = batch;
    o.refetch_backoff = std::chrono::seconds(0);
    o.retry.max_attempts = 1;
    std::atomic<bool> cancel{false};
    bool cut = false;
    if (kill_after > 0 || cut_after > 0) {
      o.cancel = &cancel;
      o.on_progress = [&](const sync::Progress& p) {
        if (kill_after > 0 && p.done >= kill_after) {
          cancel = true; // stopped between batches, as a kill leaves it
        }
        if (cut_after > 0 && !cut && p.done >= cut_after) {
          cut = true;
          cut_connections();
        }
      };
    }
    return env.engine->run(src, o);
  }

  std::vector<std::string> live_bytes() {
    std::vector<std::string> out;
    for (const auto& [uri, bytes] : env.live()) {
      out.push_back(bytes);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  store::HistoryReport check() {
    auto feeds = env.store->feeds();
    REQUIRE(feeds);
    std::vector<int64_t> ids;
    for (const auto& f : *feeds) {
      ids.push_back(f.feed_id);
    }
    auto checked = store::check_history(*env.store, ids, false);
    REQUIRE(checked);
    return checked->report;
  }
};

std::string describe(const store::HistoryReport& r) {
  std::string out = std::to_string(r.repeated) + " twice, " + std::to_string(r.backwards) + " backwards, " +
                    std::to_string(r.disagreeing) + " disagreeing";
  for (const auto& p : r.first) {
    out += "\n  " + p.uri + ": " + p.what;
  }
  return out;
}

// Waits until our republished Change Lists name as many changes as our log.
void wait_published(SyncEnv& env, pub::Republisher& server, const std::string& base) {
  server.refresh_soon();
  size_t want = 0;
  {
    pqxx::connection c(env.db.conninfo());
    pqxx::read_transaction tx(c);
    want = tx.exec1("SELECT count(*) FROM change_log")[0].as<size_t>();
  }
  for (int i = 0; i < 250; ++i) {
    // The open list, and the closed parts its index names.
    Got open = http_get(base + "/sets/up/changelist.xml");
    Got index = http_get(base + "/sets/up/changelist-index.xml");
    size_t published = 0;
    if (open.status == 200) {
      published += rs::parse_document(open.body).document.entries.size();
    }
    if (index.status == 200) {
      published += entries_of(base + "/sets/up/changelist-index.xml").size();
    }
    if (published >= want) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Got g = http_get(base + "/sets/up/changelist.xml");
  FAIL("our Change Lists did not catch up with our log (" << want << " entries): " << g.status << " "
                                                          << g.body.substr(0, 2000));
}

// Our change log with the time each entry was written, for a replay's trace.
std::string log_rows(const std::string& conninfo) {
  pqxx::connection c(conninfo);
  pqxx::read_transaction tx(c);
  std::string out = "our log:\n";
  for (const auto& row : tx.exec("SELECT seq, uri, change, upstream_datetime, coalesce(md5, '-'), recorded_at "
                                 "FROM change_log ORDER BY seq")) {
    out += "  " + row[0].as<std::string>() + " " + row[1].as<std::string>() + " " + row[2].as<std::string>() +
           " @" + row[3].as<std::string>("") + " " + row[4].as<std::string>().substr(0, 7) + " written " +
           row[5].as<std::string>() + "\n";
  }
  return out;
}

void one_seed(uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto chance = [&](double p) { return std::uniform_real_distribution<>(0, 1)(rng) < p; };
  auto pick = [&](size_t n) { return static_cast<size_t>(std::uniform_int_distribution<size_t>(0, n - 1)(rng)); };

  ModelSource source;
  std::vector<std::string> paths;
  for (int i = 0; i < 40; ++i) {
    paths.push_back("/r/" + std::to_string(i) + ".txt");
  }
  for (int i = 0; i < 25; ++i) {
    source.write(paths[static_cast<size_t>(i)], rs::Change::created);
    source.clock += std::chrono::seconds(1);
  }
  source.publish_changes();
  source.publish_snapshot();

  Node ours;
  ours.src = SyncEnv::source(source.up.url("/"), "up");
  // Our republished documents, which the follower reads.
  pub::PublishOptions po;
  const int port = free_port();
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  po.public_url = base + "/";
  po.change_list_part = 20;
  po.document_dir = ours.env.data / "documents";
  po.poll_interval = std::chrono::milliseconds(50);
  auto server = std::make_unique<pub::Republisher>(ours.env.store, ours.env.blobs, po);
  REQUIRE(ours.run(RunMode::incremental, false, 10, 0).status != store::RunStatus::running);
  REQUIRE(server->start());
  http::ServerOptions so;
  so.port = port;
  auto http = std::make_unique<http::Server>(so, server->handler());
  REQUIRE(http->start());
  Node follower;
  follower.src = SyncEnv::source(base + "/", "agg");

  const int steps = 40;
  for (int step = 0; step < steps; ++step) {
    // The Source changes.
    const int n = 1 + static_cast<int>(pick(4));
    for (int k = 0; k < n; ++k) {
      const std::string& path = paths[pick(paths.size())];
      const bool live = source.site.content.count(path) > 0;
      const size_t what = pick(5);
      source.clock += std::chrono::seconds(1 + static_cast<int>(pick(3)));
      if (!live) {
        source.write(path, rs::Change::created);
      } else if (what == 0) {
        source.write(path, rs::Change::deleted);
      } else if (what == 1) { // two updates within a millisecond
        source.write(path, rs::Change::updated);
        source.clock += std::chrono::microseconds(1000);
        source.write(path, rs::Change::updated);
      } else if (what == 2) { // deleted, then created again
        source.write(path, rs::Change::deleted);
        source.clock += std::chrono::seconds(1);
        source.write(path, rs::Change::created);
      } else {
        source.write(path, rs::Change::updated);
      }
      if (chance(0.08) && source.site.content.count(path)) {
        source.failing[path] = 1 + static_cast<int>(pick(4)); // fails for a while
        source.trace += "  " + path + " fails for " + std::to_string(source.failing[path]) + " steps\n";
        source.up.set(path, Served{404, "gone for a while", "text/plain", {}});
      }
    }
    source.publish_changes();
    if (chance(0.4)) {
      source.publish_snapshot(); // else a baseline reads a stale one
    }
    // We act.
    const size_t batch = 2 + pick(9);
    const double r = std::uniform_real_distribution<>(0, 1)(rng);
    source.trace += "step " + std::to_string(step) + ": action " + std::to_string(r) + " batch " +
                    std::to_string(batch) + " at " +
                    rs::format_w3c_datetime(std::chrono::time_point_cast<std::chrono::microseconds>(
                        std::chrono::system_clock::now())) +
                    "\n";
    if (r < 0.5) {
      ours.run(RunMode::incremental, false, batch, 0);
    } else if (r < 0.58) {
      ours.run(RunMode::incremental, false, batch, 1 + pick(20)); // killed between batches
    } else if (r < 0.62) {
      // PostgreSQL restarts under an incremental or a baseline: every
      // connection cut between two batches; the run fails where it stands.
      const auto report =
          ours.run(chance(0.5) ? RunMode::incremental : RunMode::baseline, false, batch, 0, 1 + pick(20));
      source.trace += "  connections cut: the run ended " + std::string(store::to_string(report.status)) +
                      (report.errors.empty() ? "" : ": " + report.errors.front()) + "\n";
    } else if (r < 0.72) {
      ours.run(RunMode::baseline, false, batch, 0);
    } else if (r < 0.77) {
      ours.run(RunMode::baseline, false, batch, 1 + pick(20));
    } else if (r < 0.84) {
      ours.run(RunMode::audit, false, batch, 0);
    } else {
      ours.run(RunMode::audit, true, batch, 0);
    }
    if (chance(0.3)) {
      wait_published(ours.env, *server, base);
      follower.run(RunMode::incremental, false, 2 + pick(9), chance(0.2) ? 1 + pick(10) : 0);
    }
    source.tick_failures(false);
  }
  // Quiet: nothing fails any more; each side catches up.
  source.tick_failures(true);
  source.clock += std::chrono::seconds(1);
  source.publish_snapshot();
  ours.run(RunMode::incremental, false, 10, 0);
  ours.run(RunMode::incremental, false, 10, 0); // the retries now due
  CHECK_MESSAGE(ours.env.live() == expected_live(source.site), "seed " << seed << ": our copy differs");
  const store::HistoryReport ours_report = ours.check();
  CHECK_MESSAGE(ours_report.ok(), "seed " << seed << ": check-history on ours: " << describe(ours_report));
  const std::string exact = log_against_source(ours.env.db.conninfo(), source.changes);
  CHECK_MESSAGE(exact.empty(), "seed " << seed << ": " << exact
                                       << (std::getenv("TRIBUTARY_HISTORY_TRACE")
                                               ? "\n" + source.trace + log_rows(ours.env.db.conninfo())
                                               : ""));
  wait_published(ours.env, *server, base);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  follower.run(RunMode::incremental, false, 10, 0);
  follower.run(RunMode::incremental, false, 10, 0);
  std::vector<std::string> want;
  for (const auto& [path, bytes] : source.site.content) {
    want.push_back(bytes);
  }
  std::sort(want.begin(), want.end());
  CHECK_MESSAGE(follower.live_bytes() == want, "seed " << seed << ": the follower's copy differs");
  const store::HistoryReport theirs = follower.check();
  CHECK_MESSAGE(theirs.ok(), "seed " << seed << ": check-history on the follower: " << describe(theirs));
  http->stop();
  server->stop();
}

} // namespace

TEST_CASE("History randomized: a model Source, baselines, audits, repairs, kills, PostgreSQL restarts and failing "
          "resources, a follower "
          "throughout: both copies equal the Source and the history holds, seed by seed") {
  const uint64_t first = env_number("TRIBUTARY_HISTORY_SEED", 1);
  const uint64_t count = env_number("TRIBUTARY_HISTORY_SEEDS", 20);
  for (uint64_t seed = first; seed < first + count; ++seed) {
    INFO("seed " << seed << " (replay: TRIBUTARY_HISTORY_SEED=" << seed << " TRIBUTARY_HISTORY_SEEDS=1)");
    one_seed(seed);
  }
  // Seeds that once failed, replayed in every run (274 and 401: a
  // baseline's window started at an earlier baseline's time; 359: a
  // deletion left unapplied when the change after it failed).
  for (const uint64_t seed : {uint64_t{274}, uint64_t{401}, uint64_t{359}}) {
    if (!std::getenv("TRIBUTARY_HISTORY_SEED") && (seed < first || seed >= first + count)) {
      INFO("regression seed " << seed);
      one_seed(seed);
    }
  }
  MESSAGE(count << " seeds from " << first);
}

// Issue #13, "never lose or repeat a change": each defect found in review
// has its reproduction here, against the real PostgreSQL and real HTTP.
#include "daemon_client.h"
#include "process.h"
#include "sync_fixture.h"

#include "republisher/change_lists.h"
#include "republisher/documents.h"
#include "resourcesync/reader.h"
#include "resourcesync/writer.h"

#include <algorithm>
#include <fstream>
#include <future>
#include <set>

using namespace tributary;
using namespace tributary::test;
using store::RunMode;
using store::RunStatus;

namespace {

// The length we hold for `uri`, or -1 when there is none.
long long held_length(SyncEnv& env, const std::string& uri) {
  pqxx::connection c(env.db.conninfo());
  pqxx::read_transaction tx(c);
  auto r = tx.exec_params("SELECT length FROM resource WHERE uri = $1", uri);
  return r.empty() || r[0][0].is_null() ? -1 : r[0][0].as<long long>();
}

// One change of `uri` in feed `feed`, with the watermark it reaches.
store::Batch one_change(int64_t feed, const std::string& uri, const char* when) {
  store::Batch b;
  b.feed_id = feed;
  store::ResourceRecord r;
  r.uri = uri;
  r.length = 1;
  b.upserts.push_back(r);
  b.changes.push_back(store::ChangeRecord{rs::Change::created, ts(when), r});
  store::Watermark w;
  w.last_time = ts(when);
  w.last_uri = uri;
  w.last_position = 0;
  b.watermark = w;
  return b;
}

// The original URI of every entry of the set's Change List parts (the index excluded).
std::set<std::string> published(const std::vector<rs::WrittenPart>& parts, std::set<std::string> seen = {}) {
  for (const auto& p : parts) {
    auto doc = rs::parse_document(p.xml);
    if (doc.document.header.root != rs::RootElement::urlset) {
      continue;
    }
    for (const auto& e : doc.document.entries) {
      for (const auto& l : e.links) {
        if (l.rel == "via") {
          seen.insert(l.href); // the original URI (loc is our copy's)
        }
      }
    }
  }
  return seen;
}

// Whether some session of this database waits for a lock.
bool someone_waits(const std::string& conninfo) {
  pqxx::connection c(conninfo);
  pqxx::read_transaction tx(c);
  return tx.exec1("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                  "AND wait_event_type = 'Lock'")[0]
             .as<int>() > 0;
}

} // namespace

TEST_CASE("Never lose: a change that commits after later-numbered ones is still published, in order") {
  TempDatabase db;
  REQUIRE(store::migrate(db.conninfo()));
  auto a_store = store::PgStore::open(db.conninfo());
  auto b_store = store::PgStore::open(db.conninfo());
  auto reader = store::PgStore::open(db.conninfo()); // the republisher's
  REQUIRE(a_store);
  REQUIRE(b_store);
  REQUIRE(reader);
  auto& a = **a_store;
  auto& b = **b_store;
  const int64_t src_a = *a.ensure_source("a", "http://a.example/");
  const int64_t src_b = *a.ensure_source("b", "http://b.example/");
  const int64_t feed_a = *a.ensure_feed(src_a, "http://a.example/caps.xml");
  const int64_t feed_b = *a.ensure_feed(src_b, "http://b.example/caps.xml");
  REQUIRE(a.apply(one_change(feed_a, "http://a.example/0", "2026-01-01T00:00:00Z")));

  // Source a's next batch is held up inside its transaction (here by a row
  // lock on its watermark; in life by a slow statement or a busy machine)
  // while source b commits two changes.
  pqxx::connection blocker(db.conninfo());
  pqxx::work hold(blocker);
  hold.exec_params("SELECT 1 FROM watermark WHERE feed_id = $1 FOR UPDATE", feed_a);
  auto late = std::async(std::launch::async,
                         [&] { return a.apply(one_change(feed_a, "http://a.example/1", "2026-01-01T00:00:01Z")); });
  for (int i = 0; i < 500 && !someone_waits(db.conninfo()); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(b.apply(one_change(feed_b, "http://b.example/0", "2026-01-01T00:00:02Z")));
  REQUIRE(b.apply(one_change(feed_b, "http://b.example/1", "2026-01-01T00:00:03Z")));

  // Rendered with parts of 2: the first part closes now.
  pub::UrlScheme urls("http://agg.example/");
  pub::PublishedSet set{"all", {feed_a, feed_b}};
  pub::ClosedParts closed;
  auto first = pub::render_change_list(**reader, urls, set, 2, &closed);
  REQUIRE(first);
  REQUIRE(closed.parts.size() == 1);

  hold.commit(); // a's batch goes on and commits
  REQUIRE(late.get());
  auto second = pub::render_change_list(**reader, urls, set, 2, &closed);
  REQUIRE(second);
  const auto all = published(*second, published(*first));
  CHECK(all.count("http://a.example/1") == 1);
  CHECK(all.size() == 4);

  // And the log's order is commit order: a's late change comes last.
  pqxx::connection c(db.conninfo());
  pqxx::read_transaction tx(c);
  CHECK(tx.exec1("SELECT uri FROM change_log ORDER BY seq DESC LIMIT 1")[0].as<std::string>() ==
        "http://a.example/1");
}

TEST_CASE("Never lose: a change naming content already held records the blob's own length, not the document's") {
  Upstream up;
  Site site(up);
  site.put("/res/a.txt", "shared bytes");
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  SyncEnv env;
  auto src = SyncEnv::source(up.url("/"));
  REQUIRE(env.run(src, RunMode::baseline).status == RunStatus::succeeded);

  // b holds the same bytes; its entry gives the sha-256 and no length (a
  // Source may omit it), and c a wrong length.
  site.put("/res/b.txt", "shared bytes");
  site.put("/res/c.txt", "shared bytes");
  const std::string sha = rs::hash_hex(rs::HashAlgorithm::sha256, "shared bytes");
  auto b = change_entry(up.url("/res/b.txt"), rs::Change::created, ts("2026-01-01T01:00:00Z"));
  b.md->hash = {{"sha-256", sha}};
  b.md->length.reset();
  auto c = change_entry(up.url("/res/c.txt"), rs::Change::created, ts("2026-01-01T01:00:01Z"));
  c.md->hash = {{"sha-256", sha}};
  c.md->length = 99;
  site.publish_change_list("/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt, {b, c});
  auto r = env.run(src, RunMode::incremental);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(up.requests("/res/b.txt") == 0); // held already: not fetched
  CHECK(held_length(env, up.url("/res/b.txt")) == 12);
  CHECK(held_length(env, up.url("/res/c.txt")) == 12);
  CHECK(env.live() == expected_live(site));
}

TEST_CASE("Never lose: a change a killed audit already stored and logged is not logged again by the incremental run") {
  Upstream up;
  Site site(up);
  site.put("/res/x.txt", "v0");
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  SyncEnv env;
  auto src = SyncEnv::source(up.url("/"));
  REQUIRE(env.run(src, RunMode::baseline).status == RunStatus::succeeded);
  const std::string x = up.url("/res/x.txt");
  // x changes at 01:00; an audit with --repair reads it from the Resource
  // List, stores and logs it as that change, and is killed before it ends,
  // so the watermark stays where it was: what its committed batch left.
  site.put("/res/x.txt", "v1");
  auto blob = env.blobs->put("v1", {rs::HashAlgorithm::md5});
  REQUIRE(blob);
  store::ResourceRecord r;
  r.uri = x;
  r.lastmod = r.change_datetime = ts("2026-01-01T01:00:00Z");
  r.length = blob->length;
  r.hashes = blob->hashes;
  r.blob_sha256 = blob->sha256;
  store::Batch audit_batch;
  audit_batch.feed_id = 1;
  audit_batch.upserts.push_back(r);
  audit_batch.changes.push_back(store::ChangeRecord{rs::Change::updated, r.change_datetime, r});
  REQUIRE(env.store->apply(audit_batch));
  // x changes again at 02:00; the Change List holds both changes, which
  // the next incremental run reads in one batch.
  site.put("/res/x.txt", "v2");
  site.publish_change_list("/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt,
                           {change_entry(x, rs::Change::updated, ts("2026-01-01T01:00:00Z"), "v1"),
                            change_entry(x, rs::Change::updated, ts("2026-01-01T02:00:00Z"), "v2")});
  REQUIRE(env.run(src, RunMode::incremental).status == RunStatus::succeeded);
  CHECK(env.live() == expected_live(site));
  // created (baseline), updated 01:00 (audit), updated 02:00 (incremental).
  CHECK(env.log() == std::vector<std::string>{"created " + x, "updated " + x, "updated " + x});
}

TEST_CASE("Never lose: a change that failed because its bytes were already replaced is logged once a later change comes") {
  // The crash matrix found these lost: the Source changes y at 01:00 and
  // again before we fetch, so the 01:00 change fails its hash and waits as
  // a retry; the later changes then fail in turn or apply.
  Upstream up;
  Site site(up);
  site.put("/res/a.txt", "a");
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  SyncEnv env;
  auto src = SyncEnv::source(up.url("/"));
  REQUIRE(env.run(src, RunMode::baseline).status == RunStatus::succeeded);
  const std::string y = up.url("/res/y.txt");
  std::vector<rs::Entry> changes{change_entry(y, rs::Change::created, ts("2026-01-01T01:00:00Z"), "v1")};
  auto publish = [&] { site.publish_change_list("/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt, changes); };

  site.put("/res/y.txt", "v3"); // already two changes further
  publish();
  CHECK(env.run(src, RunMode::incremental).counters.failed == 1);
  changes.push_back(change_entry(y, rs::Change::updated, ts("2026-01-01T02:00:00Z"), "v2"));
  publish();
  CHECK(env.run(src, RunMode::incremental).counters.failed == 1); // fails in turn
  changes.push_back(change_entry(y, rs::Change::updated, ts("2026-01-01T03:00:00Z"), "v3"));
  publish();
  CHECK(env.run(src, RunMode::incremental).status == RunStatus::succeeded);
  CHECK(env.live() == expected_live(site));
  CHECK(env.retries().empty());
  // Every change of y, once, in the Source's order.
  pqxx::connection c(env.db.conninfo());
  pqxx::read_transaction tx(c);
  std::vector<std::string> logged;
  for (const auto& row : tx.exec_params("SELECT change || ' ' || to_char(upstream_datetime AT TIME ZONE 'UTC', 'HH24:MI') "
                                        "FROM change_log WHERE uri = $1 ORDER BY seq", y)) {
    logged.push_back(row[0].as<std::string>());
  }
  CHECK(logged == std::vector<std::string>{"created 01:00", "updated 02:00", "updated 03:00"});
}

TEST_CASE("Never lose: a failed change is logged when the next change of its URI comes in the very next batch of the run") {
  // The batch that records the retry may still be committing while the
  // next one is prepared: the retry must be seen all the same.
  Upstream up;
  Site site(up);
  site.put("/res/a.txt", "a");
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  SyncEnv env;
  auto src = SyncEnv::source(up.url("/"));
  REQUIRE(env.run(src, RunMode::baseline).status == RunStatus::succeeded);
  const std::string y = up.url("/res/y.txt");
  std::vector<rs::Entry> changes;
  for (int i = 0; i < 49; ++i) { // the run's batches are of 50
    const std::string path = "/res/f" + std::to_string(i) + ".txt";
    site.put(path, "f" + std::to_string(i));
    changes.push_back(change_entry(up.url(path), rs::Change::created,
                                   ts("2026-01-01T00:30:00Z") + std::chrono::seconds(i), "f" + std::to_string(i)));
  }
  changes.push_back(change_entry(y, rs::Change::updated, ts("2026-01-01T01:00:00Z"), "v1")); // gone already: 404
  changes.push_back(change_entry(y, rs::Change::deleted, ts("2026-01-01T01:00:01Z")));
  site.publish_change_list("/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt, changes);
  auto r = env.run(src, RunMode::incremental);
  CHECK(r.counters.failed == 1);
  CHECK(env.retries().empty());
  auto log = env.log();
  CHECK(std::count(log.begin(), log.end(), "updated " + y) == 1);
  CHECK(std::count(log.begin(), log.end(), "deleted " + y) == 1);
}

TEST_CASE("Never lose: a newest-first Change List Index without 'from' is applied oldest first") {
  Upstream up;
  Site site(up);
  site.put("/res/a.txt", "a0");
  site.put("/res/b.txt", "b0");
  site.publish_resource_list(ts("2026-01-01T00:00:00Z"));
  SyncEnv env;
  auto src = SyncEnv::source(up.url("/"));
  REQUIRE(env.run(src, RunMode::baseline).status == RunStatus::succeeded);

  // Day 1: b updated; day 2: a updated. The index names day 2 first and
  // gives no 'from' for either part (nor do the parts themselves).
  site.put("/res/b.txt", "b1");
  site.put("/res/a.txt", "a1");
  site.publish_change_list("/day1.xml", std::nullopt, std::nullopt,
                           {change_entry(up.url("/res/b.txt"), rs::Change::updated, ts("2026-01-01T12:00:00Z"), "b1")});
  site.publish_change_list("/day2.xml", std::nullopt, std::nullopt,
                           {change_entry(up.url("/res/a.txt"), rs::Change::updated, ts("2026-01-02T12:00:00Z"), "a1")});
  rs::Document index = make_doc("changelist", rs::RootElement::sitemapindex);
  index.entries.push_back(rs::Entry{.loc = up.url("/day2.xml")});
  index.entries.push_back(rs::Entry{.loc = up.url("/day1.xml")});
  up.set_document("/cl.xml", index);

  auto r = env.run(src, RunMode::incremental);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(r.counters.updated == 2);
  CHECK(env.live() == expected_live(site));
  CHECK(up.requests("/day1.xml") == 1); // fetched once: to place it, then applied from that copy
  auto wm = env.store->watermark(1);
  REQUIRE(wm);
  CHECK(wm->last_time == ts("2026-01-02T12:00:00Z"));
}

TEST_CASE("Never lose: two runs of one source at once are one after the other, never interleaved") {
  // Two baselines at once: the first to finish deleted every resource the
  // other had seen (and logged the deletions for followers to apply).
  Upstream up;
  Site site(up);
  site.put_numbered(60);
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  up.set_delay(std::chrono::milliseconds(5));
  SyncEnv env;
  auto src = SyncEnv::source(up.url("/"));
  auto second = store::PgStore::open(env.db.conninfo());
  REQUIRE(second);
  sync::SyncEngine other(std::shared_ptr<store::Store>(std::move(*second)), env.blobs, sync::make_default_fetcher(),
                         env.throttle, env.data / "tmp");
  sync::RunOptions o;
  o.mode = RunMode::baseline;
  o.batch_size = 10;
  o.wait_for_source = true;
  auto mine = std::async(std::launch::async, [&] { return env.engine->run(src, o); });
  auto theirs = std::async(std::launch::async, [&] { return other.run(src, o); });
  auto a = mine.get();
  auto b = theirs.get();
  CHECK(a.status == RunStatus::succeeded);
  CHECK(b.status == RunStatus::succeeded);
  CHECK(has_note(a, "waited for another run") != has_note(b, "waited for another run"));
  CHECK(env.live() == expected_live(site));
  CHECK(env.deleted().empty());
  CHECK(env.log().size() == 60); // each created once, nothing deleted
  CHECK(a.counters.created + b.counters.created == 60);

  // Without waiting, the second is refused, saying who holds the source.
  sync::RunOptions now = o;
  now.wait_for_source = false;
  auto holder = env.store->try_lock_source(*env.store->ensure_source("up", src.url), "a test holding the source");
  REQUIRE(holder);
  REQUIRE(holder->lease);
  auto refused = other.run(src, now);
  CHECK(refused.busy);
  CHECK(refused.status == RunStatus::failed);
  REQUIRE(!refused.errors.empty());
  CHECK(refused.errors.front().find("being synced by another run (a test holding the source") != std::string::npos);
  holder->lease.reset();
  CHECK(other.run(src, now).status == RunStatus::succeeded);
}

TEST_CASE("Never lose: a run left 'running' by a process that died is marked failed by the next run") {
  Upstream up;
  Site site(up);
  site.put_numbered(3);
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  SyncEnv env;
  auto src = SyncEnv::source(up.url("/"));
  REQUIRE(env.run(src, RunMode::baseline).status == RunStatus::succeeded);
  auto dead = env.store->begin_run(1, RunMode::incremental); // its process was killed
  REQUIRE(dead);
  REQUIRE(env.run(src, RunMode::incremental).status == RunStatus::succeeded);
  auto info = env.store->run(*dead);
  REQUIRE(info);
  CHECK(info->status == RunStatus::failed);
  CHECK(info->message.find("interrupted") != std::string::npos);
}

TEST_CASE("Never lose: SIGTERM during an upstream outage stops the daemon within 5 s") {
  // The Source answers 503 with Retry-After: 60 to everything past its
  // first documents: the run sleeps in a back-off (and its host is paused)
  // when the stop comes. It used to wait the minute out.
  Upstream up;
  Site site(up);
  site.put_numbered(20);
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  up.set_rate_threshold(0.001, 4, 60);
  TestDaemon d({{"up", up.url("/")}});
  d.start();
  for (int i = 0; i < 200 && up.rejected() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(up.rejected() >= 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(300)); // well into the back-off
  auto [seconds, status] = d.stop();
  INFO(d.log_text());
  CHECK(seconds < 5.0);
  CHECK(status == 0);
  CHECK(d.log_text().find("stopped") != std::string::npos);
  CHECK(d.log_text().find("exiting now") == std::string::npos); // the run itself stopped
  // The run cut off by the shutdown is recorded as interrupted: no failure
  // of the source's, so no "last failure" or "failing since" for it.
  CHECK(scalar(d, "SELECT status FROM sync_run ORDER BY id DESC LIMIT 1") == "interrupted");
  CHECK(scalar(d, "SELECT count(*) FROM sync_run WHERE status = 'failed'") == "0");
}

TEST_CASE("Never lose: a request hung on a silent upstream does not hold a stopping daemon past its grace period") {
  Upstream up;
  Site site(up);
  site.put_numbered(4);
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  up.set_delay(std::chrono::milliseconds(8000)); // all but .xml documents: 8 s before a byte
  TestDaemon d({{"up", up.url("/")}});
  d.start();
  for (int i = 0; i < 200 && up.total_requests() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(up.total_requests() >= 1); // robots.txt, or discovery: either hangs
  auto [seconds, status] = d.stop();
  INFO(d.log_text());
  CHECK(seconds < 5.0);
  CHECK(status == 0);
  // The transfer watch cuts a hung request off as soon as the run is
  // cancelled: the daemon stops cleanly, without needing the grace
  // period's last resort ("exiting now").
  CHECK(d.log_text().find("exiting now") == std::string::npos);
}

TEST_CASE("Never lose: the daemon shows a source another process is syncing as busy, and syncs it afterwards") {
  Upstream up;
  Site site(up);
  site.put_numbered(40);
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  up.set_delay(std::chrono::milliseconds(300));
  TestDaemon d({{"up", up.url("/")}});
  // A CLI baseline holds the source (40 resources, 300 ms each, 8 at a
  // time: 1.5 s at least, past the daemon's start and its busy run).
  pid_t cli = spawn_tributary({"sync", "--config", d.cfg, "--baseline", "--batch-size", "5"});
  ProcessGuard cli_guard(cli);
  for (int i = 0; i < 200 && up.requests("/res/0.txt") == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  d.start();
  CHECK(wait_for(d.base, [](const json& st) {
    const json* s = find_source(st, "up");
    return s && (*s)["activity"] == "busy";
  }));
  // A second CLI run refuses, naming the holder.
  auto refused = run_tributary("sync --config " + d.cfg + " --incremental");
  CHECK(refused.status == 1);
  CHECK(refused.out.find("skipped (busy)") != std::string::npos);
  CHECK(refused.out.find("being synced by another run (tributary baseline of 'up' (pid " + std::to_string(cli)) !=
        std::string::npos);
  int status = 0;
  waitpid(cli, &status, 0);
  cli = 0;
  CHECK(WEXITSTATUS(status) == 0);
  up.set_delay(std::chrono::milliseconds(0));
  // The daemon comes back to it (after its interval, here 1 s).
  CHECK(wait_for(d.base, [](const json& st) { return in_sync(st, "up", 40); }, 20));
  auto [seconds, code] = d.stop();
  CHECK(code == 0);
}

TEST_CASE("Never lose: resources an older daemon writes during the upgrade to feed_stats are counted") {
  TempDatabase db;
  pqxx::connection admin(db.conninfo());
  {
    // A database at version 2, with one resource.
    pqxx::work tx(admin);
    tx.exec0("CREATE TABLE schema_version (version integer PRIMARY KEY, name text NOT NULL, "
             "applied_at timestamptz NOT NULL DEFAULT now())");
    for (const auto& m : store::migrations()) {
      if (m.version <= 2) {
        tx.exec0(m.sql);
        tx.exec_params("INSERT INTO schema_version (version, name) VALUES ($1, $2)", m.version, m.name);
      }
    }
    tx.exec0("INSERT INTO source (name, url) VALUES ('up', 'http://up.example/')");
    tx.exec0("INSERT INTO feed (source_id, capability_list_url) VALUES (1, 'http://up.example/caps.xml')");
    tx.exec0("INSERT INTO resource (feed_id, uri, state, length) VALUES (1, 'http://up.example/a', 'live', 5)");
    tx.commit();
  }
  // The older daemon is in the middle of a batch when `migrate` starts.
  pqxx::work old_daemon(admin);
  old_daemon.exec0("INSERT INTO resource (feed_id, uri, state, length) VALUES (1, 'http://up.example/b', 'live', 7)");
  auto migrated = std::async(std::launch::async, [&] { return store::migrate(db.conninfo()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  old_daemon.commit();
  auto r = migrated.get();
  REQUIRE(r);
  CHECK(r->to_version == store::expected_schema_version());
  pqxx::connection c(db.conninfo());
  pqxx::read_transaction tx(c);
  auto row = tx.exec1("SELECT live, bytes FROM feed_stats WHERE feed_id = 1");
  CHECK(row[0].as<int>() == 2);
  CHECK(row[1].as<int>() == 12);
}

TEST_CASE("Never lose: a deletion is logged once, after a re-baseline from a list whose at went back and after a repair") {
  Upstream up;
  Site site(up);
  site.put_numbered(4);
  site.publish_start(ts("2026-01-01T10:00:00Z"));
  SyncEnv env;
  auto src = SyncEnv::source(up.url("/"));
  REQUIRE(env.run(src, RunMode::incremental).status == RunStatus::succeeded);
  const std::string gone = up.url("/res/2.txt");
  site.erase("/res/2.txt");
  site.publish_change_list("/cl.xml", ts("2026-01-01T10:00:00Z"), std::nullopt,
                           {change_entry(gone, rs::Change::deleted, ts("2026-01-01T11:00:00Z"))});
  REQUIRE(env.run(src, RunMode::incremental).status == RunStatus::succeeded);
  auto deletions = [&] {
    auto log = env.log();
    return std::count(log.begin(), log.end(), "deleted " + gone);
  };
  CHECK(deletions() == 1);
  // The Source's Resource List now says an hour earlier than its change:
  // a re-baseline, and the Change List read again from before it.
  site.publish_resource_list(ts("2026-01-01T10:30:00Z"));
  REQUIRE(env.run(src, RunMode::baseline).status == RunStatus::succeeded);
  REQUIRE(env.run(src, RunMode::incremental).status == RunStatus::succeeded);
  CHECK(deletions() == 1);
  // An audit's repair, then the Change List again.
  REQUIRE(env.run(src, RunMode::audit, /*repair=*/true).status == RunStatus::succeeded);
  REQUIRE(env.run(src, RunMode::incremental).status == RunStatus::succeeded);
  CHECK(deletions() == 1);
  CHECK(env.live() == expected_live(site));
}

TEST_CASE("Never lose: an update superseded before we fetched it is logged, and so is the later one whose bytes we "
          "fetched for it, each once, and creates and updates once after a re-baseline") {
  Upstream up;
  Site site(up);
  site.put("/res/a.txt", "version 1");
  site.publish_start(ts("2026-01-01T10:00:00Z"));
  SyncEnv env;
  auto src = SyncEnv::source(up.url("/"));
  REQUIRE(env.run(src, RunMode::incremental).status == RunStatus::succeeded);
  const std::string a = up.url("/res/a.txt");
  // Updated at 11:00 (its entry without a hash), and again at 11:00:01
  // before we fetched: we fetch version 3 for the first change.
  rs::Entry first = change_entry(a, rs::Change::updated, ts("2026-01-01T11:00:00Z"));
  first.md->hash.clear();
  first.md->length.reset();
  site.put("/res/a.txt", "version 3");
  site.publish_change_list("/cl.xml", ts("2026-01-01T10:00:00Z"), std::nullopt, {first});
  REQUIRE(env.run(src, RunMode::incremental).status == RunStatus::succeeded);
  // The second change, listed now with the hash of what we hold already
  // (a sha-256, which we keep of every blob).
  rs::Entry second = change_entry(a, rs::Change::updated, ts("2026-01-01T11:00:01Z"), "version 3");
  second.md->hash = {{"sha-256", rs::hash_hex(rs::HashAlgorithm::sha256, "version 3")}};
  site.publish_change_list("/cl.xml", ts("2026-01-01T10:00:00Z"), std::nullopt, {first, second});
  REQUIRE(env.run(src, RunMode::incremental).status == RunStatus::succeeded);
  auto updates = [&] {
    auto log = env.log();
    return std::count(log.begin(), log.end(), "updated " + a);
  };
  CHECK(updates() == 2);
  // Read again (the overlap), re-baselined, repaired: logged no more.
  REQUIRE(env.run(src, RunMode::incremental).status == RunStatus::succeeded);
  CHECK(updates() == 2);
  site.publish_resource_list(ts("2026-01-01T10:30:00Z"));
  REQUIRE(env.run(src, RunMode::baseline).status == RunStatus::succeeded);
  REQUIRE(env.run(src, RunMode::incremental).status == RunStatus::succeeded);
  REQUIRE(env.run(src, RunMode::audit, /*repair=*/true).status == RunStatus::succeeded);
  REQUIRE(env.run(src, RunMode::incremental).status == RunStatus::succeeded);
  auto log = env.log();
  CHECK(std::count(log.begin(), log.end(), "created " + a) == 1);
  CHECK(updates() == 2);
  CHECK(env.live() == expected_live(site));
}

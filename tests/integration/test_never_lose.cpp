// Issue #13, "never lose or repeat a change": each defect found in review
// has its reproduction here, against the real PostgreSQL and real HTTP.
#include "sync_fixture.h"

#include "republisher/documents.h"
#include "resourcesync/reader.h"
#include "resourcesync/writer.h"

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

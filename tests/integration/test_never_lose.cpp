// Issue #13, "never lose or repeat a change": each defect found in review
// has its reproduction here, against the real PostgreSQL and real HTTP.
#include "sync_fixture.h"

#include "resourcesync/writer.h"

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

} // namespace

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

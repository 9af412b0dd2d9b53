// The sync engine against a real upstream over HTTP on 127.0.0.1 and the
// real PostgreSQL from deploy/test.sh.
#include "sync_fixture.h"

#include <fstream>

using namespace tributary;
using namespace tributary::test;
using store::RunMode;
using store::RunStatus;

TEST_CASE("Sync: baseline creates, then leaves unchanged, then deletes what vanished") {
  Upstream up;
  Site site(up);
  site.put("/res/a.txt", "alpha");
  site.put("/res/b.txt", "bravo");
  site.put("/res/c.txt", "charlie");
  site.publish_resource_list(ts("2026-01-01T00:00:00Z"));
  SyncEnv env;
  auto src = SyncEnv::source(up.url("/"));

  auto r1 = env.run(src, RunMode::baseline);
  CHECK(r1.status == RunStatus::succeeded);
  CHECK(r1.counters.created == 3);
  CHECK(env.live() == expected_live(site));
  CHECK(env.log().size() == 3);

  auto r2 = env.run(src, RunMode::baseline);
  CHECK(r2.status == RunStatus::succeeded);
  CHECK(r2.counters.unchanged == 3);
  CHECK(r2.counters.created == 0);
  CHECK(up.requests("/res/a.txt") == 1); // unchanged resources are not fetched again

  site.erase("/res/b.txt");
  site.put("/res/c.txt", "charlie v2");
  site.publish_resource_list(ts("2026-01-02T00:00:00Z"));
  auto r3 = env.run(src, RunMode::baseline);
  CHECK(r3.status == RunStatus::succeeded);
  CHECK(r3.counters.updated == 1);
  CHECK(r3.counters.deleted == 1);
  CHECK(env.live() == expected_live(site));
  CHECK(env.deleted() == std::set<std::string>{up.url("/res/b.txt")});
  auto wm = env.store->watermark(1);
  REQUIRE(wm);
  CHECK(wm->baseline_at == ts("2026-01-02T00:00:00Z"));
  CHECK(env.stats_consistent()); // after delete_unseen
}

TEST_CASE("Sync: incremental across an index of closed and open lists, 1.0 and 1.1, deletes and repeats") {
  Upstream up;
  Site site(up);
  site.put("/res/a.txt", "a0");
  site.put("/res/b.txt", "b0");
  site.publish_resource_list(ts("2026-01-01T00:00:00Z"));
  SyncEnv env;
  auto src = SyncEnv::source(up.url("/"));
  REQUIRE(env.run(src, RunMode::baseline).status == RunStatus::succeeded);

  // Day 1 (closed, 1.0 lastmod): c created, a updated. Day 2 (open, 1.1):
  // b deleted, c updated twice, d created twice at the same instant as c.
  site.put("/res/a.txt", "a1");
  site.put("/res/c.txt", "c2");
  site.put("/res/d.txt", "d1");
  site.erase("/res/b.txt");
  site.publish_change_list("/cl-1.xml", ts("2026-01-01T00:00:00Z"), ts("2026-01-02T00:00:00Z"),
                           {change_entry(up.url("/res/c.txt"), rs::Change::created, ts("2026-01-01T10:00:00Z"), "c0", true),
                            change_entry(up.url("/res/a.txt"), rs::Change::updated, ts("2026-01-01T11:00:00Z"), "a1", true)});
  site.publish_change_list("/cl-2.xml", ts("2026-01-02T00:00:00Z"), std::nullopt,
                           {change_entry(up.url("/res/b.txt"), rs::Change::deleted, ts("2026-01-02T09:00:00Z")),
                            change_entry(up.url("/res/c.txt"), rs::Change::updated, ts("2026-01-02T10:00:00Z"), "c1"),
                            change_entry(up.url("/res/c.txt"), rs::Change::updated, ts("2026-01-02T11:00:00Z"), "c2"),
                            change_entry(up.url("/res/d.txt"), rs::Change::created, ts("2026-01-02T11:00:00Z"), "d1")});
  rs::Document index = make_doc("changelist", rs::RootElement::sitemapindex);
  index.header.md->from = ts("2026-01-01T00:00:00Z");
  index.header.links.push_back(rs::Link{.rel = "up", .href = up.url("/caps.xml")});
  rs::Entry p1{.loc = up.url("/cl-1.xml")};
  p1.md = rs::Metadata{};
  p1.md->from = ts("2026-01-01T00:00:00Z");
  p1.md->until = ts("2026-01-02T00:00:00Z");
  rs::Entry p2{.loc = up.url("/cl-2.xml")};
  p2.md = rs::Metadata{};
  p2.md->from = ts("2026-01-02T00:00:00Z");
  index.entries = {p1, p2};
  up.set_document("/cl.xml", index);

  auto r = env.run(src, RunMode::incremental);
  CHECK(r.status == RunStatus::partial); // c's first change offers "c0", but c now serves c2
  // The hash of an intermediate change may not match what is served now;
  // the final state is what counts.
  CHECK(env.live() == expected_live(site));
  CHECK(up.requests("/res/c.txt") <= 2);
  CHECK(env.deleted() == std::set<std::string>{up.url("/res/b.txt")});
  auto log = env.log();
  CHECK(std::count(log.begin(), log.end(), "updated " + up.url("/res/c.txt")) == 2);
  CHECK(std::count(log.begin(), log.end(), "deleted " + up.url("/res/b.txt")) == 1);
  CHECK(std::count(log.begin(), log.end(), "created " + up.url("/res/d.txt")) == 1);

  // The open list grows: only the new change is applied, none twice.
  const size_t before = log.size();
  site.put("/res/e.txt", "e1");
  site.publish_change_list("/cl-2.xml", ts("2026-01-02T00:00:00Z"), std::nullopt,
                           {change_entry(up.url("/res/b.txt"), rs::Change::deleted, ts("2026-01-02T09:00:00Z")),
                            change_entry(up.url("/res/c.txt"), rs::Change::updated, ts("2026-01-02T10:00:00Z"), "c1"),
                            change_entry(up.url("/res/c.txt"), rs::Change::updated, ts("2026-01-02T11:00:00Z"), "c2"),
                            change_entry(up.url("/res/d.txt"), rs::Change::created, ts("2026-01-02T11:00:00Z"), "d1"),
                            change_entry(up.url("/res/e.txt"), rs::Change::created, ts("2026-01-02T11:00:00Z"), "e1")});
  auto again = env.run(src, RunMode::incremental);
  CHECK(again.status == RunStatus::succeeded);
  CHECK(again.counters.created == 1);
  CHECK(env.log().size() == before + 1);
  CHECK(env.live() == expected_live(site));
  CHECK(env.stats_consistent()); // creations, updates, deletions, repeats
}

TEST_CASE("Sync: equal timestamps resume by position within the list") {
  Upstream up;
  Site site(up);
  site.publish_resource_list(ts("2026-01-01T00:00:00Z"));
  SyncEnv env;
  auto src = SyncEnv::source(up.url("/"));
  std::vector<rs::Entry> changes;
  for (int i = 0; i < 5; ++i) {
    const std::string p = "/res/same" + std::to_string(i) + ".txt";
    site.put(p, "x" + std::to_string(i));
    changes.push_back(change_entry(up.url(p), rs::Change::created, ts("2026-01-01T12:00:00Z"), "x" + std::to_string(i)));
  }
  // First run sees three of the five equal-time changes.
  site.publish_change_list("/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt,
                           std::vector<rs::Entry>(changes.begin(), changes.begin() + 3));
  REQUIRE(env.run(src, RunMode::incremental).status == RunStatus::succeeded);
  CHECK(env.log().size() == 3);
  site.publish_change_list("/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt, changes);
  auto r = env.run(src, RunMode::incremental);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(r.counters.created == 2);
  CHECK(env.log().size() == 5);
  CHECK(env.live() == expected_live(site));
}

TEST_CASE("Sync: a gap in the change history re-baselines automatically") {
  Upstream up;
  Site site(up);
  site.put("/res/a.txt", "a0");
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  SyncEnv env;
  auto src = SyncEnv::source(up.url("/"));
  REQUIRE(env.run(src, RunMode::incremental).status == RunStatus::succeeded);

  // History rolled off: the Change List now starts days after our watermark.
  site.put("/res/a.txt", "a9");
  site.put("/res/z.txt", "z9");
  site.publish_resource_list(ts("2026-01-10T00:00:00Z"));
  site.put("/res/y.txt", "y9");
  site.publish_change_list("/cl.xml", ts("2026-01-10T00:00:00Z"), std::nullopt,
                           {change_entry(up.url("/res/y.txt"), rs::Change::created, ts("2026-01-10T01:00:00Z"), "y9")});
  auto r = env.run(src, RunMode::incremental);
  CHECK(r.status == RunStatus::succeeded);
  REQUIRE_FALSE(r.notes.empty());
  CHECK(r.notes[0].rfind("re-baselined: the Change List starts at 2026-01-10T00:00:00Z", 0) == 0);
  CHECK(env.live() == expected_live(site));
}

TEST_CASE("Sync: a Change List without 'from' (resync-simulator's, oldest change a deletion) is followed, with a note") {
  Upstream up;
  Site site(up);
  site.put("/res/a.txt", "a0");
  site.put("/res/b.txt", "b0");
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  SyncEnv env;
  auto src = SyncEnv::source(up.url("/"));
  REQUIRE(env.run(src, RunMode::incremental).status == RunStatus::succeeded);

  // The simulator's shape: its oldest remembered change is a deletion
  // (no lastmod, so it writes no 'from'), 1.0 style times on the others.
  site.erase("/res/b.txt");
  site.put("/res/a.txt", "a1");
  site.put("/res/c.txt", "c1");
  rs::Entry deleted{.loc = up.url("/res/b.txt")};
  deleted.md = rs::Metadata{};
  deleted.md->change = rs::Change::deleted;
  deleted.md->datetime = ts("2026-01-02T00:00:00Z");
  site.publish_change_list("/cl.xml", std::nullopt, std::nullopt,
                           {deleted,
                            change_entry(up.url("/res/a.txt"), rs::Change::updated, ts("2026-01-02T00:00:01Z"), "a1",
                                         /*v10=*/true),
                            change_entry(up.url("/res/c.txt"), rs::Change::created, ts("2026-01-02T00:00:02Z"), "c1",
                                         /*v10=*/true)});
  auto r = env.run(src, RunMode::incremental);
  INFO((r.errors.empty() ? std::string() : r.errors.front()));
  CHECK(r.status == RunStatus::succeeded);
  CHECK(has_note(r, "has no 'from' (Appendix A requires one): its first change's time, 2026-01-02T00:00:00Z"));
  CHECK(r.counters.deleted == 1);
  CHECK(r.counters.updated == 1);
  CHECK(r.counters.created == 1);
  CHECK(env.live() == expected_live(site));
}

TEST_CASE("Sync: audit counts differences and repair fixes them") {
  Upstream up;
  Site site(up);
  site.put("/res/a.txt", "a");
  site.put("/res/b.txt", "b");
  site.put("/res/c.txt", "c");
  site.publish_resource_list(ts("2026-01-01T00:00:00Z"));
  SyncEnv env;
  auto src = SyncEnv::source(up.url("/"));
  REQUIRE(env.run(src, RunMode::baseline).status == RunStatus::succeeded);
  site.erase("/res/a.txt");     // extra
  site.put("/res/b.txt", "b2"); // changed
  site.put("/res/d.txt", "d");  // missing
  site.publish_resource_list(ts("2026-01-02T00:00:00Z"));
  auto audit = env.run(src, RunMode::audit);
  CHECK(audit.status == RunStatus::succeeded);
  CHECK(audit.audit.in_sync == 1);
  CHECK(audit.audit.missing == 1);
  CHECK(audit.audit.extra == 1);
  CHECK(audit.audit.changed == 1);
  CHECK(env.live() != expected_live(site)); // audit alone changes nothing
  auto repair = env.run(src, RunMode::audit, true);
  CHECK(repair.status == RunStatus::succeeded);
  CHECK(env.live() == expected_live(site));
  auto check = env.run(src, RunMode::audit);
  CHECK(check.audit.in_sync == 3);
  CHECK(check.audit.missing + check.audit.extra + check.audit.changed == 0);
}

TEST_CASE("Sync: duplicate links are tried in pri order before loc, and the serving location recorded") {
  Upstream up;
  Upstream mirror("127.0.0.2");
  Site site(up);
  site.put("/res/a.txt", "alpha");
  mirror.set("/m1/a.txt", Served{500, "", "text/plain", {}});
  mirror.set("/m2/a.txt", "alpha", "text/plain");
  rs::Document rl = make_doc("resourcelist");
  rl.header.md->at = ts("2026-01-01T00:00:00Z");
  rs::Entry e = resource_entry(up.url("/res/a.txt"), "alpha");
  e.links.push_back(rs::Link{.rel = "duplicate", .href = mirror.url("/m2/a.txt"), .pri = 2});
  e.links.push_back(rs::Link{.rel = "duplicate", .href = mirror.url("/m1/a.txt"), .pri = 1});
  // Another scheme: recorded, never dereferenced.
  e.links.push_back(rs::Link{.rel = "duplicate", .href = "gsiftp://grid.example.org/a.txt"});
  rl.entries.push_back(e);
  up.set_document("/rl.xml", rl);
  SyncEnv env;
  // A mirror on a public address needs no configuration (its document
  // names it); this one is on a loopback address the source is not on,
  // which only allow_hosts lets through (see test_hostile.cpp).
  auto src = SyncEnv::source(up.url("/"));
  src.allow_hosts = {"127.0.0.2"};
  auto r = env.run(src, RunMode::baseline);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(env.fetched_from(up.url("/res/a.txt")) == mirror.url("/m2/a.txt"));
  CHECK(mirror.requests("/m1/a.txt") == 1); // a failing mirror is tried once, not retried first
  CHECK(up.requests("/res/a.txt") == 0);
  auto held = env.store->resources(1, {up.url("/res/a.txt")});
  REQUIRE(held);
  REQUIRE(held->count(up.url("/res/a.txt")));
  CHECK(held->at(up.url("/res/a.txt")).links.size() == 3);
  CHECK(held->at(up.url("/res/a.txt")).links[2].href == "gsiftp://grid.example.org/a.txt");
}

TEST_CASE("Sync: content is fetched only from the source's hosts, its named mirrors, and allow_hosts") {
  Upstream up;
  Upstream other("127.0.0.2");
  Site site(up);
  other.set("/x.txt", "elsewhere", "text/plain");
  rs::Document rl = make_doc("resourcelist");
  rl.header.md->at = ts("2026-01-01T00:00:00Z");
  rl.entries.push_back(resource_entry(other.url("/x.txt"), "elsewhere"));
  up.set_document("/rl.xml", rl);
  SyncEnv env;
  auto src = SyncEnv::source(up.url("/"));
  auto refused = env.run(src, RunMode::baseline);
  CHECK(refused.status == RunStatus::partial);
  REQUIRE_FALSE(refused.errors.empty());
  CHECK(refused.errors[0] == other.url("/x.txt") + ": host 127.0.0.2 is not the source's and not in allow_hosts");
  CHECK(other.total_requests() == 0);
  src.allow_hosts = {"127.0.0.2"};
  auto allowed = env.run(src, RunMode::baseline);
  CHECK(allowed.status == RunStatus::succeeded);
  CHECK(env.live() == std::map<std::string, std::string>{{other.url("/x.txt"), "elsewhere"}});
}

TEST_CASE("Sync: a source-level mirror takes over when the primary endpoint fails") {
  Upstream primary;
  Upstream mirror("127.0.0.2");
  // The mirror serves the same documents; its locs name the primary's URLs
  // (the documents are copies), which the endpoint fetcher maps over.
  Site site(mirror);
  site.put("/res/a.txt", "alpha");
  site.publish_resource_list(ts("2026-01-01T00:00:00Z"));
  primary.fail_all(503);
  auto src = SyncEnv::source(primary.url("/"));
  src.mirrors.push_back(sync::MirrorEndpoint{mirror.url("/"), 1});
  src.capability_lists = {primary.url("/caps.xml")};
  SyncEnv env;
  auto r = env.run(src, RunMode::baseline);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(primary.total_requests() >= 1);
  CHECK(env.live().size() == 1);
  CHECK(env.stats_consistent());
}

TEST_CASE("Sync: include/exclude and media type filters") {
  Upstream up;
  Site site(up);
  site.put("/keep/a.txt", "a");
  site.put("/keep/b.tmp", "b");
  site.put("/skip/c.txt", "c");
  site.publish_resource_list(ts("2026-01-01T00:00:00Z"));
  auto src = SyncEnv::source(up.url("/"));
  sync::UriFilter inc;
  inc.prefix = up.url("/keep/");
  src.include.push_back(inc);
  sync::UriFilter exc;
  REQUIRE_FALSE(sync::make_uri_filter("re:.*\\.tmp", exc));
  src.exclude.push_back(exc);
  src.media_types = {"text/*"};
  SyncEnv env;
  auto r = env.run(src, RunMode::baseline);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(env.live() == std::map<std::string, std::string>{{up.url("/keep/a.txt"), "a"}});
}

TEST_CASE("Sync: credentials are sent to the source's hosts only") {
  Upstream up;
  Upstream mirror("127.0.0.2");
  Site site(up);
  site.put("/res/a.txt", "alpha");
  mirror.set("/m/a.txt", "alpha", "text/plain");
  rs::Document rl = make_doc("resourcelist");
  rl.header.md->at = ts("2026-01-01T00:00:00Z");
  rs::Entry e = resource_entry(up.url("/res/a.txt"), "alpha");
  e.links.push_back(rs::Link{.rel = "duplicate", .href = mirror.url("/m/a.txt"), .pri = 1});
  rl.entries.push_back(e);
  up.set_document("/rl.xml", rl);
  up.require_auth("Bearer s3cret");
  auto src = SyncEnv::source(up.url("/"));
  SyncEnv env;

  auto denied = env.run(src, RunMode::baseline);
  CHECK(denied.status == RunStatus::failed);

  setenv("TRIBUTARY_TEST_TOKEN", "s3cret", 1);
  src.auth.type = sync::AuthConfig::Type::bearer;
  src.auth.secret.env = "TRIBUTARY_TEST_TOKEN";
  auto ok = env.run(src, RunMode::baseline);
  CHECK(ok.status == RunStatus::succeeded);
  for (const auto& h : mirror.auth_headers()) {
    CHECK(h.empty());
  }
  bool sent = false;
  for (const auto& h : up.auth_headers()) {
    sent = sent || h == "Bearer s3cret";
  }
  CHECK(sent);

  SUBCASE("basic auth with the password in a file") {
    up.require_auth("Basic dXNlcjpzM2NyZXQ="); // user:s3cret
    const auto secret = env.data / "password";
    std::ofstream(secret) << "s3cret\n";
    src.auth.type = sync::AuthConfig::Type::basic;
    src.auth.username = "user";
    src.auth.secret = sync::SecretRef{secret.string(), ""};
    CHECK(env.run(src, RunMode::baseline).status == RunStatus::succeeded);
  }
}

TEST_CASE("Sync: a hash mismatch and a 404 fail those resources only") {
  Upstream up;
  Site site(up);
  site.put("/res/good.txt", "good");
  site.put("/res/gone.txt", "gone");
  site.put("/res/bad.txt", "expected");
  site.publish_resource_list(ts("2026-01-01T00:00:00Z"));
  up.set("/res/bad.txt", "tampered", "text/plain"); // same length, other bytes
  up.remove("/res/gone.txt");
  SyncEnv env;
  auto r = env.run(SyncEnv::source(up.url("/")), RunMode::baseline);
  CHECK(r.status == RunStatus::partial);
  CHECK(r.counters.created == 1);
  CHECK(r.counters.failed == 2);
  std::string errors;
  for (const auto& e : r.errors) {
    errors += e + "\n";
  }
  CHECK(errors.find("hash mismatch for " + up.url("/res/bad.txt") + ": md5: expected") != std::string::npos);
  CHECK(errors.find("HTTP 404 for " + up.url("/res/gone.txt")) != std::string::npos);
  CHECK(env.live().size() == 1);
}

TEST_CASE("Sync: content that failed in a baseline is retried by later runs until stored, and dropped once unlisted") {
  Upstream up;
  Site site(up);
  site.put("/res/good.txt", "good");
  site.put("/res/bad.txt", "expected");
  site.put("/res/gone.txt", "gone");
  site.put("/res/dropped.txt", "dropped");
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  up.set("/res/bad.txt", "tampered", "text/plain");
  up.remove("/res/gone.txt");
  up.remove("/res/dropped.txt");
  SyncEnv env;
  env.refetch_backoff = std::chrono::seconds(0);
  auto r = env.run(SyncEnv::source(up.url("/")), RunMode::baseline);
  CHECK(r.status == RunStatus::partial);
  CHECK(r.counters.failed == 3);
  const std::string bad = up.url("/res/bad.txt"), gone = up.url("/res/gone.txt");
  const std::string dropped = up.url("/res/dropped.txt");
  CHECK(env.retries() == std::map<std::string, int>{{bad, 1}, {gone, 1}, {dropped, 1}});

  // Still failing: tried again, each attempt counted, the run says so.
  r = env.run(SyncEnv::source(up.url("/")), RunMode::incremental);
  CHECK(r.status == RunStatus::partial);
  CHECK(r.counters.failed == 3);
  CHECK(has_note(r, "retried 3 resources whose content failed before: 0 stored, 3 still failing"));
  CHECK(env.retries() == std::map<std::string, int>{{bad, 2}, {gone, 2}, {dropped, 2}});

  // The upstream lists dropped.txt no more: a baseline forgets its retry.
  site.erase("/res/dropped.txt");
  site.publish_resource_list(ts("2026-01-02T00:00:00Z"));
  r = env.run(SyncEnv::source(up.url("/")), RunMode::baseline);
  CHECK(env.retries().count(dropped) == 0);
  CHECK(env.retries().size() == 2);

  // Fixed upstream: the next incremental run stores them, as creations.
  up.set("/res/bad.txt", "expected", "text/plain");
  up.set("/res/gone.txt", "gone", "text/plain");
  r = env.run(SyncEnv::source(up.url("/")), RunMode::incremental);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(r.counters.created == 2);
  CHECK(has_note(r, "retried 2 resources whose content failed before: 2 stored, 0 still failing"));
  CHECK(env.retries().empty());
  CHECK(env.live() == expected_live(site));
  const auto log = env.log();
  CHECK(std::count(log.begin(), log.end(), "created " + bad) == 1);
  CHECK(std::count(log.begin(), log.end(), "created " + gone) == 1);
}

TEST_CASE("Sync: a change whose content failed is retried as that change, unless a later change supersedes it") {
  Upstream up;
  Site site(up);
  site.put("/res/a.txt", "a0");
  site.put("/res/b.txt", "b0");
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  SyncEnv env;
  REQUIRE(env.run(SyncEnv::source(up.url("/")), RunMode::baseline).status == RunStatus::succeeded);
  const std::string a = up.url("/res/a.txt"), b = up.url("/res/b.txt");
  // Both change; both serve bytes that do not match the Change List.
  std::vector<rs::Entry> changes{change_entry(a, rs::Change::updated, ts("2026-01-02T00:00:00Z"), "a1"),
                                 change_entry(b, rs::Change::updated, ts("2026-01-02T00:00:01Z"), "b1")};
  site.publish_change_list("/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt, changes);
  up.set("/res/a.txt", "??", "text/plain");
  up.set("/res/b.txt", "??", "text/plain");
  auto r = env.run(SyncEnv::source(up.url("/")), RunMode::incremental);
  CHECK(r.status == RunStatus::partial);
  CHECK(env.retries() == std::map<std::string, int>{{a, 1}, {b, 1}}); // not due yet (a minute)

  // b changes again and serves it: that change stores b, so b's retry goes.
  site.put("/res/b.txt", "b2");
  changes.push_back(change_entry(b, rs::Change::updated, ts("2026-01-03T00:00:00Z"), "b2"));
  site.publish_change_list("/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt, changes);
  r = env.run(SyncEnv::source(up.url("/")), RunMode::incremental);
  CHECK(env.retries() == std::map<std::string, int>{{a, 1}});

  // a serves its bytes again; once due, a's change is applied as it was.
  up.set("/res/a.txt", "a1", "text/plain");
  env.refetch_backoff = std::chrono::seconds(0);
  {
    pqxx::connection c(env.db.conninfo());
    pqxx::work tx(c);
    tx.exec0("UPDATE retry SET next_attempt_at = now()");
    tx.commit();
  }
  r = env.run(SyncEnv::source(up.url("/")), RunMode::incremental);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(r.counters.updated == 1);
  CHECK(env.retries().empty());
  CHECK(env.live()[a] == "a1");
  CHECK(env.live()[b] == "b2");
  pqxx::connection c(env.db.conninfo());
  pqxx::read_transaction tx(c);
  auto row = tx.exec_params1("SELECT change, upstream_datetime = '2026-01-02T00:00:00Z' FROM change_log "
                             "WHERE uri = $1 ORDER BY seq DESC LIMIT 1", a);
  CHECK(row[0].as<std::string>() == "updated");
  CHECK(row[1].as<bool>()); // the change's own time, though applied later
}

TEST_CASE("Sync: a list that fails to parse applies nothing and names the reason") {
  Upstream up;
  Site site(up);
  site.put("/res/a.txt", "alpha");
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  SyncEnv env;
  auto src = SyncEnv::source(up.url("/"));
  REQUIRE(env.run(src, RunMode::incremental).status == RunStatus::succeeded);
  const auto log_before = env.log();
  up.set("/cl.xml", std::string(rs::write_document(make_doc("changelist"))).substr(0, 150)); // truncated
  auto r = env.run(src, RunMode::incremental);
  CHECK(r.status == RunStatus::failed);
  REQUIRE_FALSE(r.errors.empty());
  CHECK(r.errors[0].find(up.url("/cl.xml") + ": invalid document, nothing applied from it: line") != std::string::npos);
  CHECK(env.log() == log_before);
}

TEST_CASE("Sync: a Resource List broken after its first batches applies nothing, though they were fetched while "
          "it was validated") {
  Upstream up;
  Site site(up);
  site.put_numbered(2500);
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  // Well-formed for 2,500 entries, then cut inside an element: the header
  // is fine, so its first batch is fetched before the verdict.
  rs::Document rl = make_doc("resourcelist");
  rl.header.md->at = ts("2026-01-01T00:00:00Z");
  for (int i = 0; i < 2500; ++i) {
    const std::string path = "/res/" + std::to_string(i) + ".txt";
    rl.entries.push_back(resource_entry(up.url(path), "resource " + std::to_string(i)));
  }
  std::string xml = rs::write_document(rl);
  xml = xml.substr(0, xml.rfind("</urlset>")) + "<url><loc>" + up.url("/res/cut");
  up.set("/rl.xml", xml, "application/xml");
  SyncEnv env;
  auto r = env.run(SyncEnv::source(up.url("/")), RunMode::baseline);
  CHECK(r.status == RunStatus::failed);
  REQUIRE_FALSE(r.errors.empty());
  CHECK(r.errors[0].find(up.url("/rl.xml") + ": invalid document, nothing applied from it: line") !=
        std::string::npos);
  CHECK(env.live().empty());
  CHECK(env.log().empty());
  // The same list whole is applied in full.
  site.publish_resource_list(ts("2026-01-01T00:00:00Z"));
  auto ok = env.run(SyncEnv::source(up.url("/")), RunMode::baseline);
  CHECK(ok.status == RunStatus::succeeded);
  CHECK(env.live() == expected_live(site));
}

TEST_CASE("Sync: a dead upstream fails the run with a clear error") {
  SyncEnv env;
  auto r = env.run(SyncEnv::source("http://127.0.0.1:1/"), RunMode::incremental);
  CHECK(r.status == RunStatus::failed);
  REQUIRE_FALSE(r.errors.empty());
  CHECK(r.errors[0].find("no Capability List found from http://127.0.0.1:1/") != std::string::npos);
}

TEST_CASE("Sync: an open Change List that did not change is not downloaded again (ETag)") {
  Upstream up;
  Site site(up);
  site.put("/res/a.txt", "a");
  site.publish_resource_list(ts("2026-01-01T00:00:00Z"));
  site.publish_change_list("/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt,
                           {change_entry(up.url("/res/a.txt"), rs::Change::updated, ts("2026-01-01T01:00:00Z"), "a")});
  auto with_etag = [&](const std::string& tag) {
    test::Served s{200, rs::write_document([&] {
                     rs::Document cl = make_doc("changelist");
                     cl.header.md->from = ts("2026-01-01T00:00:00Z");
                     cl.entries = {change_entry(up.url("/res/a.txt"), rs::Change::updated, ts("2026-01-01T01:00:00Z"), "a")};
                     if (tag == "\"v2\"") {
                       site.put("/res/b.txt", "b");
                       cl.entries.push_back(change_entry(up.url("/res/b.txt"), rs::Change::created, ts("2026-01-01T02:00:00Z"), "b"));
                     }
                     return cl;
                   }()),
                   "application/xml", {{"ETag", tag}}};
    up.set("/cl.xml", s);
  };
  with_etag("\"v1\"");
  SyncEnv env;
  auto src = SyncEnv::source(up.url("/"));
  REQUIRE(env.run(src, RunMode::incremental).status == RunStatus::succeeded);
  auto second = env.run(src, RunMode::incremental);
  CHECK(second.status == RunStatus::succeeded);
  REQUIRE_FALSE(second.notes.empty());
  CHECK(second.notes.back() == "Change List not modified since it was last applied");
  with_etag("\"v2\"");
  auto third = env.run(src, RunMode::incremental);
  CHECK(third.status == RunStatus::succeeded);
  CHECK(third.counters.created == 1);
  CHECK(env.live() == expected_live(site));
}

TEST_CASE("Sync: a Resource List naming a URI twice is applied once (the last entry counts)") {
  Upstream up;
  Site site(up);
  site.put("/res/a.txt", "a2");
  rs::Document rl = make_doc("resourcelist");
  rl.header.md->at = ts("2026-01-01T00:00:00Z");
  rl.entries.push_back(resource_entry(up.url("/res/a.txt"), "a1"));
  rl.entries.push_back(resource_entry(up.url("/res/a.txt"), "a2"));
  up.set_document("/rl.xml", rl);
  SyncEnv env;
  auto r = env.run(SyncEnv::source(up.url("/")), RunMode::baseline);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(r.counters.created == 1);
  CHECK(env.live() == expected_live(site));
}

TEST_CASE("Sync: a URI listed again in later batches (the one before, while it commits, and further back) is "
          "fetched and logged once") {
  Upstream up;
  Site site(up);
  for (const char* n : {"x", "r1", "r2", "r3", "r4", "r5"}) {
    site.put(std::string("/res/") + n, std::string("content of ") + n);
  }
  rs::Document rl = make_doc("resourcelist");
  rl.header.md->at = ts("2026-01-01T00:00:00Z");
  // Batches of two: {x, r1} {x, r2} {r3, x} {r4, r5} {x}: x in the batch
  // before, two before, and further back.
  for (const char* n : {"x", "r1", "x", "r2", "r3", "x", "r4", "r5", "x"}) {
    rl.entries.push_back(resource_entry(up.url(std::string("/res/") + n), std::string("content of ") + n));
  }
  up.set_document("/rl.xml", rl);
  SyncEnv env;
  sync::RunOptions o;
  o.mode = RunMode::baseline;
  o.batch_size = 2;
  auto r = env.engine->run(SyncEnv::source(up.url("/")), o);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(r.counters.created == 6);
  CHECK(r.counters.unchanged == 3);
  CHECK(up.requests("/res/x") == 1);
  CHECK(env.live() == expected_live(site));
  const auto log = env.log();
  CHECK(std::count(log.begin(), log.end(), "created " + up.url("/res/x")) == 1);
  CHECK(log.size() == 6);
}

TEST_CASE("Sync: a configured file:// source is read from disk") {
  SyncEnv env;
  const auto dir = env.data / "local-source";
  std::filesystem::create_directories(dir / "res");
  std::ofstream(dir / "res" / "a.txt") << "local a";
  const std::string base = "file://" + dir.string();
  rs::Document caps = make_doc("capabilitylist");
  caps.entries.push_back(cap_entry(base + "/rl.xml", "resourcelist"));
  std::ofstream(dir / "caps.xml") << rs::write_document(caps);
  rs::Document rl = make_doc("resourcelist");
  rl.header.md->at = ts("2026-01-01T00:00:00Z");
  rl.entries.push_back(resource_entry(base + "/res/a.txt", "local a"));
  std::ofstream(dir / "rl.xml") << rs::write_document(rl);
  auto r = env.run(SyncEnv::source(base + "/caps.xml"), RunMode::baseline);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(env.live() == std::map<std::string, std::string>{{base + "/res/a.txt", "local a"}});
}

TEST_CASE("Sync: content that fails for a lasting reason (longer than listed, a 403) is asked for once in a run, "
          "not again after a back-off, while a 503 is tried again") {
  Upstream up;
  Site site(up);
  site.put("/res/good.txt", "good");
  site.put("/res/long.txt", "short");
  site.put("/res/forbidden.txt", "secret");
  site.put("/res/busy.txt", "busy");
  site.publish_resource_list(ts("2026-01-01T00:00:00Z"));
  up.set("/res/long.txt", "much longer than listed", "text/plain");
  up.set("/res/forbidden.txt", Served{403, "no", "text/plain", {}});
  up.set("/res/busy.txt", Served{503, "later", "text/plain", {}});
  SyncEnv env;
  auto r = env.run(SyncEnv::source(up.url("/")), RunMode::baseline);
  CHECK(r.status == RunStatus::partial);
  CHECK(r.counters.created == 1);
  CHECK(r.counters.failed == 3);
  CHECK(up.requests("/res/long.txt") == 1);
  CHECK(up.requests("/res/forbidden.txt") == 1);
  CHECK(up.requests("/res/busy.txt") > 1); // a passing reason: tried again within the run
  // All three wait in the retry table for a later run.
  CHECK(env.retries().size() == 3);
}

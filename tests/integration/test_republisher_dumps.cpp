// The republisher's Resource Dump and Change Dump packages over a real store
// filled by a real sync: their size bound, verification, a second Tributary
// baselining from them, and two processes sharing one data_dir.
#include "republisher_fixture.h"

#include "sync_engine/dump_package.h"
#include "resourcesync/reader.h"
#include "common/url_resolve.h"

#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <deque>
#include <fstream>
#include <set>
#include <shared_mutex>
#include <signal.h>

using namespace tributary;
using namespace tributary::test;
using store::RunMode;
using store::RunStatus;

TEST_CASE("Republisher: a Resource Dump package holds at most dump_package_bytes of bitstreams") {
  // "alpha" (5 bytes) and "bravo bravo" (11) do not fit in 12 bytes together.
  Published a(/*dumps=*/true, /*package_entries=*/10000, 10000, {}, /*package_bytes=*/12);
  pub::UrlScheme urls(a.base);
  REQUIRE(resource_dump_offered(urls));
  auto doc = rs::parse_document(get(urls.resource_dump("up")).body);
  CHECK(doc.summary.valid());
  CHECK(doc.document.entries.size() == 2);
}

TEST_CASE("Republisher: Resource Dump packages that verify, and a second Tributary baselines from them") {
  Published a(/*dumps=*/true, /*package_entries=*/1);
  pub::UrlScheme urls(a.base);
  REQUIRE(resource_dump_offered(urls));
  Got dump = get(urls.resource_dump("up"));
  REQUIRE(dump.status == 200);
  auto doc = rs::parse_document(dump.body);
  CHECK(doc.summary.valid());
  REQUIRE(doc.document.entries.size() == 2); // two live resources, one per package
  std::set<std::string> locs;
  for (const auto& pkg : doc.document.entries) {
    Got zip = get(pkg.loc);
    REQUIRE(zip.status == 200);
    CHECK(header(zip, "Cache-Control") == "public, max-age=31536000, immutable");
    CHECK(zip.body.size() == *pkg.md->length);
    CHECK(rs::hash_hex(rs::HashAlgorithm::sha256, zip.body) == pkg.md->hash[0].hex);
    const auto file = a.env.data / "fetched.zip";
    std::ofstream(file, std::ios::binary) << zip.body;
    auto opened = sync::DumpPackage::open(file, pkg.loc, rs::Capability::resourcedump_manifest);
    REQUIRE(opened);
    CHECK((*opened)->warnings().empty());
    auto m = (*opened)->manifest();
    REQUIRE(m);
    REQUIRE(m->entries.size() == 1);
    CHECK(m->header.md->at == doc.document.header.md->at);
    CHECK(m->entries[0].find_link("via") != nullptr);
    REQUIRE((*opened)->extract(m->entries[0], 0, *a.env.blobs)); // bytes verified against the manifest
    locs.insert(m->entries[0].loc);
  }
  CHECK(locs == std::set<std::string>{urls.resource("up", a.up.url("/res/a.txt")),
                                      urls.resource("up", a.up.url("/res/b.txt"))});

  // Tributary B, strategy dumps: baseline from A's Resource Dump.
  SyncEnv b;
  auto src = SyncEnv::source(a.base + "/", "a");
  src.strategy = "dumps";
  auto r = b.run(src, RunMode::incremental);
  REQUIRE(r.status == RunStatus::succeeded);
  CHECK(has_note(r, "baselined from the Resource Dump"));
  check_second_level(a, b, urls, "/res/b.txt");
}

TEST_CASE("Republisher: Change Dump packages per closed part, and a second Tributary baselines from the Resource Dump and follows the Change Dump") {
  Published a(/*dumps=*/true, /*package_entries=*/10000, /*change_list_part=*/2);
  pub::UrlScheme urls(a.base);
  auto wait_for_packages = [&](size_t n) {
    for (int i = 0; i < 200; ++i) {
      Got cd = get(urls.change_dump("up"));
      if (cd.status == 200 && rs::parse_document(cd.body).document.entries.size() >= n &&
          get(urls.capability_list("up")).body.find("resourcedump.xml") != std::string::npos) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  };
  REQUIRE(wait_for_packages(2)); // four changes so far: two closed parts
  Got cd = get(urls.change_dump("up"));
  auto doc = rs::parse_document(cd.body);
  CHECK(doc.summary.valid());
  const rs::Entry& first = doc.document.entries[0];
  const rs::Link* contents = first.find_link("contents");
  REQUIRE(contents);
  Got manifest = get(contents->href);
  REQUIRE(manifest.status == 200);
  CHECK(rs::parse_document(manifest.body).document.header.capability() == rs::Capability::changedump_manifest);
  Got zip = get(first.loc);
  CHECK(rs::hash_hex(rs::HashAlgorithm::sha256, zip.body) == first.md->hash[0].hex);
  const auto file = a.env.data / "change-package.zip";
  std::ofstream(file, std::ios::binary) << zip.body;
  auto opened = sync::DumpPackage::open(file, first.loc, rs::Capability::changedump_manifest);
  REQUIRE(opened);
  CHECK((*opened)->size() == 2);
  CHECK((*opened)->manifest()->entries.size() == 2);

  SyncEnv b;
  auto src = SyncEnv::source(a.base + "/", "a");
  src.strategy = "dumps";
  REQUIRE(b.run(src, RunMode::incremental).status == RunStatus::succeeded);

  // Upstream changes: A follows them, closes a third part and packs it.
  a.change_upstream();
  REQUIRE(wait_for_packages(3));
  std::this_thread::sleep_for(std::chrono::milliseconds(1100)); // A's Change List shows the open part too
  auto r = b.run(src, RunMode::incremental);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(has_note(r, "caught up from the Change Dump"));
  check_second_level(a, b, urls, "/res/d.txt");
}

TEST_CASE("Republisher: a change whose bytes were never had (logged when a later change of its URI came) is left "
          "out of its Change Dump package, whose manifest stays valid") {
  Published a(/*dumps=*/true, /*package_entries=*/10000, /*change_list_part=*/2);
  pub::UrlScheme urls(a.base);
  const std::string y = a.up.url("/res/y.txt");
  a.site.publish_change_list("/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt,
                             {change_entry(a.up.url("/res/c.txt"), rs::Change::deleted, ts("2026-01-02T00:00:00Z")),
                              change_entry(y, rs::Change::updated, ts("2026-01-03T00:00:00Z"), "v1"), // 404
                              change_entry(y, rs::Change::deleted, ts("2026-01-03T00:00:01Z"))});
  REQUIRE(a.env.run(SyncEnv::source(a.up.url("/")), RunMode::incremental).status == RunStatus::succeeded);
  auto log = a.env.log();
  REQUIRE(std::count(log.begin(), log.end(), "updated " + y) == 1); // logged, without content
  // Six changes: three parts, the third with y's two.
  REQUIRE(eventually([&] { return rs::parse_document(get(urls.change_dump("up")).body).document.entries.size() == 3; }));
  const auto dump = rs::parse_document(get(urls.change_dump("up")).body).document;
  const Got manifest = get(dump.entries[2].find_link("contents")->href);
  auto parsed = rs::parse_document(manifest.body);
  INFO(manifest.body);
  CHECK(parsed.summary.valid());
  REQUIRE(parsed.document.entries.size() == 1);
  CHECK(parsed.document.entries[0].change() == rs::Change::deleted);
}

TEST_CASE("Republisher: two processes serving one data_dir build and serve their dumps without touching each other's") {
  Upstream up;
  Site site(up);
  site.put_numbered(6, "/res/r", "bytes ");
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  TempDatabase db;
  ScratchDir dir("two");
  const int ports[2] = {free_port(), free_port()};
  std::string cfg[2];
  for (int k = 0; k < 2; ++k) {
    cfg[k] = (dir / ("c" + std::to_string(k) + ".json")).string();
    std::ofstream(cfg[k]) << "{\"database\": \"" << db.conninfo() << "\", \"data_dir\": \"" << (dir / "data").string()
                          << "\", \"listen\": \"127.0.0.1:" << ports[k]
                          << "\", \"change_list_part_size\": 2, \"dump_package_size\": 2, \"sources\": [{\"name\": "
                             "\"up\", \"url\": \""
                          << up.url("/") << "\"}]}";
  }
  REQUIRE(run_tributary("migrate --config " + cfg[0]).status == 0);
  REQUIRE(run_tributary("sync --config " + cfg[0] + " --incremental").status == 0);
  pid_t serve[2];
  std::unique_ptr<ProcessGuard> guards[2];
  for (int k = 0; k < 2; ++k) {
    serve[k] = spawn_tributary({"serve", "--config", cfg[k]}, (dir / ("serve" + std::to_string(k) + ".log")).string());
    REQUIRE(serve[k] > 0);
    guards[k] = std::make_unique<ProcessGuard>(serve[k]);
  }
  for (int k = 0; k < 2; ++k) {
    const std::string base = "http://127.0.0.1:" + std::to_string(ports[k]);
    pub::UrlScheme urls(base);
    bool offered = false;
    for (int i = 0; i < 200 && !offered; ++i) {
      offered = get_status(base + "/robots.txt") == 200 &&
                get(urls.capability_list("up")).body.find("resourcedump.xml") != std::string::npos &&
                get(urls.capability_list("up")).body.find("changedump.xml") != std::string::npos;
      if (!offered) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    REQUIRE(offered);
    CHECK(std::filesystem::exists(dir / "data" / "dumps" / ("127.0.0.1-" + std::to_string(ports[k])) / "up"));
    CHECK(std::filesystem::exists(dir / "data" / "documents" / ("127.0.0.1-" + std::to_string(ports[k])) / "up"));
  }
  // Each serves every package it lists, whole: neither removed nor
  // rewrote the other's files.
  for (int k = 0; k < 2; ++k) {
    pub::UrlScheme urls("http://127.0.0.1:" + std::to_string(ports[k]));
    for (const std::string& listing : {urls.resource_dump("up"), urls.change_dump("up")}) {
      CAPTURE(listing);
      auto doc = rs::parse_document(get(listing).body);
      REQUIRE(doc.summary.valid());
      CHECK(doc.document.entries.size() >= 3);
      for (const auto& pkg : doc.document.entries) {
        Got zip = get(pkg.loc);
        CHECK(zip.status == 200);
        CHECK(rs::hash_hex(rs::HashAlgorithm::sha256, zip.body) == pkg.md->hash[0].hex);
      }
    }
  }
}

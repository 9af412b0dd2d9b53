// The republisher's retention and archives over a real store filled by a
// real sync: whole Change List parts compacted, their packages kept in the
// archives, and followers behind catching up or re-baselining.
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

TEST_CASE("Republisher: retention compacts whole Change List parts and their Change Dump packages, a follower behind re-baselines") {
  Published a(/*dumps=*/true, 10000, /*change_list_part=*/1); // four changes: parts 1 to 4 close
  pub::UrlScheme urls(a.base);
  auto index = [&] { return rs::parse_document(get(urls.change_list_index("up")).body).document; };
  auto packages = [&] {
    std::vector<std::string> out;
    for (const auto& e : rs::parse_document(get(urls.change_dump("up")).body).document.entries) {
      out.push_back(e.loc);
    }
    return out;
  };
  auto wait_for = [](const std::function<bool()>& ok) { return eventually(ok, 10); };
  // B follows A while A still publishes every change.
  SyncEnv b;
  auto src = SyncEnv::source(a.base + "/", "a");
  REQUIRE(b.run(src, RunMode::incremental).status == RunStatus::succeeded);
  // Three more changes upstream: parts 5 to 7 close on A.
  a.change_upstream();
  REQUIRE(wait_for([&] { return index().entries.size() == 8; })); // seven closed, then the open one
  REQUIRE(wait_for([&] { return packages().size() == 7; }));
  const auto before = index();
  const Got part7 = get(urls.change_list_part("up", 7));
  REQUIRE(part7.status == 200);
  const auto pkg_dir = a.env.data / "dumps" / "up" / "changes";
  REQUIRE(std::filesystem::exists(pkg_dir / "6.zip"));

  // Retention with a horizon just past the end of part 6: parts 1 to 6 go.
  const rs::Timestamp cutoff = *before.entries[5].md->until + std::chrono::microseconds(1);
  const auto plan = a.server->compactable(cutoff);
  REQUIRE(plan.compact.size() == 1);
  CHECK(plan.compact[0].parts == 6);
  auto removed = a.env.store->compact_change_log(plan.compact, plan.published);
  REQUIRE(removed);
  CHECK(*removed == 6);
  a.server->refresh_soon();
  REQUIRE(wait_for([&] { return index().entries.size() == 2; }));
  const auto after = index();
  CHECK(after.entries[0].loc == urls.change_list_part("up", 7)); // numbering goes on
  CHECK(after.entries[1].loc == urls.change_list("up"));
  CHECK(after.header.md->from == before.entries[5].md->until); // where the history published now starts
  CHECK(get(urls.change_list_part("up", 7)).body == part7.body); // the same bytes
  CHECK(get(urls.change_list_part("up", 1)).status == 404);
  CHECK(get(urls.change_list_part("up", 6)).status == 404);
  CHECK_FALSE(std::filesystem::exists(a.env.data / "documents" / "up" / "changelist-6.xml"));
  CHECK(wait_for([&] { return packages().size() == 1; }));
  CHECK(packages() == std::vector<std::string>{urls.change_dump_package("up", 7)});
  CHECK_FALSE(std::filesystem::exists(pkg_dir / "6.zip"));
  CHECK(std::filesystem::exists(pkg_dir / "7.zip"));
  // Compacting again is a no-op.
  CHECK(*a.env.store->compact_change_log(a.server->compactable(cutoff).compact, plan.published) == 0);

  // A republisher started afresh on the same database publishes the same
  // history under the same names.
  {
    Beside fresh(a, a.env.store, nullptr, "documents-fresh", /*change_list_part=*/1, a.base + "/");
    const Got idx = get(fresh.base + "/sets/up/changelist-index.xml");
    CHECK(idx.body == get(urls.change_list_index("up")).body);
    CHECK(get(fresh.base + "/sets/up/changelist-7.xml").body == part7.body);
  }

  // B's last change is older than what A still publishes: B re-baselines,
  // and holds what A holds.
  auto r = b.run(src, RunMode::incremental);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(std::any_of(r.notes.begin(), r.notes.end(), [](const auto& n) { return n.rfind("re-baselined", 0) == 0; }));
  CHECK(b.live() == mirrored(a, urls));
}

namespace {

// An archive as we serve it: a valid document of `capability` listing `n`.
rs::ParsedDocument archive_listing(const std::string& url, rs::Capability capability, size_t n) {
  const Got archive = get(url);
  REQUIRE(archive.status == 200);
  auto listed = rs::parse_document(archive.body);
  CHECK(listed.summary.valid());
  CHECK(listed.document.header.capability() == capability);
  REQUIRE(listed.document.entries.size() == n);
  return listed;
}

} // namespace

TEST_CASE("Archives: compacted Change List parts stay in the Change List Archive, a follower behind catches up "
          "through it instead of re-baselining, and the Resource List Archive holds a snapshot") {
  Published a(/*dumps=*/false, 10000, /*change_list_part=*/1, {}, 1ull << 30, std::chrono::milliseconds(0),
              /*archives=*/true);
  pub::UrlScheme urls(a.base);
  auto index = [&] { return rs::parse_document(get(urls.change_list_index("up")).body).document; };
  auto wait_for = [](const std::function<bool()>& ok) { return eventually(ok, 10); };
  // The Capability List offers both archives.
  const std::string caps = get(urls.capability_list("up")).body;
  CHECK(caps.find("<loc>" + urls.change_list_archive("up") + "</loc><rs:md capability=\"changelist-archive\"/>") !=
        std::string::npos);
  CHECK(caps.find("<loc>" + urls.resource_list_archive("up") + "</loc><rs:md capability=\"resourcelist-archive\"/>") !=
        std::string::npos);
  // B follows A while A still publishes every change.
  SyncEnv b;
  auto src = SyncEnv::source(a.base + "/", "a");
  REQUIRE(b.run(src, RunMode::incremental).status == RunStatus::succeeded);
  a.change_upstream(); // parts 5 to 7 close on A
  REQUIRE(wait_for([&] { return index().entries.size() == 8; }));
  const auto before = index();
  std::vector<std::string> parts;
  for (size_t n = 1; n <= 7; ++n) {
    parts.push_back(get(urls.change_list_part("up", n)).body);
  }

  // Retention past part 6: the parts go into the archive, then out of the
  // change log.
  a.compact_through(*before.entries[5].md->until, 6);
  REQUIRE(wait_for([&] { return index().entries.size() == 2; }));
  // The archive names every closed part, compacted or not, with its span,
  // and serves the compacted ones with the bytes they had.
  const auto listed = archive_listing(urls.change_list_archive("up"), rs::Capability::changelist_archive, 7);
  for (size_t n = 1; n <= 7; ++n) {
    const auto& e = listed.document.entries[n - 1];
    CHECK(e.loc == urls.change_list_part("up", n));
    CHECK(e.md->until == before.entries[n - 1].md->until);
    CHECK(get(urls.change_list_part("up", n)).body == parts[n - 1]);
  }

  // B is behind what the Change List still shows: it catches up through the
  // archive, without a baseline, and holds what A holds.
  auto r = b.run(src, RunMode::incremental);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(std::none_of(r.notes.begin(), r.notes.end(), [](const auto& n) { return n.rfind("re-baselined", 0) == 0; }));
  CHECK(std::any_of(r.notes.begin(), r.notes.end(),
                    [](const auto& n) { return n.rfind("caught up through the Change List Archive", 0) == 0; }));
  CHECK(b.live() == mirrored(a, urls));

  // The Resource List Archive: the snapshot taken when the list was first
  // published, its document served from the archive.
  auto rl_archive = rs::parse_document(get(urls.resource_list_archive("up")).body);
  CHECK(rl_archive.summary.valid());
  REQUIRE(rl_archive.document.entries.size() == 1);
  CHECK(rl_archive.document.entries[0].md->at.has_value());
  auto snapshot = rs::parse_document(get(rl_archive.document.entries[0].loc).body);
  CHECK(snapshot.summary.valid());
  CHECK(snapshot.document.header.capability() == rs::Capability::resourcelist);
  CHECK(snapshot.document.entries.size() == 2); // a.txt and b.txt, as when it was taken
}

TEST_CASE("Archives: compacted parts' Change Dump packages stay at their URLs in the Change Dump Archive, and a "
          "follower behind the live Change Dump catches up from archived packages instead of re-baselining") {
  Published a(/*dumps=*/true, 10000, /*change_list_part=*/1, {}, 1ull << 30, std::chrono::milliseconds(0),
              /*archives=*/true);
  pub::UrlScheme urls(a.base);
  auto wait_for = [](const std::function<bool()>& ok) { return eventually(ok, 10); };
  auto change_dump = [&] { return rs::parse_document(get(urls.change_dump("up")).body).document; };
  REQUIRE(get(urls.capability_list("up")).body.find("<loc>" + urls.change_dump_archive("up") +
                                                    "</loc><rs:md capability=\"changedump-archive\"/>") !=
          std::string::npos);
  // B baselines from A's Resource Dump and follows A's Change Dump.
  REQUIRE(eventually_says(urls.capability_list("up"), "resourcedump.xml"));
  SyncEnv b;
  auto src = SyncEnv::source(a.base + "/", "a");
  src.strategy = "dumps";
  REQUIRE(b.run(src, RunMode::incremental).status == RunStatus::succeeded);
  a.change_upstream(); // parts 5 to 7 close on A, and are packed
  REQUIRE(wait_for([&] { return change_dump().entries.size() == 7; }));
  const auto live = change_dump();
  std::vector<std::string> zips;
  std::vector<std::string> manifests;
  for (const auto& e : live.entries) {
    zips.push_back(get(e.loc).body);
    manifests.push_back(get(e.find_link("contents")->href).body);
  }

  // Retention past part 6: parts and packages go into the archives, then
  // out of the change log and the live Change Dump.
  a.compact_through(*live.entries[5].md->until, 6);
  REQUIRE(wait_for([&] { return change_dump().entries.size() == 1; }));

  // The archive: an archived Change Dump per compacted part, with its span,
  // then the live Change Dump; the packages keep their URLs and bytes.
  const auto listed = archive_listing(urls.change_dump_archive("up"), rs::Capability::changedump_archive, 7);
  for (size_t n = 1; n <= 6; ++n) {
    const auto& e = listed.document.entries[n - 1];
    CHECK(e.loc == urls.archived_change_dump("up", n));
    CHECK(e.md->until == live.entries[n - 1].md->until);
    auto archived = rs::parse_document(get(e.loc).body);
    CHECK(archived.summary.valid());
    CHECK(archived.document.header.capability() == rs::Capability::changedump);
    CHECK(archived.document.header.md->until == live.entries[n - 1].md->until);
    REQUIRE(archived.document.entries.size() == 1);
    CHECK(archived.document.entries[0].loc == live.entries[n - 1].loc);
    CHECK(archived.document.entries[0].md->hash == live.entries[n - 1].md->hash);
    CHECK(get(live.entries[n - 1].loc).body == zips[n - 1]);
    CHECK(get(live.entries[n - 1].find_link("contents")->href).body == manifests[n - 1]);
  }
  CHECK(listed.document.entries[6].loc == urls.change_dump("up"));
  CHECK(get(urls.change_dump_package("up", 8)).status == 404); // never was

  // B is behind the live Change Dump: it applies the archived packages,
  // without a baseline, and holds what A holds.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100)); // A's Change List shows the open part too
  auto r = b.run(src, RunMode::incremental);
  CHECK(r.status == RunStatus::succeeded);
  CHECK_FALSE(has_note(r, "re-baselined"));
  CHECK(has_note(r, "caught up through the Change Dump Archive"));
  CHECK(has_note(r, "caught up from the Change Dump"));
  CHECK(b.live() == mirrored(a, urls));
}

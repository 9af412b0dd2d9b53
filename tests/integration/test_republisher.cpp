// The republisher over a real store filled by a real sync: every document
// served validates and the tree is navigable; content serving semantics; and
// a second-level chain upstream -> A -> B.
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

TEST_CASE("Republisher: every document from /.well-known/resourcesync validates, and the tree links upwards") {
  Published p;
  std::deque<std::string> todo{p.base + "/.well-known/resourcesync"};
  std::set<std::string> seen;
  size_t documents = 0;
  while (!todo.empty()) {
    const std::string url = todo.front();
    todo.pop_front();
    if (!seen.insert(url).second) {
      continue;
    }
    Got g = get(url);
    REQUIRE_MESSAGE(g.status == 200, url);
    auto doc = rs::parse_document(g.body);
    std::string diags;
    for (const auto& d : doc.summary.diagnostics) {
      diags += d.message + "\n";
    }
    INFO(url << "\n" << diags);
    CHECK(doc.summary.valid());
    CHECK(doc.summary.warnings == 0);
    ++documents;
    const auto cap = doc.document.header.capability();
    if (cap != rs::Capability::description) {
      REQUIRE(doc.document.header.find_link("up"));
      if (const auto* index = doc.document.header.find_link("index")) {
        CHECK(get(index->href).status == 200);
        todo.push_back(index->href); // the open Change List's index is checked too
      }
      CHECK(get(doc.document.header.find_link("up")->href).status == 200);
    }
    const bool lists_documents = cap == rs::Capability::description || cap == rs::Capability::capabilitylist ||
                                 doc.document.header.root == rs::RootElement::sitemapindex;
    if (lists_documents) {
      for (const auto& e : doc.document.entries) {
        todo.push_back(e.loc);
      }
    }
  }
  CHECK(documents >= 5); // description, capability list, resource list, the open change list and its index
  // What the Capability List names is the open Change List (a urlset), not
  // the index: a client that reads only that (py-resync) can follow.
  const Got cl = get(p.base + "/sets/up/changelist.xml");
  const auto open = rs::parse_document(cl.body);
  CHECK(open.document.header.root == rs::RootElement::urlset);
  CHECK_FALSE(open.document.header.md->until);
  CHECK(open.document.header.find_link("index")->href == p.base + "/sets/up/changelist-index.xml");
  auto robots = get(p.base + "/robots.txt");
  CHECK(robots.status == 200);
  CHECK(robots.body.find("Sitemap: " + p.base + "/sets/up/resourcelist.xml") != std::string::npos);
}

TEST_CASE("Republisher: content with ETag/304, Range, HEAD, 410 for deleted, and no way out of the store") {
  Published p;
  pub::UrlScheme urls(p.base);
  const std::string b = urls.resource("up", p.up.url("/res/b.txt"));
  Got g = get(b);
  REQUIRE(g.status == 200);
  CHECK(g.body == "bravo bravo");
  CHECK(header(g, "Content-Type") == "text/plain");
  const std::string etag = header(g, "ETag");
  CHECK(etag == "\"" + rs::hash_hex(rs::HashAlgorithm::sha256, "bravo bravo") + "\"");
  CHECK_FALSE(header(g, "Last-Modified").empty());
  CHECK(header(g, "Link") == "<" + urls.capability_list("up") + ">; rel=\"resourcesync\"");
  // An upstream's bytes in our origin: never sniffed, any script sandboxed.
  CHECK(header(g, "X-Content-Type-Options") == "nosniff");
  CHECK(header(g, "Content-Security-Policy") == "sandbox");
  CHECK(get(b, {{"If-None-Match", etag}}).status == 304);
  CHECK(get(b, {{"If-Modified-Since", header(g, "Last-Modified")}}).status == 304);
  Got range = get(b, {{"Range", "bytes=6-10"}});
  CHECK(range.status == 206);
  CHECK(range.body == "bravo");
  Got head = get(b, {}, true);
  CHECK(head.status == 200);
  CHECK(head.body.empty());
  CHECK(header(head, "Content-Length") == "11");
  CHECK(get(urls.resource("up", p.up.url("/res/c.txt"))).status == 410);
  CHECK(get(urls.resource("up", p.up.url("/res/never.txt"))).status == 404);
  for (const char* evil : {"/sets/up/resources/..%2F..%2F..%2Fetc%2Fpasswd", "/sets/up/resources/%2e%2e",
                           "/sets/../../etc/passwd", "/sets/up/resources/a/../../../etc/passwd",
                           "/sets/nope/resources/x", "/..%2f..%2fetc/passwd"}) {
    CAPTURE(evil);
    Got e = get(p.base + evil);
    CHECK((e.status == 404 || e.status == 400));
    CHECK(e.body.find("root:") == std::string::npos);
  }
  // Documents: ETag/304 and a gzip body when asked for.
  Got rl = get(urls.resource_list("up"));
  REQUIRE(rl.status == 200);
  CHECK(get(urls.resource_list("up"), {{"If-None-Match", header(rl, "ETag")}}).status == 304);
  Got gz = get(urls.resource_list("up"), {{"Accept-Encoding", "gzip"}});
  CHECK(header(gz, "Content-Encoding") == "gzip");
}

TEST_CASE("Republisher: a change renders only the sets over its feed again") {
  Published p;
  REQUIRE(p.env.run(SyncEnv::source(p.up.url("/"), "second"), RunMode::baseline).status != RunStatus::failed);
  auto counting = std::make_shared<CountingReader>(p.env.store);
  Beside b(p, counting, p.env.store, "documents-counting");
  const pub::UrlScheme& urls = b.urls;
  auto feeds = p.env.store->feeds();
  REQUIRE(feeds);
  std::vector<int64_t> up, second;
  for (const auto& f : *feeds) {
    (f.source_name == "up" ? up : second).push_back(f.feed_id);
  }
  // Past any refresh still due from the start (counts still for 1.5 s).
  for (int last = -1; last != counting->of(second);) {
    last = counting->of(second);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  }
  const int up_before = counting->of(up);
  const int second_before = counting->of(second);
  REQUIRE(second_before > 0);
  p.change_upstream(); // syncs "up" only
  b.server->refresh_soon();
  bool shown = false;
  for (int i = 0; i < 50 && !shown; ++i) {
    shown = get(urls.change_list("up")).body.find(urls.resource("up", p.up.url("/res/d.txt"))) != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  REQUIRE(shown);
  CHECK(counting->of(up) > up_before);
  CHECK(counting->of(second) == second_before); // not read again
  CHECK(get(urls.change_list("second")).status == 200); // and still served
}

TEST_CASE("Republisher: content lookups go over connections of their own, never behind the main one") {
  Published p;
  auto gated = std::make_shared<GatedReader>(p.env.store);
  auto pool = store::PgReaderPool::open(p.env.db.conninfo(), 2);
  REQUIRE(pool);
  Beside b(p, gated, *pool, "documents-gated");
  const pub::UrlScheme& urls = b.urls;
  {
    std::unique_lock hold(gated->gate); // a long commit on the main connection
    // Neither is cached before this: a 404 is never cached, and b.txt was
    // never asked for from this server.
    CHECK(get_status(urls.resource("up", p.up.url("/res/never.txt"))) == 404);
    CHECK(get_status(urls.resource("up", p.up.url("/res/b.txt"))) == 200);
    CHECK(get_status(urls.resource("up", p.up.url("/res/c.txt"))) == 410);
  }
}

TEST_CASE("Republisher: content from inside a pack file and from a file of its own, whole and in ranges") {
  auto pattern = [](size_t n) {
    std::string s(n, '\0');
    for (size_t i = 0; i < n; ++i) {
      s[i] = static_cast<char>((i * 31 + i / 251) % 251);
    }
    return s;
  };
  const std::string packed = pattern(200000);                                // > 64 KiB: sent from the pack
  const std::string own_file = pattern(store::BlobStore::k_pack_max + 4096); // a file of its own
  Published p(false, 10000, 10000, {{"/res/packed.bin", packed}, {"/res/file.bin", own_file}});
  REQUIRE(p.env.blobs->locate(rs::hash_hex(rs::HashAlgorithm::sha256, packed))->offset > 0);
  REQUIRE(p.env.blobs->locate(rs::hash_hex(rs::HashAlgorithm::sha256, own_file))->offset == 0);
  pub::UrlScheme urls(p.base);
  for (const auto& [path, bytes] : {std::pair<const char*, const std::string&>{"/res/packed.bin", packed},
                                    {"/res/file.bin", own_file}}) {
    CAPTURE(path);
    const std::string url = urls.resource("up", p.up.url(path));
    Got whole = get(url);
    REQUIRE(whole.status == 200);
    CHECK(whole.body.size() == bytes.size());
    CHECK(whole.body == bytes);
    Got range = get(url, {{"Range", "bytes=100000-100009"}});
    CHECK(range.status == 206);
    CHECK(range.body == bytes.substr(100000, 10));
    Got tail = get(url, {{"Range", "bytes=-7"}});
    CHECK(tail.status == 206);
    CHECK(tail.body == bytes.substr(bytes.size() - 7));
    CHECK(get(url, {{"Range", "bytes=" + std::to_string(bytes.size()) + "-"}}).status == 416);
  }
}

TEST_CASE("Republisher: closed Change List parts are written once and served from files, plain and gzip") {
  Published p(false, 10000, /*change_list_part=*/1); // four changes: parts 1 to 4 close, changelist.xml is open
  pub::UrlScheme urls(p.base);
  const std::string part = urls.change_list_part("up", 1);
  const auto file = p.env.data / "documents" / "up" / std::filesystem::path(urls.path_of(part)).filename();
  REQUIRE(std::filesystem::exists(file));
  REQUIRE(std::filesystem::exists(file.string() + ".gz"));
  Got plain = get(part);
  REQUIRE(plain.status == 200);
  std::ifstream in(file, std::ios::binary);
  CHECK(plain.body == std::string(std::istreambuf_iterator<char>(in), {}));
  CHECK(header(plain, "Cache-Control") == "public, max-age=31536000, immutable");
  auto parsed = rs::parse_document(plain.body);
  CHECK(parsed.summary.valid());
  CHECK(parsed.document.entries.size() == 1);
  Got gz = get(part, {{"Accept-Encoding", "gzip"}});
  CHECK(gz.status == 200);
  CHECK(header(gz, "Content-Encoding") == "gzip");
  CHECK(gz.body == plain.body); // the client inflated the .gz file
  CHECK(get(part, {{"If-None-Match", header(plain, "ETag")}}).status == 304);
  // The open part stays in memory (it changes).
  CHECK(std::filesystem::exists(p.env.data / "documents" / "up" / "changelist-4.xml"));
  CHECK_FALSE(std::filesystem::exists(p.env.data / "documents" / "up" / "changelist-5.xml"));
  CHECK(get(urls.change_list_part("up", 5)).status == 404);
  CHECK(get(urls.change_list("up")).status == 200);
}

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

TEST_CASE("Republisher: a large open Change List is served from a file, which goes when a newer one replaces it") {
  std::map<std::string, std::string> many;
  for (int i = 0; i < 200; ++i) {
    many["/res/many-" + std::to_string(i) + ".txt"] = "resource " + std::to_string(i);
  }
  Published p(false, 10000, 10000, many); // 200+ changes in the open part: past 64 KB
  pub::UrlScheme urls(p.base);
  const auto dir = p.env.data / "documents" / "up";
  auto open_files = [&] {
    std::set<std::string> out;
    for (const auto& f : std::filesystem::directory_iterator(dir)) {
      const std::string name = f.path().filename().string();
      if (name.rfind("open-", 0) == 0 && f.path().extension() == ".xml") {
        out.insert(name);
      }
    }
    return out;
  };
  const Got first = get(urls.change_list("up"));
  REQUIRE(first.status == 200);
  REQUIRE(first.body.size() > 64 * 1024);
  const auto before = open_files();
  REQUIRE(before.size() == 1);
  {
    std::ifstream in(dir / *before.begin(), std::ios::binary);
    CHECK(first.body == std::string(std::istreambuf_iterator<char>(in), {}));
  }
  Got gz = get(urls.change_list("up"), {{"Accept-Encoding", "gzip"}});
  CHECK(header(gz, "Content-Encoding") == "gzip");
  CHECK(gz.body == first.body);
  CHECK(header(first, "Cache-Control") == "no-cache");
  p.change_upstream();
  p.server->refresh_soon();
  bool moved = false;
  for (int i = 0; i < 50 && !moved; ++i) {
    moved = get(urls.change_list("up")).body != first.body;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  REQUIRE(moved);
  const auto after = open_files();
  CHECK(after.size() == 1);
  CHECK(after != before); // the replaced one is gone
  CHECK_FALSE(std::filesystem::exists(dir / (*before.begin() + ".gz")));
}

TEST_CASE("Republisher: a second Tributary follows the first, content byte for byte, via the original") {
  Published a;
  SyncEnv b;
  auto src = SyncEnv::source(a.base + "/", "a");
  auto r = b.run(src, RunMode::incremental);
  CHECK(r.status == RunStatus::succeeded);
  // B holds A's copies (A's URLs) with the upstream's bytes; a B record's
  // via is the original upstream URI, not A.
  pub::UrlScheme urls(a.base);
  check_second_level(a, b, urls, "/res/a.txt");

  // Changes upstream reach B through A's Change List.
  a.change_upstream();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500)); // A re-renders within a second
  auto again = b.run(src, RunMode::incremental);
  CHECK(again.status == RunStatus::succeeded);
  CHECK(b.live() == mirrored(a, urls));
}

TEST_CASE("Republisher: upstream -> Tributary A -> Tributary B as real processes, across closed Change List parts") {
  Upstream up;
  Site site(up);
  site.put("/res/a.txt", "alpha");
  site.put("/res/b.txt", "bravo");
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  TempDatabase db_a;
  TempDatabase db_b;
  ScratchDir dir("chain");
  const int port = free_port(); // A binds it right after
  const std::string a_url = "http://127.0.0.1:" + std::to_string(port);
  std::ofstream(dir / "a.json") << "{\"database\": \"" << db_a.conninfo() << "\", \"data_dir\": \"" << (dir / "a").string()
                                << "\", \"listen\": \"127.0.0.1:" << port
                                << "\", \"change_list_part_size\": 2, \"sources\": [{\"name\": \"up\", \"url\": \""
                                << up.url("/") << "\"}]}";
  std::ofstream(dir / "b.json") << "{\"database\": \"" << db_b.conninfo() << "\", \"data_dir\": \"" << (dir / "b").string()
                                << "\", \"listen\": \"127.0.0.1:1\", \"sources\": [{\"name\": \"a\", \"url\": \"" << a_url
                                << "/\"}]}";
  const std::string a_cfg = (dir / "a.json").string();
  const std::string b_cfg = (dir / "b.json").string();
  REQUIRE(run_tributary("migrate --config " + a_cfg).status == 0);
  REQUIRE(run_tributary("migrate --config " + b_cfg).status == 0);
  auto a_sync = run_tributary("sync --config " + a_cfg + " --incremental");
  INFO(a_sync.out);
  REQUIRE(a_sync.status == 0);
  pid_t serve = spawn_tributary({"serve", "--config", a_cfg}, (dir / "serve.log").string());
  ProcessGuard guard(serve);
  REQUIRE(serve > 0);
  for (int i = 0; i < 200 && get_status(a_url + "/robots.txt") != 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto b_sync = run_tributary("sync --config " + b_cfg + " --incremental");
  INFO(b_sync.out);
  CHECK(b_sync.status == 0);

  // Upstream changes: update, create, delete; A follows, re-renders, B follows.
  site.put("/res/a.txt", "alpha v2");
  site.put("/res/c.txt", "charlie");
  site.erase("/res/b.txt");
  site.publish_change_list("/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt,
                           {change_entry(up.url("/res/a.txt"), rs::Change::updated, ts("2026-01-02T00:00:00Z"), "alpha v2"),
                            change_entry(up.url("/res/c.txt"), rs::Change::created, ts("2026-01-02T00:00:01Z"), "charlie"),
                            change_entry(up.url("/res/b.txt"), rs::Change::deleted, ts("2026-01-02T00:00:02Z"))});
  REQUIRE(run_tributary("sync --config " + a_cfg + " --incremental").status == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500)); // A re-renders within a second
  auto b_again = run_tributary("sync --config " + b_cfg + " --incremental");
  INFO(b_again.out);
  CHECK(b_again.status == 0);
  CHECK(b_again.out.find("created 1, updated 1, deleted 1") != std::string::npos);
  // The Capability List names A's open Change List, which starts after B's
  // last change: B found the closed part in between through the index it
  // links, and did not re-baseline.
  CHECK(b_again.out.find("read its index " + a_url + "/sets/up/changelist-index.xml") != std::string::npos);
  CHECK(b_again.out.find("re-baselined") == std::string::npos);

  // B's live content equals the upstream's, byte for byte, and its via links
  // name the original URIs.
  pqxx::connection c(db_b.conninfo());
  pqxx::read_transaction tx(c);
  std::map<std::string, std::string> via_to_sha;
  for (const auto& row : tx.exec("SELECT links::text, blob_sha256 FROM resource WHERE state = 'live'")) {
    auto links = nlohmann::json::parse(row[0].as<std::string>());
    for (const auto& l : links) {
      if (l["rel"] == "via") {
        via_to_sha[l["href"].get<std::string>()] = row[1].as<std::string>();
      }
    }
  }
  std::map<std::string, std::string> expected;
  for (const auto& [path, bytes] : site.content) {
    expected[up.url(path)] = rs::hash_hex(rs::HashAlgorithm::sha256, bytes);
  }
  CHECK(via_to_sha == expected);
  // A's Change List has closed parts (two changes each) and B crossed them;
  // closed parts may be cached forever, the open one may not.
  Got index = get(a_url + "/sets/up/changelist-index.xml");
  auto parsed = rs::parse_document(index.body);
  REQUIRE(parsed.document.entries.size() >= 3);
  CHECK(parsed.document.entries.back().loc == a_url + "/sets/up/changelist.xml");
  CHECK(header(get(parsed.document.entries.front().loc), "Cache-Control") == "public, max-age=31536000, immutable");
  CHECK(header(get(parsed.document.entries.back().loc), "Cache-Control") == "no-cache");

  kill(serve, SIGTERM);
  int status = 0;
  waitpid(serve, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

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

TEST_CASE("Republisher: a serve replica shows another process's changes at once, told by NOTIFY, not by polling") {
  Upstream up;
  Site site(up);
  site.put_numbered(3, "/res/r", "bytes ");
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  TempDatabase db;
  ScratchDir dir("notify");
  const int port = free_port();
  const std::string cfg = (dir / "c.json").string();
  std::ofstream(cfg) << "{\"database\": \"" << db.conninfo() << "\", \"data_dir\": \"" << (dir / "data").string()
                     << "\", \"listen\": \"127.0.0.1:" << port << "\", \"sources\": [{\"name\": \"up\", \"url\": \""
                     << up.url("/") << "\"}]}";
  REQUIRE(run_tributary("migrate --config " + cfg).status == 0);
  REQUIRE(run_tributary("sync --config " + cfg + " --incremental").status == 0);
  pid_t serve = spawn_tributary({"serve", "--config", cfg}, (dir / "serve.log").string());
  ProcessGuard guard(serve);
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  pub::UrlScheme urls(base);
  for (int i = 0; i < 200 && get_status(urls.change_list("up")) != 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(get_status(urls.change_list("up")) == 200);
  // Two changes, each synced by another process (`tributary sync`): the
  // replica asks the store on its own only every 10 s, so each showing
  // within 3 s is the notification's doing.
  std::vector<rs::Entry> changes;
  for (int n = 0; n < 2; ++n) {
    const std::string path = "/res/new" + std::to_string(n);
    site.put(path, "new " + std::to_string(n));
    changes.push_back(change_entry(up.url(path), rs::Change::created,
                                   ts("2026-01-02T00:00:00Z") + std::chrono::seconds(n), "new " + std::to_string(n)));
    site.publish_change_list("/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt, changes);
    REQUIRE(run_tributary("sync --config " + cfg + " --incremental").status == 0);
    const auto synced = std::chrono::steady_clock::now();
    const std::string ours = urls.resource("up", up.url(path));
    bool shown = false;
    while (!shown && std::chrono::steady_clock::now() - synced < std::chrono::seconds(3)) {
      shown = get(urls.change_list("up")).body.find(ours) != std::string::npos;
      if (!shown) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    CAPTURE(n);
    CHECK(shown);
  }
}

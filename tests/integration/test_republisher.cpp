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

TEST_CASE("Signposting through: an upstream entry's cite-as and describedby come out on our entry and as Link "
          "headers on our copy, and a link we could not send intact is left out") {
  Published p;
  p.site.put("/res/e.txt", "echo");
  rs::Entry e = change_entry(p.up.url("/res/e.txt"), rs::Change::created, ts("2026-01-04T00:00:00Z"), "echo");
  rs::Link cite;
  cite.rel = "cite-as";
  cite.href = "https://doi.org/10.1234/e";
  rs::Link described;
  described.rel = "describedby";
  described.href = "https://repo.example.org/e.json";
  described.type = "application/ld+json";
  rs::Link hostile;
  hostile.rel = "license";
  hostile.href = "https://x.example/\">; rel=\"canonical"; // would forge a header parameter
  e.links = {cite, described, hostile};
  p.site.publish_change_list("/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt,
                             {change_entry(p.up.url("/res/c.txt"), rs::Change::deleted, ts("2026-01-02T00:00:00Z")), e});
  REQUIRE(p.env.run(SyncEnv::source(p.up.url("/")), RunMode::incremental).status == RunStatus::succeeded);
  const pub::UrlScheme urls(p.base);
  Got copy = get(urls.resource("up", p.up.url("/res/e.txt")));
  REQUIRE(copy.status == 200);
  const std::string link = header(copy, "Link");
  CHECK(link.find("<" + urls.capability_list("up") + ">; rel=\"resourcesync\"") != std::string::npos);
  CHECK(link.find("<https://doi.org/10.1234/e>; rel=\"cite-as\"") != std::string::npos);
  CHECK(link.find("<https://repo.example.org/e.json>; rel=\"describedby\"; type=\"application/ld+json\"") !=
        std::string::npos);
  CHECK(link.find("canonical") == std::string::npos);
  CHECK(link.find("license") == std::string::npos);
  // Our entry carries them too (Signmap: rs:ln in the sitemap).
  CHECK(eventually_says(urls.resource_list("up"), "rel=\"cite-as\" href=\"https://doi.org/10.1234/e\"", 10));
}

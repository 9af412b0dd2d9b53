// Sources shaped like the ones in the field, over real HTTP into
// PostgreSQL: values off the letter of the spec that real writers publish
// (base64 hashes, unknown algorithms, relative locs), Sources that offer a
// Resource List and nothing else, plain sitemaps named in robots.txt, and a
// Source that stamps `at` after a change it does not list.
#include "daemon_client.h"
#include "process.h"
#include "sync_fixture.h"

#include "common/percent.h"
#include "resourcesync/reader.h"
#include "resourcesync/writer.h"
#include "sync_engine/fetcher.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <openssl/evp.h>

#include <cstring>
#include <thread>

using namespace tributary;
using namespace tributary::test;
using nlohmann::json;
using store::RunMode;
using store::RunStatus;

namespace {

std::string base64(const std::string& hex, bool url) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  if (url) {
    for (auto& c : out) {
      c = c == '+' ? '-' : c == '/' ? '_' : c;
    }
    while (!out.empty() && out.back() == '=') {
      out.pop_back();
    }
  }
  return out;
}

// The Resource List of `content` as a hand-written document, so that each
// entry can carry what real writers put there.
std::string resource_list_xml(const std::string& at, const std::vector<std::string>& urls) {
  std::string xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                    "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" "
                    "xmlns:rs=\"http://www.openarchives.org/rs/terms/\">\n"
                    "<rs:md capability=\"resourcelist\" at=\"" + at + "\"/>\n";
  for (const auto& u : urls) {
    xml += u + "\n";
  }
  return xml + "</urlset>\n";
}

} // namespace

TEST_CASE("Field: base64 and base64url hashes, an unknown extra algorithm and relative locs lose no entry") {
  Upstream up;
  publish_list_only_caps(up);
  std::map<std::string, std::string> content;
  std::vector<std::string> entries;
  for (int i = 0; i < 400; ++i) {
    const std::string path = "/res/" + std::to_string(i);
    const std::string bytes = "honest resource " + std::to_string(i);
    content[path] = bytes;
    up.set(path, bytes, "text/plain");
    const std::string md5 = rs::hash_hex(rs::HashAlgorithm::md5, bytes);
    const std::string sha = rs::hash_hex(rs::HashAlgorithm::sha256, bytes);
    std::string e;
    switch (i % 4) {
    case 0: // py-resync before 1.0 and the 2015 simulator
      e = "<url><loc>" + up.url(path) + "</loc><rs:md hash=\"md5:" + base64(md5, false) + "\"/></url>";
      break;
    case 1: // the spec's example 27
      e = "<url><loc>" + up.url(path) + "</loc><rs:md hash=\"sha-256:" + base64(sha, true) + "\"/></url>";
      break;
    case 2: // a good md5 beside an algorithm we do not know
      e = "<url><loc>" + up.url(path) + "</loc><rs:md hash=\"md5:" + md5 + " sha-512:" + sha + sha + "\"/></url>";
      break;
    case 3: // relative to the list (py-resync's own test data)
      e = "<url><loc>res/" + std::to_string(i) + "</loc><rs:md hash=\"MD5:" + md5 + "\" length=\"" +
          std::to_string(bytes.size()) + "\"/></url>";
      break;
    }
    entries.push_back(e);
  }
  up.set("/rl.xml", resource_list_xml("2026-01-01T00:00:00Z", entries));
  SyncEnv env;
  auto src = SyncEnv::source(up.url("/"));
  auto r = env.run(src, RunMode::baseline);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(r.counters.created == 400);
  CHECK(r.counters.failed == 0);
  std::map<std::string, std::string> want;
  for (const auto& [path, bytes] : content) {
    want[up.url(path)] = bytes;
  }
  CHECK(env.live() == want);
  // Every one was verified: a Source serving other bytes than its base64
  // hash says is refused.
  up.set("/res/0", "tampered", "text/plain");
  up.set("/res/1", "tampered", "text/plain");
  SyncEnv again;
  auto bad = again.run(src, RunMode::baseline);
  CHECK(bad.counters.failed == 2);
  CHECK(bad.counters.created == 398);
}

TEST_CASE("Field: a Source that offers only a Resource List is followed at every run, and its changes logged") {
  Upstream up;
  publish_list_only_caps(up);
  Site site(up); // its own description and caps are replaced below
  publish_list_only_caps(up);
  site.put_numbered(30);
  site.publish_resource_list(ts("2026-01-01T00:00:00Z"));
  // No Capability List link up: the list publishes only itself.
  SyncEnv env;
  auto src = SyncEnv::source(up.url("/"));
  auto first = env.run(src, RunMode::incremental);
  REQUIRE(first.status == RunStatus::succeeded);
  CHECK(first.counters.created == 30);
  CHECK(env.live() == expected_live(site));
  const size_t logged = env.log().size();

  // Unchanged: nothing fetched, nothing logged.
  auto idle = env.run(src, RunMode::incremental);
  CHECK(idle.status == RunStatus::succeeded);
  CHECK(idle.counters.created + idle.counters.updated + idle.counters.deleted == 0);
  CHECK(env.log().size() == logged);

  for (int i = 30; i < 35; ++i) {
    site.put("/res/" + std::to_string(i) + ".txt", "new " + std::to_string(i));
  }
  for (int i = 0; i < 3; ++i) {
    site.put("/res/" + std::to_string(i) + ".txt", "changed " + std::to_string(i));
  }
  for (int i = 10; i < 13; ++i) {
    site.erase("/res/" + std::to_string(i) + ".txt");
  }
  site.publish_resource_list(ts("2026-01-01T01:00:00Z"));
  auto next = env.run(src, RunMode::incremental);
  CHECK(next.status == RunStatus::succeeded);
  CHECK(has_note(next, "no Change List offered: compared the Resource List"));
  CHECK(next.counters.created == 5);
  CHECK(next.counters.updated == 3);
  CHECK(next.counters.deleted == 3);
  CHECK(env.live() == expected_live(site));
  auto log = env.log();
  REQUIRE(log.size() == logged + 11);
  std::map<std::string, int> kinds;
  for (size_t i = logged; i < log.size(); ++i) {
    ++kinds[log[i].substr(0, log[i].find(' '))];
  }
  CHECK(kinds["created"] == 5);
  CHECK(kinds["updated"] == 3);
  CHECK(kinds["deleted"] == 3);
}

TEST_CASE("Field: a plain sitemap named only in robots.txt is followed, a same-day change caught") {
  Upstream up;
  std::map<std::string, std::string> content;
  auto publish = [&](const std::string& day) {
    std::string xml = "<?xml version=\"1.0\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n";
    for (const auto& [path, bytes] : content) {
      xml += "<url><loc>" + up.url(path) + "</loc><lastmod>" + day + "</lastmod><changefreq>daily</changefreq></url>\n";
    }
    up.set("/sitemap_items.xml", xml + "</urlset>\n");
  };
  for (int i = 0; i < 20; ++i) {
    content["/items/" + std::to_string(i)] = "item " + std::to_string(i);
    up.set("/items/" + std::to_string(i), content["/items/" + std::to_string(i)], "text/html");
  }
  // Today, as a DSpace sitemap would date it: a change later today keeps the date.
  const std::string today = rs::format_w3c_datetime(std::chrono::time_point_cast<std::chrono::microseconds>(
                                                        std::chrono::system_clock::now()))
                                .substr(0, 10);
  publish(today);
  up.set("/robots.txt", "User-agent: *\nSitemap: " + up.url("/sitemap_items.xml") + "\n", "text/plain");
  SyncEnv env;
  auto src = SyncEnv::source(up.url("/"));
  auto first = env.run(src, RunMode::incremental);
  REQUIRE(first.status == RunStatus::succeeded);
  CHECK(first.kind == "plain-sitemap");
  CHECK(first.counters.created == 20);

  content["/items/3"] = "item 3, edited the same day";
  up.set("/items/3", content["/items/3"], "text/html");
  content["/items/20"] = "item 20";
  up.set("/items/20", content["/items/20"], "text/html");
  content.erase("/items/7");
  up.remove("/items/7");
  publish(today);
  auto next = env.run(src, RunMode::incremental);
  CHECK(next.status == RunStatus::succeeded);
  CHECK(next.counters.created == 1);
  CHECK(next.counters.updated == 1); // same lastmod, other bytes
  CHECK(next.counters.deleted == 1);
  std::map<std::string, std::string> want;
  for (const auto& [path, bytes] : content) {
    want[up.url(path)] = bytes;
  }
  CHECK(env.live() == want);
  auto log = env.log();
  CHECK(std::count(log.begin(), log.end(), "updated " + up.url("/items/3")) == 1);
  CHECK(std::count(log.begin(), log.end(), "deleted " + up.url("/items/7")) == 1);
}

TEST_CASE("Field: a change made before the Resource List's at but not listed is applied by the next incremental") {
  for (rs::Change kind : {rs::Change::created, rs::Change::updated, rs::Change::deleted}) {
    CAPTURE(rs::to_string(kind));
    Upstream up;
    Site site(up);
    site.put_numbered(5);
    // The list was walked before the change, but stamped `at` after it
    // (resync-simulator stamps `at` once it has walked its resources).
    site.publish_resource_list(ts("2026-01-01T00:00:00.000500Z"));
    const auto when = ts("2026-01-01T00:00:00.000200Z");
    std::vector<rs::Entry> changes;
    if (kind == rs::Change::created) {
      site.put("/res/new.txt", "created in the gap");
      changes.push_back(change_entry(up.url("/res/new.txt"), kind, when, "created in the gap"));
    } else if (kind == rs::Change::updated) {
      site.put("/res/2.txt", "updated in the gap");
      changes.push_back(change_entry(up.url("/res/2.txt"), kind, when, "updated in the gap"));
    } else {
      site.erase("/res/2.txt");
      changes.push_back(change_entry(up.url("/res/2.txt"), kind, when));
    }
    site.publish_change_list("/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt, changes);
    SyncEnv env;
    auto src = SyncEnv::source(up.url("/"));
    auto r = env.run(src, RunMode::incremental); // never synced: baseline, then the Change List
    CHECK(r.status != RunStatus::failed);
    auto again = env.run(src, RunMode::incremental);
    CHECK(again.status == RunStatus::succeeded);
    CHECK(env.live() == expected_live(site));
    CHECK(env.retries().empty());
    // Applied once: a change read again in the overlap logs nothing more.
    auto log = env.log();
    const std::string uri = up.url(kind == rs::Change::created ? "/res/new.txt" : "/res/2.txt");
    const std::string line = std::string(rs::to_string(kind)) + " " + uri;
    CHECK(std::count(log.begin(), log.end(), line) == 1);
  }
}

namespace {

// Our Change List for a set, every part of it.
std::string our_changes(const std::string& base, const std::string& set) {
  Answer index = call(base, "GET", "/sets/" + set + "/changelist.xml");
  auto doc = rs::parse_document(index.body);
  std::string all = index.body;
  if (doc.document.header.root == rs::RootElement::sitemapindex) {
    for (const auto& e : doc.document.entries) {
      all += call(base, "GET", sync::parse_url(e.loc)->target).body;
    }
  }
  return all;
}

// The original URIs (`via`) our Resource List for a set names (one
// document: these are small).
std::set<std::string> our_list(const std::string& base, const std::string& set) {
  std::set<std::string> out;
  for (const auto& e : rs::parse_document(call(base, "GET", "/sets/" + set + "/resourcelist.xml").body).document.entries) {
    for (const auto& l : e.links) {
      if (l.rel == "via") {
        out.insert(l.href);
      }
    }
  }
  return out;
}

} // namespace

TEST_CASE("Field: the daemon follows a Resource-List-only Source and a plain sitemap named in robots.txt, "
          "and republishes their changes as its own Change Lists") {
  // A ResourceSync Source whose Capability List offers a Resource List only.
  Upstream rl_up;
  Site listed(rl_up);
  publish_list_only_caps(rl_up);
  listed.put_numbered(10);
  listed.publish_resource_list(ts("2026-01-01T00:00:00Z"));
  // A repository that publishes a plain sitemap, named only in robots.txt.
  Upstream sm_up;
  std::map<std::string, std::string> items;
  int version = 0;
  auto publish_sitemap = [&] {
    std::string xml = "<?xml version=\"1.0\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n";
    for (const auto& [path, bytes] : items) {
      // Seconds-granular lastmod, as DSpace 7 writes it, moved on each edit.
      xml += "<url><loc>" + sm_up.url(path) + "</loc><lastmod>2026-01-01T00:00:0" + std::to_string(version) +
             "Z</lastmod></url>\n";
    }
    sm_up.set("/sitemap0.xml", xml + "</urlset>\n");
  };
  for (int i = 0; i < 10; ++i) {
    items["/handle/" + std::to_string(i)] = "item " + std::to_string(i);
    sm_up.set("/handle/" + std::to_string(i), items["/handle/" + std::to_string(i)], "text/html");
  }
  publish_sitemap();
  sm_up.set("/robots.txt", "User-agent: *\nSitemap: " + sm_up.url("/sitemap0.xml") + "\n", "text/plain");

  TestDaemon d({{"listonly", rl_up.url("/")}, {"sitemap", sm_up.url("/")}});
  d.start();
  INFO(d.log_text());
  REQUIRE(wait_for(d.base, [](const json& st) { return in_sync(st, "listonly", 10) && in_sync(st, "sitemap", 10); }));

  // Each Source creates 2, updates 2 and deletes 2 resources.
  for (int i = 10; i < 12; ++i) {
    listed.put("/res/" + std::to_string(i) + ".txt", "new " + std::to_string(i));
  }
  listed.put("/res/0.txt", "changed 0");
  listed.put("/res/1.txt", "changed 1");
  listed.erase("/res/8.txt");
  listed.erase("/res/9.txt");
  listed.publish_resource_list(ts("2026-01-01T01:00:00Z"));
  version = 1;
  for (int i = 10; i < 12; ++i) {
    items["/handle/" + std::to_string(i)] = "item " + std::to_string(i);
    sm_up.set("/handle/" + std::to_string(i), items["/handle/" + std::to_string(i)], "text/html");
  }
  for (int i : {0, 1}) {
    items["/handle/" + std::to_string(i)] = "item " + std::to_string(i) + ", edited";
    sm_up.set("/handle/" + std::to_string(i), items["/handle/" + std::to_string(i)], "text/html");
  }
  for (int i : {8, 9}) {
    items.erase("/handle/" + std::to_string(i));
    sm_up.remove("/handle/" + std::to_string(i));
  }
  publish_sitemap();
  const auto changed_at = std::chrono::steady_clock::now();

  // Within two intervals (1 s each, +10% jitter; and a margin for a loaded
  // machine), our store and our documents equal each Source.
  std::set<std::string> want_listed;
  for (const auto& [path, bytes] : listed.content) {
    want_listed.insert(rl_up.url(path));
  }
  std::set<std::string> want_items;
  for (const auto& [path, bytes] : items) {
    want_items.insert(sm_up.url(path));
  }
  auto has_change = [](const std::string& doc, const std::string& uri, const char* kind) {
    // Our locs are our own URLs, with the original percent-encoded in them.
    const std::string needle = percent_encode(uri) + "</loc>";
    if (doc.find(needle) == std::string::npos) {
      return false;
    }
    // The last entry of this URI says what happened last.
    const size_t last = doc.rfind(needle);
    const size_t md = doc.find("change=\"", last);
    return md != std::string::npos && doc.compare(md + 8, std::strlen(kind), kind) == 0;
  };
  // Each change is in our own Change List, as its kind. Our Resource Lists
  // are kept by a thread of their own (the lister), our Change Lists by the
  // refresher: each moves on its own, so both are waited for.
  std::string listed_changes;
  std::string sitemap_changes;
  auto changes_listed = [&] {
    listed_changes = our_changes(d.base, "listonly");
    sitemap_changes = our_changes(d.base, "sitemap");
    for (int i : {10, 11}) {
      if (!has_change(listed_changes, rl_up.url("/res/" + std::to_string(i) + ".txt"), "created") ||
          !has_change(sitemap_changes, sm_up.url("/handle/" + std::to_string(i)), "created")) {
        return false;
      }
    }
    for (int i : {0, 1}) {
      if (!has_change(listed_changes, rl_up.url("/res/" + std::to_string(i) + ".txt"), "updated") ||
          !has_change(sitemap_changes, sm_up.url("/handle/" + std::to_string(i)), "updated")) {
        return false;
      }
    }
    for (int i : {8, 9}) {
      if (!has_change(listed_changes, rl_up.url("/res/" + std::to_string(i) + ".txt"), "deleted") ||
          !has_change(sitemap_changes, sm_up.url("/handle/" + std::to_string(i)), "deleted")) {
        return false;
      }
    }
    return true;
  };
  bool equal = false;
  bool logged = false;
  while ((!equal || !logged) && std::chrono::steady_clock::now() - changed_at < std::chrono::seconds(10)) {
    equal = our_list(d.base, "listonly") == want_listed && our_list(d.base, "sitemap") == want_items;
    logged = changes_listed();
    if (!equal || !logged) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - changed_at).count();
  MESSAGE("both Sources' changes in our Resource Lists and Change Lists after " << took << " s");
  INFO("our Change List of listonly: " << listed_changes);
  INFO("our Change List of sitemap: " << sitemap_changes);
  REQUIRE(equal);
  CHECK(logged);
  CHECK(took <= 2 * 1.1 + 1.5);
  // The status API says which kind of Source each is.
  const json st = status_of(d.base);
  CHECK((*find_source(st, "listonly"))["kind"] == "resource-list-only");
  CHECK((*find_source(st, "sitemap"))["kind"] == "plain-sitemap");
  CHECK(d.stop().second == 0);
}

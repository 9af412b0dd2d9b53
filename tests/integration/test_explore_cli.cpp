// `tributary explore` run as a process: over Sources from the reference
// corpus (other implementations' documents, read from files), over
// `tributary simulate` and over a Tributary's own republished tree on
// 127.0.0.1, and over a hostile Source.
#include "../common/scratch_dir.h"
#include "daemon_client.h"
#include "http_get.h"
#include "process.h"

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

namespace fs = std::filesystem;
using namespace tributary::test;

namespace {

const fs::path k_corpus = fs::path(TRIBUTARY_REFERENCE_DIR) / "corpus";

json explore_json(const std::string& args, int& status) {
  Run r = run_tributary("explore --json " + args);
  INFO(r.out);
  status = r.status;
  auto brace = r.out.find('{');
  REQUIRE(brace != std::string::npos);
  return json::parse(r.out.substr(brace));
}

// The capabilities explore read, in walk order.
std::vector<std::string> capabilities(const json& j) {
  std::vector<std::string> out;
  for (const auto& d : j["documents"]) {
    out.push_back(d["capability"].is_string() ? d["capability"].get<std::string>() : "?");
  }
  return out;
}

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

} // namespace

TEST_CASE("tributary explore: the Timbuctoo example Source (absolute URLs, mapped to the corpus files) walks "
          "clean, with its tree, counts and the warning it earns") {
  const fs::path root = k_corpus / "HuygensING-timbuctoo/documentation/resourcesyncexample/resourcesync_root/"
                                   "well-known/resourcesync";
  const std::string args =
      (root / "sourcedescription.xml").string() + " --map http://localhost/.well-known/resourcesync/=" +
      root.string() + "/";
  Run r = run_tributary("explore " + args);
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(r.out.find("  capabilitylist  http://localhost/.well-known/resourcesync/dataset1/capability.xml  1 entry  "
                   "[valid]") != std::string::npos);
  CHECK(r.out.find("    resourcelist  http://localhost/.well-known/resourcesync/dataset2/resourcelist.xml  "
                   "2 entries  [valid, 1 warning]") != std::string::npos);
  CHECK(r.out.find("without an 'at' attribute") != std::string::npos);
  CHECK(r.out.find("explored 5 documents: 5 valid, 0 invalid, 0 unreachable; 8 entries, 2 warnings, 0 errors") !=
        std::string::npos);
  int status = 0;
  json j = explore_json(args, status);
  CHECK(status == 0);
  CHECK(j["summary"]["valid"] == 5);
  CHECK(capabilities(j) ==
        std::vector<std::string>{"description", "capabilitylist", "resourcelist", "capabilitylist", "resourcelist"});
}

TEST_CASE("tributary explore: py-resync's test Sources, with relative URIs and documents they do not ship, are "
          "walked to the end and every gap named") {
  SUBCASE("archives1: a Capability List naming all eight capabilities, a Resource List Archive") {
    int status = 0;
    json j = explore_json((k_corpus / "resync-resync/tests/testdata/archives1/resourcesync").string(), status);
    CHECK(status == 1);
    const auto caps = capabilities(j);
    CHECK(has(caps, "resourcelist-archive"));
    // The archive's first snapshot is read; the two it names but the
    // fixture lacks are named unreachable.
    size_t unreachable = 0;
    bool archived_read = false;
    for (const auto& d : j["documents"]) {
      const std::string url = d["url"];
      if (!d["read"].get<bool>()) {
        ++unreachable;
        CHECK(d["problem"].get<std::string>().rfind("unreachable: ", 0) == 0);
      }
      archived_read = archived_read || (url.find("/resourcelist1.xml") != std::string::npos && d["read"] &&
                                        d["depth"] == 3 && d["entries"] == 3);
    }
    CHECK(archived_read);
    CHECK(unreachable == 8);
    CHECK(j["summary"]["documents"] == 14);
    // Relative <loc>s, which the spec forbids, are resolved against the
    // document's URL: a warning each, with its line, as inspect says it.
    bool relative_said = false;
    for (const auto& w : j["documents"][0]["warnings"]) {
      relative_said = relative_said || w["message"].get<std::string>().find("<loc> 'caps1.xml' is relative: read as") !=
                                           std::string::npos;
    }
    CHECK(relative_said);
  }
  SUBCASE("explore1 and find1: three Capability Lists; a Source Description up a directory") {
    int status = 0;
    json j = explore_json((k_corpus / "resync-resync/tests/testdata/explore1/resourcesync").string(), status);
    CHECK(status == 1);
    CHECK(j["summary"]["documents"] == 16);
    const auto caps = capabilities(j);
    CHECK(std::count(caps.begin(), caps.end(), "capabilitylist") == 3);
    j = explore_json((k_corpus / "resync-resync/tests/testdata/find/find1/.well-known/resourcesync").string(), status);
    CHECK(j["summary"]["documents"] == 3);
    CHECK(j["summary"]["unreachable"] == 0);
    CHECK(capabilities(j) == std::vector<std::string>{"description", "capabilitylist", "resourcelist"});
  }
}

TEST_CASE("tributary explore: `tributary simulate` and a Tributary republishing it walk without a warning or "
          "error, through indexes, dumps' manifests, archives and notification channels") {
  ScratchDir dir("explore");
  const int sim_port = free_port();
  const std::string sim = "http://127.0.0.1:" + std::to_string(sim_port);
  pid_t pid = spawn_tributary({"simulate", "--listen", "127.0.0.1:" + std::to_string(sim_port), "--resources", "300",
                               "--change-rate", "50", "--max-changes", "120", "--part-size", "40", "--seed", "5"},
                              (dir / "sim.log").string());
  REQUIRE(pid > 0);
  ProcessGuard guard(pid);
  REQUIRE(eventually([&] { return http_get(sim + "/changedump.xml").body.find("<url>") != std::string::npos; }));
  // The simulator's tree, from its bare origin.
  int status = 0;
  json j = explore_json(sim, status);
  CHECK(status == 0);
  CHECK(j["summary"]["invalid"] == 0);
  CHECK(j["summary"]["unreachable"] == 0);
  auto caps = capabilities(j);
  for (const char* c : {"description", "capabilitylist", "resourcelist", "changelist", "resourcedump",
                        "changedump", "changedump-manifest"}) {
    CHECK_MESSAGE(has(caps, c), c);
  }

  // A Tributary following it republishes a tree of its own: archives, a
  // Change Dump and the notification channels come in.
  TestDaemon a({{"sim", sim + "/"}});
  edit_config(a, [](json& c) {
    c["change_list_part_size"] = 40;
    c["resource_dump_interval"] = "1s";
    c["sources"][0]["interval"] = "1s";
  });
  a.start();
  REQUIRE(wait_for(a.base, [](const json& st) {
    const json* s = find_source(st, "sim");
    return s && (*s)["activity"] == "idle" && !(*s)["last_success"].is_null() && (*s)["resources"]["live"] >= 300;
  }, 30));
  REQUIRE(eventually([&] {
    return http_get(a.base + "/sets/sim/changedump.xml").body.find("<url>") != std::string::npos &&
           http_get(a.base + "/sets/sim/capabilitylist.xml").body.find("resourcedump.xml") != std::string::npos;
  }, 20));
  j = explore_json(a.base + "/", status);
  INFO(j.dump(1));
  CHECK(status == 0);
  CHECK(j["summary"]["invalid"] == 0);
  CHECK(j["summary"]["unreachable"] == 0);
  CHECK(j["summary"]["warnings"] == 0);
  caps = capabilities(j);
  for (const char* c : {"description", "capabilitylist", "resourcelist", "changelist", "resourcedump",
                        "changedump", "changedump-manifest", "changelist-archive", "resourcelist-archive",
                        "changedump-archive"}) {
    CHECK_MESSAGE(has(caps, c), c);
  }
  bool channel = false;
  for (const auto& d : j["documents"]) {
    for (const auto& ch : d["channels"]) {
      channel = channel || (ch["capability"] == "changelist-notification" && ch["hub"] == a.base + "/hub");
    }
  }
  CHECK(channel);
  Run text = run_tributary("explore " + a.base);
  CHECK(text.out.find("changelist-notification  topic " + a.base + "/sets/sim/notification/changelist  hub " +
                      a.base + "/hub  (not followed)") != std::string::npos);
}

TEST_CASE("tributary explore: a hostile Source cannot make it read a local file, loop, or run without end") {
  httplib::Server server;
  std::string base;
  std::string other; // the same port on another loopback address
  server.Get("/.well-known/resourcesync", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"(<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" )"
                    R"(xmlns:rs="http://www.openarchives.org/rs/terms/"><rs:md capability="description"/>)"
                    R"(<url><loc>file:///etc/passwd</loc><rs:md capability="capabilitylist"/></url>)"
                    R"(<url><loc>FILE:///etc/passwd</loc><rs:md capability="capabilitylist"/></url>)"
                    R"(<url><loc>)" + other + R"(/internal.xml</loc><rs:md capability="capabilitylist"/></url>)"
                    R"(<url><loc>)" + base + R"(/hop.xml</loc><rs:md capability="capabilitylist"/></url>)"
                    R"(<url><loc>)" + base + R"(/loop.xml</loc><rs:md capability="capabilitylist"/></url>)"
                    R"(<url><loc>)" + base + R"(/wide.xml</loc><rs:md capability="capabilitylist"/></url></urlset>)",
                    "application/xml");
  });
  // A redirect to a loopback address the entry point is not on.
  server.Get("/hop.xml", [&](const httplib::Request&, httplib::Response& res) {
    res.set_redirect(other + "/internal.xml");
  });
  // A Resource List Index naming itself and another index, which names it back.
  server.Get("/loop.xml", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"(<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" )"
                    R"(xmlns:rs="http://www.openarchives.org/rs/terms/"><rs:md capability="capabilitylist"/>)"
                    R"(<sitemap><loc>)" + base + R"(/loop.xml</loc></sitemap>)"
                    R"(<sitemap><loc>)" + base + R"(/loop2.xml</loc></sitemap></sitemapindex>)",
                    "application/xml");
  });
  server.Get("/loop2.xml", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"(<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" )"
                    R"(xmlns:rs="http://www.openarchives.org/rs/terms/"><rs:md capability="capabilitylist"/>)"
                    R"(<sitemap><loc>)" + base + R"(/loop.xml</loc></sitemap></sitemapindex>)",
                    "application/xml");
  });
  // An index of a thousand parts.
  server.Get("/wide.xml", [&](const httplib::Request&, httplib::Response& res) {
    std::string body = R"(<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" )"
                       R"(xmlns:rs="http://www.openarchives.org/rs/terms/"><rs:md capability="capabilitylist"/>)";
    for (int i = 0; i < 1000; ++i) {
      body += "<sitemap><loc>" + base + "/part-" + std::to_string(i) + ".xml</loc></sitemap>";
    }
    res.set_content(body + "</sitemapindex>", "application/xml");
  });
  ServerThread running(server);
  base = running.base();
  other = "http://127.0.0.2:" + base.substr(base.rfind(':') + 1);
  int status = 0;
  json j = explore_json(base + "/ --max-documents 50", status);
  CHECK(status == 1);
  CHECK(j["summary"]["documents"] == 50);
  CHECK(j["summary"]["limit_reached"] == true);
  CHECK(j["documents"][1]["url"] == "file:///etc/passwd");
  CHECK(j["documents"][1]["read"] == false);
  CHECK(j["documents"][1]["problem"] == "refused: a remote document links to a local file");
  // The scheme in capitals is the same scheme (the fetcher reads it so).
  CHECK(j["documents"][2]["url"] == "FILE:///etc/passwd");
  CHECK(j["documents"][2]["read"] == false);
  CHECK(j["documents"][2]["problem"] == "refused: a remote document links to a local file");
  // Addresses as a source's: public ones and the entry point's host only,
  // at every hop (127.0.0.2 is loopback, and not the entry point's).
  for (int i : {3, 4}) {
    INFO(j["documents"][i].dump());
    CHECK(j["documents"][i]["read"] == false);
    CHECK(j["documents"][i]["problem"].get<std::string>().find("127.0.0.2 is a loopback address") != std::string::npos);
  }
  size_t loops = 0;
  for (const auto& d : j["documents"]) {
    loops += d["url"] == base + "/loop.xml" ? 1 : 0;
  }
  CHECK(loops == 1); // read once however often it is named
}

TEST_CASE("tributary explore: a repository with no Source Description is read through the sitemaps robots.txt names") {
  httplib::Server server;
  std::string base;
  server.Get("/robots.txt", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content("User-agent: *\nDisallow: /search\nSitemap: " + base + "/sitemap_index.xml\n", "text/plain");
  });
  // DSpace 7's shape: a sitemapindex of plain urlsets with day-granular lastmod.
  server.Get("/sitemap_index.xml", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"(<?xml version="1.0" encoding="UTF-8"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">)"
                    R"(<sitemap><loc>)" + base + R"(/sitemap0.xml</loc><lastmod>2026-11-20</lastmod></sitemap></sitemapindex>)",
                    "application/xml");
  });
  server.Get("/sitemap0.xml", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"(<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">)"
                    R"(<url><loc>)" + base + R"(/items/1</loc><lastmod>2026-11-20</lastmod><changefreq>daily</changefreq></url>)"
                    R"(<url><loc>/items/2</loc><lastmod>2026-11-21</lastmod></url></urlset>)",
                    "application/xml");
  });
  ServerThread running(server);
  base = running.base();
  Run r = run_tributary("explore " + base + "/");
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(r.out.find("no Source Description at " + base + "/.well-known/resourcesync") != std::string::npos);
  CHECK(r.out.find("resourcelist index (plain sitemap)  " + base + "/sitemap_index.xml  1 entry") != std::string::npos);
  CHECK(r.out.find("resourcelist (plain sitemap)  " + base + "/sitemap0.xml  2 entries") != std::string::npos);
  CHECK(r.out.find("warning line 1: <loc> '/items/2' is relative: read as '" + base + "/items/2'") != std::string::npos);
  CHECK(r.out.find("explored 2 documents: 2 valid, 0 invalid, 0 unreachable; 3 entries") != std::string::npos);
}

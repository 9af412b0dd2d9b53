// Hostile upstreams (issue #14): each case is a Source that sends what a
// broken or malicious server sends, next to a well-behaved resource. For
// each: the run ends (no crash, no hang), the error names the URL and the
// reason, the good resource is stored, and nothing bad is.
#include "daemon_client.h"
#include "fault_upstream.h"
#include "process.h"
#include "sync_fixture.h"

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include <zlib.h>

#include <cstdlib>
#include <fstream>
#include <sys/wait.h>
#include <thread>

using namespace tributary;
using namespace tributary::test;
using store::RunMode;
using store::RunStatus;
using nlohmann::json;

namespace {

const char* k_good = "good bytes\n";

std::string md5(const std::string& s) { return rs::hash_hex(rs::HashAlgorithm::md5, s); }

// A Resource List as real Sources write one, from raw <url> elements.
std::string resource_list(const std::string& urls) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" "
         "xmlns:rs=\"http://www.openarchives.org/rs/terms/\">\n"
         "<rs:md capability=\"resourcelist\" at=\"2026-01-01T00:00:00Z\"/>\n" +
         urls + "</urlset>\n";
}

// A Change List from 2026-01-01, from raw <url> elements.
std::string change_list(const std::string& urls) {
  return "<?xml version=\"1.0\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" "
         "xmlns:rs=\"http://www.openarchives.org/rs/terms/\"><rs:md capability=\"changelist\" "
         "from=\"2026-01-01T00:00:00Z\"/>\n" +
         urls + "</urlset>\n";
}

std::string url_element(const std::string& loc, const std::string& content, const std::string& extra_md = "",
                        const std::string& links = "") {
  return "<url><loc>" + loc + "</loc><rs:md hash=\"md5:" + md5(content) + "\" length=\"" +
         std::to_string(content.size()) + "\"" + extra_md + "/>" + links + "</url>\n";
}

// A Capability List at /caps.xml naming /rl.xml and /cl.xml: what the
// sources below are configured with.
std::string caps_url(FaultUpstream& up) {
  up.serve("/caps.xml",
           "<?xml version=\"1.0\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" "
           "xmlns:rs=\"http://www.openarchives.org/rs/terms/\"><rs:md capability=\"capabilitylist\"/>"
           "<url><loc>" + up.url("/rl.xml") + "</loc><rs:md capability=\"resourcelist\"/></url>"
           "<url><loc>" + up.url("/cl.xml") + "</loc><rs:md capability=\"changelist\"/></url></urlset>\n");
  return up.url("/caps.xml");
}

// A Source on `up`: /rl.xml is the list (the source is configured with it),
// /good.txt a resource that is fine.
struct HostileSite {
  FaultUpstream& up;
  explicit HostileSite(FaultUpstream& u) : up(u) { up.serve("/good.txt", k_good, "text/plain"); }
  std::string good() const { return url_element(up.url("/good.txt"), k_good); }
  void list(const std::string& urls) { up.serve("/rl.xml", resource_list(urls)); }
  sync::SourceConfig source() const {
    auto s = SyncEnv::source(caps_url(up), "hostile");
    s.timeout = std::chrono::milliseconds(2000);
    return s;
  }
};

bool any_error(const sync::SourceReport& r, const std::string& a, const std::string& b = "") {
  for (const auto& e : r.errors) {
    if (e.find(a) != std::string::npos && e.find(b) != std::string::npos) {
      return true;
    }
  }
  return false;
}

std::string gzip_of(const std::string& s) { return rs::gzip(s); }



} // namespace

TEST_CASE("Hostile: a type that would split a header costs that value, and the entry is stored without it") {
  FaultUpstream up;
  HostileSite site(up);
  up.serve("/split.txt", "x", "text/plain");
  site.list(site.good() + url_element(up.url("/split.txt"), "x", " type=\"text/plain&#13;&#10;Set-Cookie: injected=1\""));
  SyncEnv env;
  auto r = env.run(site.source(), RunMode::baseline);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(has_note(r, up.url("/rl.xml") + ": 1 unusable value(s) dropped, 0 entries rejected"));
  CHECK(env.live() == std::map<std::string, std::string>{{up.url("/good.txt"), k_good}, {up.url("/split.txt"), "x"}});
  CHECK(up.hits("/split.txt") == 1);
  // The value reached no column: the type stored is the response's.
  pqxx::connection c(env.db.conninfo());
  pqxx::read_transaction tx(c);
  auto type = tx.exec_params1("SELECT type FROM resource WHERE uri = $1", up.url("/split.txt"))[0];
  CHECK(type.as<std::string>().find("Set-Cookie") == std::string::npos);
}

TEST_CASE("Hostile: credentials never follow a redirect to another origin") {
  FaultUpstream up;
  FaultUpstream other("127.0.0.2");
  HostileSite site(up);
  other.serve("/moved.txt", "moved", "text/plain");
  up.on("/r.txt", [&](int fd, const std::string&) {
    FaultUpstream::send_all(fd, FaultUpstream::response(302, "", "text/plain", "Location: " + other.url("/moved.txt") + "\r\n"));
  });
  site.list(site.good() + url_element(up.url("/r.txt"), "moved"));
  ::setenv("TRIBUTARY_TEST_HOSTILE_TOKEN", "s3cret", 1);
  auto src = site.source();
  src.auth.type = sync::AuthConfig::Type::bearer;
  src.auth.secret.env = "TRIBUTARY_TEST_HOSTILE_TOKEN";
  src.allow_hosts = {"127.0.0.2"};
  SyncEnv env;
  auto r = env.run(src, RunMode::baseline);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(env.live().size() == 2);
  // Asked once pipelined (its 302 is then asked again the ordinary way,
  // which follows it), each time with the credential: /r.txt is the source's own.
  REQUIRE(!up.requests("/r.txt").empty());
  for (const auto& req : up.requests("/r.txt")) {
    CHECK(req.find("Authorization: Bearer s3cret") != std::string::npos);
  }
  REQUIRE(other.requests("/moved.txt").size() == 1);
  CHECK(other.requests("/moved.txt")[0].find("Authorization") == std::string::npos);
}

TEST_CASE("Hostile: a duplicate on a loopback address the source is not on is never connected to") {
  FaultUpstream up;
  FaultUpstream inside("127.0.0.2");
  HostileSite site(up);
  inside.serve("/secret.txt", "x", "text/plain");
  // pri 1: tried before loc; the document authorises its own duplicate's
  // host, but not an address outside the public Internet.
  site.list(url_element(up.url("/good.txt"), k_good, "",
                        "<rs:ln rel=\"duplicate\" pri=\"1\" href=\"" + inside.url("/secret.txt") + "\"/>"));
  SyncEnv env;
  auto r = env.run(site.source(), RunMode::baseline);
  CHECK(r.status == RunStatus::succeeded); // from loc, after the duplicate was refused
  CHECK(env.live() == std::map<std::string, std::string>{{up.url("/good.txt"), k_good}});
  CHECK(inside.total_hits() == 0);
}

TEST_CASE("Hostile: every redirect hop is checked as the first request was") {
  FaultUpstream up;
  FaultUpstream elsewhere("127.0.0.2");
  HostileSite site(up);
  elsewhere.serve("/x.txt", "x", "text/plain");
  auto redirect_to = [&](const std::string& path, const std::string& location) {
    up.on(path, [location](int fd, const std::string&) {
      FaultUpstream::send_all(fd, FaultUpstream::response(302, "", "text/plain", "Location: " + location + "\r\n"));
    });
  };
  redirect_to("/to-other-host.txt", elsewhere.url("/x.txt"));
  redirect_to("/to-ftp.txt", "ftp://127.0.0.1/x.txt");
  redirect_to("/to-file.txt", "file:///etc/passwd");
  redirect_to("/loop.txt", up.url("/loop.txt"));
  site.list(site.good() + url_element(up.url("/to-other-host.txt"), "x") + url_element(up.url("/to-ftp.txt"), "x") +
            url_element(up.url("/to-file.txt"), "x") + url_element(up.url("/loop.txt"), "x") +
            url_element("file:///dev/zero", "x"));
  SyncEnv env;
  auto r = env.run(site.source(), RunMode::baseline);
  CHECK(r.status == RunStatus::partial);
  CHECK(elsewhere.total_hits() == 0);
  CHECK(any_error(r, elsewhere.url("/x.txt") + " (redirected from " + up.url("/to-other-host.txt") + ")",
                  "host 127.0.0.2 is not the source's and not in allow_hosts"));
  CHECK(any_error(r, "ftp://127.0.0.1/x.txt", "refused: only http and https are followed"));
  CHECK(any_error(r, "file:///etc/passwd", "refused"));
  CHECK(any_error(r, up.url("/loop.txt"), "redirects"));
  CHECK(any_error(r, "file:///dev/zero", "file URLs are only fetched for file sources"));
  CHECK(env.live() == std::map<std::string, std::string>{{up.url("/good.txt"), k_good}});
}

TEST_CASE("Hostile: documents are fetched from the source's hosts only") {
  FaultUpstream up;
  FaultUpstream other("127.0.0.2");
  other.serve("/rl.xml", resource_list(""));
  const std::string caps = "<?xml version=\"1.0\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" "
                           "xmlns:rs=\"http://www.openarchives.org/rs/terms/\"><rs:md capability=\"capabilitylist\"/>"
                           "<url><loc>" + other.url("/rl.xml") + "</loc><rs:md capability=\"resourcelist\"/></url></urlset>";
  up.serve("/caps.xml", caps);
  SyncEnv env;
  auto src = SyncEnv::source(up.url("/caps.xml"), "hostile");
  auto r = env.run(src, RunMode::baseline);
  CHECK(r.status == RunStatus::failed);
  CHECK(any_error(r, other.url("/rl.xml"), "host 127.0.0.2 is not the source's and not in allow_hosts"));
  CHECK(other.total_hits() == 0);
}

TEST_CASE("Hostile: values PostgreSQL cannot hold cost those values, and the feed moves on") {
  FaultUpstream up;
  up.serve("/good.txt", k_good, "text/plain");
  up.serve("/big.txt", "x", "text/plain");
  const std::string cl = change_list(
      "<url><loc>" + up.url("/big.txt") + "</loc><rs:md change=\"created\" datetime=\"2026-01-02T00:00:00Z\" "
      "length=\"18446744073709551615\"/></url>\n"
      "<url><loc>" + up.url("/zero.txt") + "</loc><lastmod>0000-01-01T00:00:00Z</lastmod><rs:md change=\"created\"/></url>\n"
      "<url><loc>" + up.url("/good.txt") + "</loc><rs:md change=\"created\" datetime=\"2026-01-03T00:00:00Z\" hash=\"md5:" +
      md5(k_good) + "\"/></url>\n");
  up.serve("/cl.xml", cl);
  up.serve("/rl.xml", resource_list(""));
  SyncEnv env;
  auto src = SyncEnv::source(caps_url(up), "hostile");
  auto r = env.run(src, RunMode::incremental);
  // The length and the datetime are dropped; the entries stay. big.txt is
  // stored; zero.txt, dated like the change before it, is not served (404).
  CHECK(r.status == RunStatus::partial);
  CHECK(has_note(r, up.url("/cl.xml") + ": 2 unusable value(s) dropped, 0 entries rejected"));
  CHECK(any_error(r, up.url("/zero.txt"), "HTTP 404"));
  CHECK(env.live() == std::map<std::string, std::string>{{up.url("/good.txt"), k_good}, {up.url("/big.txt"), "x"}});
  CHECK(up.hits("/big.txt") == 1);
  // The next run starts after them: nothing is fetched again.
  const size_t before = up.hits("/good.txt");
  auto again = env.run(src, RunMode::incremental);
  CHECK(again.status != RunStatus::failed);
  CHECK(up.hits("/good.txt") == before);
}

TEST_CASE("Hostile: a 300 KB loc under the example's regex exclude costs its entry, not the process") {
  FaultUpstream up;
  HostileSite site(up);
  site.list(site.good() + url_element(up.url("/" + std::string(300 * 1024, 'a')), "x"));
  auto src = site.source();
  sync::UriFilter exc;
  REQUIRE_FALSE(sync::make_uri_filter("re:.*\\.tmp$", exc));
  src.exclude.push_back(exc);
  SyncEnv env;
  auto r = env.run(src, RunMode::baseline);
  CHECK(r.status == RunStatus::partial);
  CHECK(any_error(r, up.url("/rl.xml"), "bytes, over the limit of 8192"));
  CHECK(env.live() == std::map<std::string, std::string>{{up.url("/good.txt"), k_good}});
}

TEST_CASE("Hostile: a resource dripping a byte a second is cut off, and the baseline finishes") {
  FaultUpstream up;
  HostileSite site(up);
  const std::string slow(100, 's');
  up.on("/drip.txt", [&](int fd, const std::string&) {
    if (!FaultUpstream::send_all(fd, FaultUpstream::head(200, "text/plain", slow.size()))) {
      return;
    }
    for (char c : slow) {
      if (!FaultUpstream::send_all(fd, std::string(1, c))) {
        return;
      }
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  });
  up.on("/mute.txt", [](int fd, const std::string&) {
    // Accepts, then says nothing at all, a byte at a time of the head.
    for (char c : std::string("HTTP/1.1 200 OK\r\n")) {
      if (!FaultUpstream::send_all(fd, std::string(1, c))) {
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(900));
    }
  });
  site.list(site.good() + url_element(up.url("/drip.txt"), slow) + url_element(up.url("/mute.txt"), "m"));
  auto src = site.source();
  src.rate_window = std::chrono::seconds(2);
  SyncEnv env;
  const auto start = std::chrono::steady_clock::now();
  auto r = env.run(src, RunMode::baseline);
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(r.status == RunStatus::partial);
  CHECK(any_error(r, up.url("/drip.txt"), "transfer too slow"));
  CHECK(any_error(r, up.url("/mute.txt"), "no response within"));
  CHECK(took < std::chrono::seconds(30)); // two tries each of about 2 s and 4 s, not 100 s
  CHECK(env.live() == std::map<std::string, std::string>{{up.url("/good.txt"), k_good}});
  CHECK(env.retries().count(up.url("/drip.txt")) == 1);
}

TEST_CASE("Hostile: a location that always fails for a passing reason goes to the retry table, and the feed moves on") {
  FaultUpstream up;
  FaultUpstream hole("127.0.0.2");
  up.serve("/good.txt", k_good, "text/plain");
  hole.on("/x.txt", [](int fd, const std::string&) { FaultUpstream::reset(fd); }); // every time
  const std::string cl = change_list(
      "<url><loc>" + hole.url("/x.txt") + "</loc><rs:md change=\"created\" datetime=\"2026-01-02T00:00:00Z\"/></url>\n"
      "<url><loc>" + up.url("/good.txt") + "</loc><rs:md change=\"created\" datetime=\"2026-01-03T00:00:00Z\"/></url>\n");
  up.serve("/cl.xml", cl);
  up.serve("/rl.xml", resource_list(""));
  auto src = SyncEnv::source(caps_url(up), "hostile");
  src.allow_hosts = {"127.0.0.2"};
  SyncEnv env;
  auto r = env.run(src, RunMode::incremental);
  CHECK(r.status == RunStatus::partial);
  CHECK(env.live() == std::map<std::string, std::string>{{up.url("/good.txt"), k_good}});
  CHECK(env.retries().count(hole.url("/x.txt")) == 1);
  auto again = env.run(src, RunMode::incremental);
  CHECK(up.hits("/good.txt") == 1); // the watermark moved past both
}

TEST_CASE("Hostile: transfers that fail or lie") {
  FaultUpstream up;
  HostileSite site(up);
  int calls_503 = 0;
  up.on("/burst.txt", [&](int fd, const std::string&) {
    const bool fail = calls_503++ < 1;
    FaultUpstream::send_all(fd, fail ? FaultUpstream::response(503, "busy", "text/plain")
                                     : FaultUpstream::response(200, "burst", "text/plain"));
  });
  int calls_429 = 0;
  up.on("/429.txt", [&](int fd, const std::string&) {
    const bool fail = calls_429++ < 1;
    FaultUpstream::send_all(fd, fail ? FaultUpstream::response(429, "slow down", "text/plain", "Retry-After: 1\r\n")
                                     : FaultUpstream::response(200, "limited", "text/plain"));
  });
  up.on("/reset.txt", [](int fd, const std::string&) {
    FaultUpstream::send_all(fd, FaultUpstream::head(200, "text/plain", 10) + "hal");
    FaultUpstream::reset(fd);
  });
  up.on("/truncated.txt", [](int fd, const std::string&) {
    FaultUpstream::send_all(fd, FaultUpstream::head(200, "text/plain", 100) + "only part of it");
  });
  up.serve("/wrong-length.txt", "longer than announced", "text/plain");
  up.serve("/wrong-hash.txt", "other bytes", "text/plain");
  site.list(site.good() + url_element(up.url("/burst.txt"), "burst") + url_element(up.url("/429.txt"), "limited") +
            url_element(up.url("/reset.txt"), "0123456789") + url_element(up.url("/truncated.txt"), std::string(100, 't')) +
            url_element(up.url("/wrong-length.txt"), "short") +
            "<url><loc>" + up.url("/wrong-hash.txt") + "</loc><rs:md hash=\"md5:" + md5("the bytes announced") +
            "\"/></url>\n");
  SyncEnv env;
  auto r = env.run(site.source(), RunMode::baseline);
  CHECK(r.status == RunStatus::partial);
  auto live = env.live();
  CHECK(live[up.url("/good.txt")] == k_good);
  CHECK(live[up.url("/burst.txt")] == "burst");   // a 503 burst, then fine
  CHECK(live[up.url("/429.txt")] == "limited");   // 429 with Retry-After, then fine
  CHECK(live.count(up.url("/reset.txt")) == 0);
  CHECK(live.count(up.url("/truncated.txt")) == 0);
  CHECK(live.count(up.url("/wrong-length.txt")) == 0);
  CHECK(live.count(up.url("/wrong-hash.txt")) == 0);
  CHECK(any_error(r, up.url("/wrong-length.txt"), "limit"));
  CHECK(any_error(r, up.url("/wrong-hash.txt"), "md5"));
  CHECK(env.retries().count(up.url("/truncated.txt")) == 1);
}

TEST_CASE("Hostile: documents that attack the reader") {
  FaultUpstream up;
  SyncEnv env;
  SUBCASE("a gzip bomb: 200 MiB of blanks in 200 KB") {
    const std::string bomb = gzip_of(resource_list("") .substr(0, 200) + std::string(200ull * 1024 * 1024, ' '));
    up.serve("/rl.xml", bomb, "application/gzip");
    auto r = env.run(SyncEnv::source(caps_url(up), "hostile"), RunMode::baseline);
    CHECK(r.status == RunStatus::failed);
    CHECK(any_error(r, up.url("/rl.xml")));
  }
  SUBCASE("DOCTYPE entities (billion laughs)") {
    up.serve("/rl.xml", "<?xml version=\"1.0\"?><!DOCTYPE lolz [<!ENTITY lol \"lol\"><!ENTITY lol2 \"&lol;&lol;&lol;\">]>"
                        "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\"><url><loc>&lol2;</loc></url></urlset>");
    auto r = env.run(SyncEnv::source(caps_url(up), "hostile"), RunMode::baseline);
    CHECK(r.status == RunStatus::failed);
    CHECK(any_error(r, up.url("/rl.xml"), "DOCTYPE"));
  }
  SUBCASE("a Change List going backwards is applied in the order of its times") {
    up.serve("/a.txt", "a", "text/plain");
    const std::string cl = change_list(
        "<url><loc>" + up.url("/a.txt") + "</loc><rs:md change=\"created\" datetime=\"2026-01-05T00:00:00Z\"/></url>\n"
        "<url><loc>" + up.url("/a.txt") + "</loc><rs:md change=\"deleted\" datetime=\"2026-01-02T00:00:00Z\"/></url>\n");
    up.serve("/cl.xml", cl);
    up.serve("/rl.xml", resource_list(""));
    auto r = env.run(SyncEnv::source(caps_url(up), "hostile"), RunMode::incremental);
    CHECK(r.status == RunStatus::succeeded);
    CHECK(has_note(r, up.url("/cl.xml") + ": changes listed out of time order, applied sorted by time"));
    // Deleted on the 2nd, created on the 5th: it is there.
    CHECK(env.live() == std::map<std::string, std::string>{{up.url("/a.txt"), "a"}});
  }
}

// The fault suite through the daemon: one `tributary run` follows a good
// Source beside hostile ones. It keeps running, the good Source is followed
// as if alone, each hostile Source's run says which URL failed and why (in
// its runs, the status API and the log, all under the source's name), and
// nothing bad is stored.
TEST_CASE("Hostile: one daemon beside hostile sources keeps running, and the good source is unaffected") {
  Upstream good_up;
  Site site(good_up);
  site.put_numbered(3);
  site.publish_start(ts("2026-01-01T00:00:00Z"));

  struct Hostile {
    std::string name;
    std::unique_ptr<FaultUpstream> up;
    std::string expect_url, expect_reason;
    json extra = json::object();
  };
  std::vector<Hostile> hostile;
  auto add = [&](const std::string& name) -> Hostile& {
    hostile.push_back({name, std::make_unique<FaultUpstream>(), "", ""});
    hostile.back().up->serve("/good.txt", k_good, "text/plain");
    caps_url(*hostile.back().up);
    hostile.back().up->serve("/cl.xml", change_list(""));
    return hostile.back();
  };
  auto good_entry = [](FaultUpstream& u) { return url_element(u.url("/good.txt"), k_good); };
  {
    Hostile& h = add("longloc"); // crashed the daemon before #14 (std::regex recursion)
    h.up->serve("/rl.xml", resource_list(good_entry(*h.up) + url_element(h.up->url("/" + std::string(300 * 1024, 'a')), "x")));
    h.extra["exclude"] = {"re:.*\\.tmp$"};
    h.expect_url = h.up->url("/rl.xml");
    h.expect_reason = "over the limit of 8192";
  }
  {
    Hostile& h = add("ftpredirect"); // std::terminate in a worker before #14
    h.up->on("/to-ftp.txt", [](int fd, const std::string&) {
      FaultUpstream::send_all(fd, FaultUpstream::response(302, "", "text/plain", "Location: ftp://127.0.0.1/x\r\n"));
    });
    h.up->serve("/rl.xml", resource_list(good_entry(*h.up) + url_element(h.up->url("/to-ftp.txt"), "x")));
    h.expect_url = "ftp://127.0.0.1/x";
    h.expect_reason = "only http and https are followed";
  }
  {
    Hostile& h = add("headersplit");
    h.up->serve("/split.txt", "x", "text/plain");
    h.up->serve("/rl.xml", resource_list(good_entry(*h.up) +
                                         url_element(h.up->url("/split.txt"), "x",
                                                     " type=\"text/plain&#13;&#10;Set-Cookie: injected=1\"")));
    h.expect_url = h.up->url("/rl.xml"); // the value is dropped, the entry kept
    h.expect_reason = "1 unusable value(s) dropped";
  }
  {
    Hostile& h = add("pgvalues"); // froze every set's documents before #14
    h.up->serve("/rl.xml", resource_list(
                               good_entry(*h.up) + "<url><loc>" + h.up->url("/big.txt") +
                               "</loc><rs:md length=\"9223372036854775808\"/></url>\n<url><loc>" +
                               h.up->url("/zero.txt") + "</loc><lastmod>0000-01-01T00:00:00Z</lastmod></url>\n"));
    h.expect_url = h.up->url("/rl.xml");
    h.expect_reason = "2 unusable value(s) dropped";
  }
  {
    Hostile& h = add("gzipbomb");
    h.up->serve("/rl.xml", gzip_of(resource_list("").substr(0, 200) + std::string(200ull * 1024 * 1024, ' ')),
                "application/gzip");
    h.expect_url = h.up->url("/rl.xml");
    h.expect_reason = "";
  }
  {
    Hostile& h = add("doctype");
    h.up->serve("/rl.xml", "<?xml version=\"1.0\"?><!DOCTYPE lolz [<!ENTITY lol \"lol\">]>"
                           "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\"><url><loc>&lol;</loc></url></urlset>");
    h.expect_url = h.up->url("/rl.xml");
    h.expect_reason = "DOCTYPE";
  }
  {
    Hostile& h = add("fileurl");
    h.up->serve("/rl.xml", resource_list(good_entry(*h.up) + url_element("file:///dev/zero", "x")));
    h.expect_url = "file:///dev/zero";
    h.expect_reason = "file URLs are only fetched for file sources";
  }
  {
    Hostile& h = add("resetcaps");
    h.up->on("/caps.xml", [](int fd, const std::string&) {
      FaultUpstream::send_all(fd, FaultUpstream::head(200, "application/xml", 400) + "<?xml version=\"1.0\"?><urlset");
      FaultUpstream::reset(fd);
    });
    h.expect_url = h.up->url("/caps.xml");
    h.expect_reason = "";
  }

  TestDaemon d({{"good", good_up.url("/")}});
  {
    json cfg = json::parse(config_text(d.db.conninfo(), d.dir, d.port, {{"good", good_up.url("/")}}));
    for (const auto& h : hostile) {
      json s{{"name", h.name}, {"url", h.up->url("/caps.xml")}, {"interval", "1s"}, {"timeout_seconds", 5}};
      s.update(h.extra);
      cfg["sources"].push_back(s);
    }
    cfg["max_concurrent_syncs"] = 4;
    std::ofstream(d.cfg) << cfg.dump(2);
  }
  d.start();
  auto all_ran = [&](const json& st) {
    if (!in_sync(st, "good", 3)) {
      return false;
    }
    for (const auto& h : hostile) {
      const json* s = find_source(st, h.name);
      if (!s || ((*s)["last_success"].is_null() && (*s)["last_failure"].is_null())) {
        return false;
      }
    }
    return true;
  };
  const bool ran = wait_for(d.base, all_ran, 60);
  const std::string log = d.log_text();
  INFO(log.substr(0, 20000));
  REQUIRE(ran);
  CHECK(waitpid(d.pid, nullptr, WNOHANG) == 0); // still running
  CHECK(call(d.base, "GET", "/healthz").status == 200);

  // Each hostile source: its run names the URL and the reason, and so does
  // the log, under the source's name.
  for (const auto& h : hostile) {
    CAPTURE(h.name);
    Answer runs = call(d.base, "GET", "/api/v1/sources/" + h.name + "/runs");
    REQUIRE(runs.status == 200);
    const json list = json::parse(runs.body)["data"]["runs"];
    REQUIRE_FALSE(list.empty());
    bool named = false;
    for (const auto& r : list) {
      const std::string m = r["message"].get<std::string>();
      named = named || (m.find(h.expect_url) != std::string::npos && m.find(h.expect_reason) != std::string::npos);
    }
    INFO(list.dump(2).substr(0, 4000));
    CHECK(named);
    CHECK(log.find(h.name) != std::string::npos);
  }

  // The good source as if alone: no failure, every resource, its documents
  // current (a hostile source's values never froze the republisher).
  const json st = status_of(d.base);
  const json& good = *find_source(st, "good");
  CHECK(good["last_failure"].is_null());
  site.put("/res/late.txt", "late");
  site.publish_change_list("/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt,
                           {change_entry(good_up.url("/res/late.txt"), rs::Change::created, ts("2026-01-02T00:00:00Z"),
                                         "late")});
  CHECK(wait_for(d.base, [](const json& s) { return in_sync(s, "good", 4); }));
  bool listed = false;
  for (int i = 0; i < 50 && !listed; ++i) {
    listed = call(d.base, "GET", "/sets/good/changelist.xml").body.find("late.txt") != std::string::npos;
    if (!listed) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  CHECK(listed);

  // Nothing bad stored: only the hostile sources' good resources.
  pqxx::connection c(d.db.conninfo());
  pqxx::read_transaction tx(c);
  CHECK(tx.exec1("SELECT count(*) FROM resource WHERE length(uri) > 8192 OR type ~ '[\\r\\n]' OR uri LIKE 'file:%' "
                 "OR uri LIKE 'ftp:%' OR length < 0")[0].as<int>() == 0);
  const auto hostile_live = tx.exec1("SELECT count(*) FROM resource r JOIN feed f ON f.id = r.feed_id JOIN source s "
                                     "ON s.id = f.source_id WHERE s.name <> 'good' AND r.state = 'live'")[0].as<int>();
  // good.txt of longloc, ftpredirect, headersplit, pgvalues, fileurl, and
  // split.txt, stored without the type that was dropped.
  CHECK(hostile_live == 6);
  // The header we would have split is not sent for anything we hold.
  Answer page = call(d.base, "GET", "/sets/headersplit/resourcelist.xml");
  CHECK(page.body.find("Set-Cookie") == std::string::npos);
}

// Discovery over real HTTP: every way a Source can point at its
// Capability Lists.
#include "process.h"
#include "sync_fixture.h"

#include "sync_engine/discovery.h"

using namespace tributary;
using namespace tributary::test;

namespace {

std::vector<std::string> found(const std::string& entry) {
  auto f = sync::make_default_fetcher();
  auto r = sync::discover(*f, entry, {});
  if (!r) {
    MESSAGE(r.error().message);
    return {};
  }
  return r->capability_lists;
}

} // namespace

TEST_CASE("Discovery: from a site root, the well-known URI at the host root") {
  Upstream up;
  Site site(up);
  CHECK(found(up.url("/")) == std::vector<std::string>{up.url("/caps.xml")});
}

TEST_CASE("Discovery: the well-known URI at the URL's path base comes first") {
  Upstream up;
  rs::Document sd = make_doc("description");
  sd.entries.push_back(cap_entry(up.url("/repo/caps-a.xml"), "capabilitylist"));
  sd.entries.push_back(cap_entry(up.url("/repo/caps-b.xml"), "capabilitylist"));
  up.set_document("/repo/.well-known/resourcesync", sd);
  CHECK(found(up.url("/repo/index.html")) ==
        std::vector<std::string>{up.url("/repo/caps-a.xml"), up.url("/repo/caps-b.xml")});
}

TEST_CASE("Discovery: climbing rel=up from a Resource List, and from an index part via rel=index") {
  Upstream up;
  Site site(up);
  site.put("/res/a.txt", "a");
  site.publish_resource_list(rs::Timestamp{});
  CHECK(found(up.url("/rl.xml")) == std::vector<std::string>{up.url("/caps.xml")});
  rs::Document part = make_doc("resourcelist");
  part.header.md->at = rs::Timestamp{};
  part.header.links.push_back(rs::Link{.rel = "index", .href = up.url("/rl-index.xml")});
  up.set_document("/rl-part1.xml", part);
  rs::Document index = make_doc("resourcelist", rs::RootElement::sitemapindex);
  index.header.md->at = rs::Timestamp{};
  index.header.links.push_back(rs::Link{.rel = "up", .href = up.url("/caps.xml")});
  up.set_document("/rl-index.xml", index);
  CHECK(found(up.url("/rl-part1.xml")) == std::vector<std::string>{up.url("/caps.xml")});
}

TEST_CASE("Discovery: HTML <link rel=resourcesync> and the HTTP Link header") {
  Upstream up;
  Site site(up);
  up.set("/page.html",
         "<!DOCTYPE html><html><head><link rel=\"resourcesync\" href=\"/caps.xml\"></head><body></body></html>",
         "text/html");
  CHECK(found(up.url("/page.html")) == std::vector<std::string>{up.url("/caps.xml")});
  up.set("/item/42", Served{200, "%PDF-1.4", "application/pdf", {{"Link", "</caps.xml>; rel=\"resourcesync\""}}});
  CHECK(found(up.url("/item/42")) == std::vector<std::string>{up.url("/caps.xml")});
}

TEST_CASE("Discovery: robots.txt Sitemap lines") {
  Upstream up;
  rs::Document caps = make_doc("capabilitylist");
  caps.entries.push_back(cap_entry(up.url("/rl.xml"), "resourcelist"));
  up.set_document("/hidden/caps.xml", caps);
  rs::Document rl = make_doc("resourcelist");
  rl.header.md->at = rs::Timestamp{};
  rl.header.links.push_back(rs::Link{.rel = "up", .href = up.url("/hidden/caps.xml")});
  up.set_document("/rl.xml", rl);
  up.set("/robots.txt", "User-agent: *\nSitemap: " + up.url("/rl.xml") + "\n", "text/plain");
  CHECK(found(up.url("/")) == std::vector<std::string>{up.url("/hidden/caps.xml")});
}

TEST_CASE("Discovery: a plain sitemap named only in robots.txt is followed as a Resource List") {
  Upstream up;
  up.set("/sitemaps/all.xml",
         "<?xml version=\"1.0\"?><urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">"
         "<url><loc>" + up.url("/items/1") + "</loc><lastmod>2026-01-02</lastmod></url></urlset>",
         "application/xml");
  up.set("/robots.txt", "User-agent: *\nDisallow: /admin\nSitemap: /sitemaps/all.xml\n", "text/plain");
  auto f = sync::make_default_fetcher();
  auto r = sync::discover(*f, up.url("/"), {});
  REQUIRE(r);
  CHECK(r->capability_lists.empty());
  CHECK(r->resource_lists == std::vector<std::string>{up.url("/sitemaps/all.xml")});
  CHECK(r->kind == "plain-sitemap");
}

TEST_CASE("Discovery: /sitemap.xml when nothing names one, and a Resource List without a Capability List as is") {
  Upstream up;
  up.set("/sitemap.xml",
         "<?xml version=\"1.0\"?><sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">"
         "<sitemap><loc>" + up.url("/sitemap-1.xml") + "</loc></sitemap></sitemapindex>",
         "application/xml");
  auto f = sync::make_default_fetcher();
  auto r = sync::discover(*f, up.url("/"), {});
  REQUIRE(r);
  CHECK(r->resource_lists == std::vector<std::string>{up.url("/sitemap.xml")});
  CHECK(r->kind == "plain-sitemap");

  rs::Document rl = make_doc("resourcelist");
  rl.header.md->at = rs::Timestamp{};
  up.set_document("/data/rl.xml", rl); // no rel="up"
  auto direct = sync::discover(*f, up.url("/data/rl.xml"), {});
  REQUIRE(direct);
  CHECK(direct->resource_lists == std::vector<std::string>{up.url("/data/rl.xml")});
  CHECK(direct->kind == "resource-list-only");
}

TEST_CASE("Discovery: nothing to find gives the trail of what was tried") {
  Upstream up;
  up.set("/", "<html><body>hello</body></html>", "text/html");
  auto f = sync::make_default_fetcher();
  auto r = sync::discover(*f, up.url("/"), {});
  REQUIRE_FALSE(r);
  CHECK(r.error().kind == ErrorKind::not_found);
  INFO(r.error().message);
  // The cause first (what the first thing tried said), on one line, each
  // URL named once.
  CHECK(r.error().message.find("no Capability List found") != std::string::npos);
  CHECK(r.error().message.find("HTTP 404 for " + up.url("/.well-known/resourcesync")) != std::string::npos);
  CHECK(r.error().message.find("HTTP 404 for " + up.url("/robots.txt")) != std::string::npos);
  CHECK(r.error().message.find("GET ") == std::string::npos);
  CHECK(r.error().message.find('\n') == std::string::npos);
}

TEST_CASE("Discovery: a host that does not answer is not asked again for the well-known URI and robots.txt") {
  const int port = free_port(); // nothing listens
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  auto f = sync::make_default_fetcher();
  auto r = sync::discover(*f, base + "/oai/", {});
  REQUIRE_FALSE(r);
  INFO(r.error().message);
  CHECK(r.error().message.rfind("connection refused: 127.0.0.1:" + std::to_string(port) + "; ", 0) == 0);
  CHECK(r.error().message.find(base + "/oai/.well-known/resourcesync: not tried, " + base + " did not answer") !=
        std::string::npos);
  CHECK(r.error().message.find(base + "/.well-known/resourcesync: not tried, " + base + " did not answer") !=
        std::string::npos);
  CHECK(r.error().message.find(base + "/robots.txt: not tried, " + base + " did not answer") != std::string::npos);
}

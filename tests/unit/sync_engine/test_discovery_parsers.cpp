#include "sync_engine/discovery.h"
#include "common/url_resolve.h"

#include <doctest/doctest.h>

using namespace tributary::sync;

TEST_CASE("resolve_reference: RFC 3986 section 5.4 examples") {
  const std::string base = "http://a/b/c/d;p?q";
  struct Case {
    const char* ref;
    const char* out;
  };
  const Case cases[] = {
      {"g", "http://a/b/c/g"},       {"./g", "http://a/b/c/g"},     {"g/", "http://a/b/c/g/"},
      {"/g", "http://a/g"},          {"//g", "http://g"},           {"?y", "http://a/b/c/d;p?y"},
      {"g?y", "http://a/b/c/g?y"},   {"#s", "http://a/b/c/d;p?q#s"}, {"../g", "http://a/b/g"},
      {"../../g", "http://a/g"},     {"../../../g", "http://a/g"},  {"https://x.org/y", "https://x.org/y"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.ref);
    auto r = tributary::resolve_reference(base, c.ref);
    REQUIRE(r);
    CHECK(*r == c.out);
  }
  CHECK_FALSE(tributary::resolve_reference("http://a/", "http://bad host/"));
}

TEST_CASE("Link headers: rel tokens, quoting, several links, relative targets") {
  auto t = link_header_targets(
      "<http://e.org/a>; rel=\"describedby\", </caps.xml>; rel=\"resourcesync\"; type=\"application/xml\", "
      "<other.xml>; rel=\"alternate resourcesync\", <http://e.org/x,y>; title=\"a, b\"; rel=ResourceSync",
      "resourcesync", "http://e.org/dir/page");
  REQUIRE(t.size() == 3);
  CHECK(t[0] == "http://e.org/caps.xml");
  CHECK(t[1] == "http://e.org/dir/other.xml");
  CHECK(t[2] == "http://e.org/x,y");
  CHECK(link_header_targets("", "resourcesync", "http://e.org/").empty());
}

TEST_CASE("HTML: <link rel=\"resourcesync\"> in any attribute order and quoting") {
  const std::string html = R"(<!DOCTYPE html><html><head>
    <link rel="stylesheet" href="/s.css">
    <LINK href='dataset1/capabilitylist.xml?a=1&amp;b=2' REL='resourcesync'/>
    <link rel=resourcesync href=/other/caps.xml>
    </head><body>...</body></html>)";
  auto t = html_link_targets(html, "resourcesync", "http://www.example.com/");
  REQUIRE(t.size() == 2);
  CHECK(t[0] == "http://www.example.com/dataset1/capabilitylist.xml?a=1&b=2");
  CHECK(t[1] == "http://www.example.com/other/caps.xml");
}

TEST_CASE("robots.txt: Sitemap lines, any case, comments ignored") {
  auto s = robots_sitemaps("User-agent: *\nDisallow: /private\n# Sitemap: http://e.org/commented.xml\n"
                           "sitemap: http://e.org/rl.xml   \r\nSITEMAP:/relative.xml\n",
                           "http://e.org/robots.txt");
  REQUIRE(s.size() == 2);
  CHECK(s[0] == "http://e.org/rl.xml");
  CHECK(s[1] == "http://e.org/relative.xml");
}

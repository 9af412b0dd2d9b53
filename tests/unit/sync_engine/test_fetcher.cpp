#include "sync_engine/fetcher.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

using namespace tributary;
using namespace tributary::sync;

TEST_CASE("parse_url: absolute URLs with defaults and explicit ports") {
  auto u = parse_url("HTTPS://Example.ORG/a/b?c=1#frag");
  REQUIRE(u);
  CHECK(u->scheme == "https");
  CHECK(u->host == "example.org");
  CHECK(u->port == 443);
  CHECK(u->target == "/a/b?c=1");
  CHECK(u->str() == "https://example.org/a/b?c=1");
  auto p = parse_url("http://127.0.0.1:8080");
  REQUIRE(p);
  CHECK(p->port == 8080);
  CHECK(p->target == "/");
  CHECK(p->origin() == "http://127.0.0.1:8080");
  auto v6 = parse_url("http://[::1]:9000/x");
  REQUIRE(v6);
  CHECK(v6->host == "[::1]");
  CHECK(v6->port == 9000);
  auto f = parse_url("file:///tmp/x.xml");
  REQUIRE(f);
  CHECK(f->target == "/tmp/x.xml");
}

TEST_CASE("parse_url: refuses what it cannot fetch safely") {
  for (const char* bad : {"example.org/x", "http://", "http://h:0/", "http://h:99999/", "http://user:pw@h/",
                          "file://otherhost/x"}) {
    CAPTURE(bad);
    auto r = parse_url(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().kind == ErrorKind::usage);
  }
}

TEST_CASE("resolve_redirect: absolute, absolute-path and relative Locations") {
  auto base = *parse_url("http://e.org:81/a/b/list.xml?x=1");
  CHECK(resolve_redirect(base, "https://o.org/y") == "https://o.org/y");
  CHECK(resolve_redirect(base, "/root.xml") == "http://e.org:81/root.xml");
  CHECK(resolve_redirect(base, "other.xml") == "http://e.org:81/a/b/other.xml");
  CHECK(resolve_redirect(base, "//cdn.e.org/z") == "http://cdn.e.org/z");
}

TEST_CASE("Fetcher: file URLs stream the file, missing files are not_found, unknown schemes are usage errors") {
  auto dir = std::filesystem::temp_directory_path() / "tributary-fetcher-test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "a b.xml") << "hello";
  auto fetcher = make_default_fetcher();
  std::string body;
  auto r = fetcher->fetch("file://" + (dir / "a%20b.xml").string(), {}, [&](const char* d, size_t n) {
    body.append(d, n);
    return true;
  });
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(body == "hello");
  auto missing = fetcher->fetch("file://" + (dir / "nope.xml").string(), {}, [](const char*, size_t) { return true; });
  REQUIRE_FALSE(missing);
  CHECK(missing.error().kind == ErrorKind::not_found);
  auto gsi = fetcher->fetch("gsiftp://grid.example.org/x", {}, [](const char*, size_t) { return true; });
  REQUIRE_FALSE(gsi);
  CHECK(gsi.error().kind == ErrorKind::usage);
  CHECK(gsi.error().message.find("scheme 'gsiftp' is not supported") != std::string::npos);
  std::filesystem::remove_all(dir);
}

#include "common/url_host.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace tributary;

TEST_CASE("url_host: the host of a URL as RFC 3986 parses it, lower-cased") {
  CHECK(url_host("http://Sub.Example.ORG:8080/cb?x=1") == "sub.example.org");
  CHECK(url_host("https://user:pw@host.example/p") == "host.example");
  // Userinfo may hold what a hand-written split takes for a host.
  CHECK(url_host("http://evil.example:80@good.example/") == "good.example");
  CHECK(url_host("http://[2001:db8::1]:8080/") == "2001:db8::1");
  CHECK(url_host("not a url") == "");
  CHECK(url_host("urn:x:y") == "");
}

TEST_CASE("registrable_domain: the Public Suffix List decides, addresses and single labels are their own") {
  CHECK(registrable_domain("a.b.example.com") == "example.com");
  CHECK(registrable_domain("x.example.co.uk") == "example.co.uk");
  CHECK(registrable_domain("WWW.Example.COM.") == "example.com");
  // A private-section suffix: each GitHub Pages site is its own domain.
  CHECK(registrable_domain("alice.github.io") == "alice.github.io");
  CHECK(registrable_domain("192.0.2.7") == "192.0.2.7");
  CHECK(registrable_domain("2001:db8::1") == "2001:db8::1");
  CHECK(registrable_domain("localhost") == "localhost");
  // A public suffix itself has no registrable domain: it stands for itself.
  CHECK(registrable_domain("co.uk") == "co.uk");
}

TEST_CASE("canonical_host: 21 spellings of one address are one host, and so are a name in any case, with IDNA or a trailing dot") {
  const std::vector<std::string> spellings{
      "127.0.0.2",   "127.0.0.02",     "127.000.000.002", "2130706434",         "0x7f000002",  "0X7F000002",
      "127.2",       "127.0.2",        "0177.0.0.2",      "0x7f.0.0.2",         "0x7f.2",      "017700000002",
      "127.0.0.2.",  "127.0.0.2..",    "%31%32%37.0.0.2", "::ffff:127.0.0.2",   "[::ffff:7f00:2]",
      "0x7f.0x0.0x0.0x2", "0177.0.0.02", "127.00.0.2", "::FFFF:127.0.0.2"};
  REQUIRE(spellings.size() == 21);
  for (const auto& s : spellings) {
    CHECK_MESSAGE(canonical_host(s) == "127.0.0.2", s);
  }
  CHECK(canonical_host("2001:DB8:0:0:0:0:0:1") == "2001:db8::1");
  CHECK(canonical_host("[2001:db8::0001]") == "2001:db8::1");
  CHECK(canonical_host("Example.ORG.") == "example.org");
  CHECK(canonical_host("B\xc3\x9c" "CHER.example") == "xn--bcher-kva.example");
  CHECK(canonical_host("xn--bcher-kva.example") == "xn--bcher-kva.example");
  // Not addresses: left as names.
  CHECK(canonical_host("cafe.example") == "cafe.example");
  CHECK(canonical_host("0x7g000002") == "0x7g000002");
  CHECK(canonical_host("") == "");
}

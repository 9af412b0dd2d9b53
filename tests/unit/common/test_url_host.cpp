#include "common/url_host.h"

#include <doctest/doctest.h>

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

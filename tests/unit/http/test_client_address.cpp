#include "common/http/client_address.h"

#include <doctest/doctest.h>

using namespace tributary::http;

TEST_CASE("ProxyTrust: from a trusted proxy the client is the forwarded address, from anyone else the peer") {
  auto t = ProxyTrust::parse({"127.0.0.1", "10.0.0.0/8", "2001:db8:ffff::/48"});
  REQUIRE(t);
  const std::string xff = "198.51.100.7, 10.1.2.3";
  // The nearest hop that is not a proxy of ours: 10.1.2.3 is one.
  CHECK(t->client_of("127.0.0.1", nullptr, &xff) == "198.51.100.7");
  CHECK(t->client_of("10.9.9.9", nullptr, &xff) == "198.51.100.7");
  // A forged chain: the client wrote its first element; the proxy appended
  // the address it saw, and that is what counts.
  const std::string forged = "1.2.3.4, 198.51.100.8";
  CHECK(t->client_of("127.0.0.1", nullptr, &forged) == "198.51.100.8");
  // From anyone else, the headers are the client's to forge: ignored.
  CHECK(t->client_of("192.0.2.1", nullptr, &xff) == "192.0.2.1");
  // RFC 7239, with a port, quotes, brackets and other parameters; it wins
  // over X-Forwarded-For.
  const std::string fwd = "for=192.0.2.43, for=\"[2001:db8:cafe::17]:4711\";proto=https";
  CHECK(t->client_of("127.0.0.1", &fwd, &xff) == "2001:db8:cafe::/64");
  const std::string v4port = "for=\"192.0.2.60:8080\"";
  CHECK(t->client_of("127.0.0.1", &v4port, nullptr) == "192.0.2.60");
  // "unknown" or an obfuscated node: the proxy is what we know.
  const std::string unknown = "for=unknown";
  CHECK(t->client_of("127.0.0.1", &unknown, nullptr) == "127.0.0.1");
  // No header from a proxy: the proxy.
  CHECK(t->client_of("127.0.0.1", nullptr, nullptr) == "127.0.0.1");
}

TEST_CASE("ProxyTrust: IPv6 clients count by their /64, and entries that are not addresses are refused, saying which") {
  CHECK(client_key("2001:db8:1:2:aaaa:bbbb:cccc:dddd") == "2001:db8:1:2::/64");
  CHECK(client_key("2001:db8:1:2::1") == client_key("2001:db8:1:2:ffff::9"));
  CHECK(client_key("::ffff:192.0.2.1") == "192.0.2.1");
  CHECK(client_key("not an address").empty());
  auto none = ProxyTrust::parse({});
  REQUIRE(none);
  const std::string xff = "198.51.100.7";
  CHECK(none->client_of("127.0.0.1", nullptr, &xff) == "127.0.0.1");
  auto bad = ProxyTrust::parse({"proxy.example"});
  REQUIRE(!bad);
  CHECK(bad.error().message.find("proxy.example") != std::string::npos);
  CHECK(!ProxyTrust::parse({"10.0.0.0/33"}));
  auto v6 = ProxyTrust::parse({"2001:db8:ffff::/48"});
  REQUIRE(v6);
  CHECK(v6->trusts("2001:db8:ffff:1::1"));
  CHECK(!v6->trusts("2001:db8:fffe::1"));
}

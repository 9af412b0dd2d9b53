#include "sync_engine/fetcher.h"
#include "tests/support/hostile.h"

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include <chrono>
#include <thread>

#include <filesystem>
#include <fstream>

using namespace tributary;
using namespace tributary::sync;
using tributary::test::gzip_bomb;
using tributary::test::peak_rss_kib;

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
  // A FIFO (it once hung `explore` for ever, no writer coming) and a
  // directory are no documents: refused at once.
  std::filesystem::remove(dir / "fifo"); // left by a run that failed half-way
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  for (const auto& name : {"fifo", ""}) {
    auto odd = fetcher->fetch("file://" + (dir / name).string(), {}, [](const char*, size_t) { return true; });
    REQUIRE_FALSE(odd);
    CHECK(odd.error().message.find("is not a regular file") != std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

namespace {

// A server that answers every request on one connection with `response`,
// then keeps the connection open (as a keep-alive server does) until the
// client goes.
struct RawServer {
  int listener = -1;
  int port = 0;
  std::thread thread;

  explicit RawServer(std::string response) {
    listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(listener, 4) == 0);
    socklen_t len = sizeof a;
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    thread = std::thread([this, response] {
      const int c = ::accept(listener, nullptr, nullptr);
      if (c < 0) {
        return;
      }
      std::string got;
      char buf[4096];
      while (got.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) {
          ::close(c);
          return;
        }
        got.append(buf, static_cast<size_t>(n));
      }
      (void)::send(c, response.data(), response.size(), MSG_NOSIGNAL);
      while (::recv(c, buf, sizeof buf, 0) > 0) {
      }
      ::close(c);
    });
  }
  ~RawServer() {
    ::shutdown(listener, SHUT_RDWR);
    ::close(listener);
    thread.join();
  }
};

} // namespace

TEST_CASE("Fetcher: a 304 or 204 without Content-Length on a kept-alive connection ends at its headers") {
  for (const char* head : {"HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n\r\n", "HTTP/1.1 204 No Content\r\n\r\n"}) {
    CAPTURE(head);
    RawServer server(head);
    auto fetcher = make_default_fetcher();
    FetchOptions o;
    o.read_timeout = std::chrono::seconds(5);
    o.headers["If-None-Match"] = "\"v1\"";
    size_t body = 0;
    const auto started = std::chrono::steady_clock::now();
    auto r = fetcher->fetch("http://127.0.0.1:" + std::to_string(server.port) + "/cl.xml", o,
                            [&](const char*, size_t n) {
                              body += n;
                              return true;
                            });
    const auto took = std::chrono::steady_clock::now() - started;
    REQUIRE(r);
    CHECK((r->status == 304 || r->status == 204));
    CHECK(body == 0);
    // Before the fix the client read a body until the read timeout.
    CHECK(took < std::chrono::seconds(4));
  }
}

TEST_CASE("Fetcher: a POST's answer streams through the bounded receiver and is never inflated (a gzip bomb costs "
          "nothing)") {
  const std::string bomb = gzip_bomb(256); // 256 MiB inflated, about 250 KB sent
  RawServer server("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: gzip\r\nContent-Length: " +
                   std::to_string(bomb.size()) + "\r\n\r\n" + bomb);
  auto fetcher = make_default_fetcher();
  FetchOptions o;
  o.method = "POST";
  o.body = "hub.mode=subscribe";
  o.content_type = "application/x-www-form-urlencoded";
  o.max_body_bytes = 64 * 1024; // a WebSub answer's limit
  size_t seen = 0;
  const size_t before = peak_rss_kib();
  auto r = fetcher->fetch("http://127.0.0.1:" + std::to_string(server.port) + "/callback", o,
                          [&](const char*, size_t n) {
                            seen += n;
                            return true;
                          });
  const size_t grew = peak_rss_kib() - before;
  MESSAGE("peak RSS grew by " << grew << " KiB for an answer that inflates to 256 MiB");
  CHECK(grew < 32 * 1024);
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("larger than the limit of 65536 bytes") != std::string::npos);
  CHECK(seen <= 64 * 1024);
}

// The epoll HTTP/1.1 server over real loopback sockets: raw bytes in, raw
// bytes out, so framing (keep-alive, pipelining, HEAD, ranges, refusals) is
// checked as a client sees it.
#include "common/http/server.h"

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

using namespace tributary;
using namespace tributary::http;

namespace {

struct Client {
  int fd = -1;
  explicit Client(int port) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  }
  ~Client() { ::close(fd); }
  void send(const std::string& s) const {
    REQUIRE(::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size()));
  }
  // Reads until `s` has arrived `count` times (never, when `s` is empty),
  // the peer closes, or `timeout_ms` passes without data.
  std::string read_until(const std::string& s, int count = 1, int timeout_ms = 3000) const {
    std::string out;
    char buf[65536];
    auto seen = [&] {
      int c = 0;
      for (size_t p = s.empty() ? std::string::npos : out.find(s); p != std::string::npos; p = out.find(s, p + 1)) {
        ++c;
      }
      return c;
    };
    while (s.empty() || seen() < count) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, timeout_ms) <= 0) {
        break;
      }
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) {
        break;
      }
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  // Everything until the peer closes (or `timeout_ms` without data).
  std::string read_all(int timeout_ms = 2000) const { return read_until("", 0, timeout_ms); }
  bool closed_by_peer(int timeout_ms = 3000) const {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) {
      return false;
    }
    char c;
    return ::recv(fd, &c, 1, 0) == 0;
  }
};

struct TestServer {
  Server server;
  explicit TestServer(Handler h, ServerOptions o = {}) : server(prepare(o), std::move(h)) {
    REQUIRE(server.start());
  }
  static ServerOptions prepare(ServerOptions o) {
    o.port = 0;
    o.loops = 2;
    o.workers = 2;
    return o;
  }
  int port() const { return server.port(); }
};

Disposition echo(const Request& req, Response& res, bool) {
  res.set_body(req.method + " " + req.target + " body=" + req.body, "text/plain");
  return Disposition::done;
}

std::string get(const std::string& target, const std::string& extra = "") {
  return "GET " + target + " HTTP/1.1\r\nHost: x\r\n" + extra + "\r\n";
}

} // namespace

TEST_CASE("HTTP server: byte ranges parse as RFC 9110 says, several ranges give the whole body") {
  auto r = parse_range("bytes=6-10", 11);
  REQUIRE(r);
  CHECK(r->first == 6);
  CHECK(r->length == 5);
  r = parse_range("bytes=6-", 11);
  REQUIRE(r);
  CHECK(r->length == 5);
  r = parse_range("bytes=-3", 11);
  REQUIRE(r);
  CHECK(r->first == 8);
  CHECK(r->length == 3);
  r = parse_range("bytes=5-100", 11);
  REQUIRE(r);
  CHECK(r->length == 6);
  r = parse_range("bytes=11-", 11);
  REQUIRE(r);
  CHECK_FALSE(r->satisfiable);
  CHECK_FALSE(parse_range("bytes=0-1,3-4", 11));
  CHECK_FALSE(parse_range("bytes=5-2", 11));
  CHECK_FALSE(parse_range("items=0-1", 11));
  CHECK_FALSE(parse_range("bytes=a-b", 11));
}

TEST_CASE("HTTP server: keep-alive and pipelined requests are answered in order on one connection") {
  TestServer s(echo);
  Client c(s.port());
  c.send(get("/one") + get("/two") + "POST /three HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
  const std::string out = c.read_until("HTTP/1.1 200 OK", 3);
  const size_t one = out.find("GET /one body=");
  const size_t two = out.find("GET /two body=");
  const size_t three = out.find("POST /three body=hello");
  REQUIRE(one != std::string::npos);
  REQUIRE(two != std::string::npos);
  REQUIRE(three != std::string::npos);
  CHECK(one < two);
  CHECK(two < three);
  CHECK(out.find("Connection: close") == std::string::npos);
  // Still open: a fourth request on the same connection.
  c.send(get("/four"));
  CHECK(c.read_until("GET /four").find("GET /four body=") != std::string::npos);
}

TEST_CASE("HTTP server: a request split across many writes is put together") {
  TestServer s(echo);
  Client c(s.port());
  const std::string req = "POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc";
  for (char ch : req) {
    c.send(std::string(1, ch));
  }
  CHECK(c.read_until("body=abc").find("POST /slow body=abc") != std::string::npos);
}

TEST_CASE("HTTP server: malformed and oversized requests are refused with a status and the connection closed") {
  ServerOptions o;
  o.max_header_bytes = 1024;
  o.max_body_bytes = 100;
  TestServer s(echo, o);
  struct Case {
    std::string request;
    std::string status;
  };
  const Case cases[] = {
      {"GARBAGE\r\n\r\n", "400"},
      {"GET / HTTP/1.1\r\n\r\n", "400"},                                   // no Host
      {"GET / HTTP/2.0\r\nHost: x\r\n\r\n", "505"},
      {"GET / FTP/1.0\r\n\r\n", "400"},
      {"GET /a b HTTP/1.1\r\nHost: x\r\n\r\n", "400"},
      {"GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", "400"},
      {"GET / HTTP/1.1\r\nHost: x\r\nBad Name: y\r\n\r\n", "400"},
      {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", "400"},
      {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", "400"},
      {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "501"},
      {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n", "413"},
      {"GET / HTTP/1.1\r\nHost: x\r\nX: " + std::string(2000, 'a') + "\r\n\r\n", "431"},
      {"GET / HTTP/1.1\r\nHost: x\r\nX: " + std::string(2000, 'a'), "431"}, // never ends
  };
  for (const Case& k : cases) {
    CAPTURE(k.request.substr(0, 60));
    Client c(s.port());
    c.send(k.request);
    const std::string out = c.read_all();
    CHECK(out.rfind("HTTP/1.1 " + k.status, 0) == 0);
    CHECK(out.find("Connection: close") != std::string::npos);
  }
}

TEST_CASE("HTTP server: HEAD sends the GET headers without the body, and a 304 sends the validators, no body, and closes") {
  TestServer s([](const Request& req, Response& res, bool) {
    if (req.path == "/304") {
      res.status = 304;
      res.set_header("ETag", "\"x\"");
      res.set_header("Cache-Control", "no-cache");
      return Disposition::done;
    }
    res.set_body("twelve bytes", "text/plain");
    return Disposition::done;
  });
  {
    Client c(s.port());
    c.send("HEAD / HTTP/1.1\r\nHost: x\r\n\r\n" + get("/"));
    const std::string out = c.read_until("twelve bytes");
    CHECK(out.find("Content-Length: 12\r\n\r\nHTTP/1.1 200 OK") != std::string::npos);
    CHECK(out.find("twelve bytes") == out.rfind("twelve bytes")); // once: from the GET only
  }
  // A client that reads a 304's body to the end of the connection when no
  // Content-Length is given (cpp-httplib 0.11, and so every Tributary before
  // its own client was fixed) gets that end at once, not after the idle
  // timeout.
  Client c(s.port());
  c.send(get("/304"));
  const std::string out = c.read_until("\r\n\r\n");
  CHECK(out.rfind("HTTP/1.1 304 Not Modified\r\n", 0) == 0);
  CHECK(out.find("ETag: \"x\"\r\n") != std::string::npos);
  CHECK(out.find("Cache-Control: no-cache\r\n") != std::string::npos);
  CHECK(out.find("Content-Length") == std::string::npos);
  CHECK(out.find("Connection: close\r\n") != std::string::npos);
  CHECK(c.closed_by_peer(1000));
}

TEST_CASE("HTTP server: single ranges of memory and file bodies, 416, and If-Range with a stale tag") {
  const auto dir = std::filesystem::temp_directory_path() / ("tributary-http-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto file = dir / "f.bin";
  std::ofstream(file) << "0123456789";
  TestServer s([&](const Request& req, Response& res, bool can_block) {
    res.set_header("ETag", "\"e\"");
    res.ranges = true;
    if (req.path == "/file") {
      if (!can_block) {
        return Disposition::blocking;
      }
      res.set_file(std::make_shared<const OpenFile>(::open(file.c_str(), O_RDONLY)), 10, "application/octet-stream");
    } else {
      res.set_shared(std::make_shared<const std::string>("abcdefghij"), "text/plain");
    }
    return Disposition::done;
  });
  auto ask = [&](const std::string& target, const std::string& headers) {
    Client c(s.port());
    c.send("GET " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + headers + "\r\n");
    return c.read_all();
  };
  std::string out = ask("/mem", "Range: bytes=2-4\r\n");
  CHECK(out.rfind("HTTP/1.1 206", 0) == 0);
  CHECK(out.find("Content-Range: bytes 2-4/10") != std::string::npos);
  CHECK(out.substr(out.size() - 3) == "cde");
  out = ask("/file", "Range: bytes=-4\r\n");
  CHECK(out.rfind("HTTP/1.1 206", 0) == 0);
  CHECK(out.substr(out.size() - 4) == "6789");
  out = ask("/file", "");
  CHECK(out.rfind("HTTP/1.1 200", 0) == 0);
  CHECK(out.substr(out.size() - 10) == "0123456789");
  out = ask("/mem", "Range: bytes=10-\r\n");
  CHECK(out.rfind("HTTP/1.1 416", 0) == 0);
  CHECK(out.find("Content-Range: bytes */10") != std::string::npos);
  out = ask("/mem", "Range: bytes=2-4\r\nIf-Range: \"old\"\r\n");
  CHECK(out.rfind("HTTP/1.1 200", 0) == 0);
  CHECK(out.substr(out.size() - 10) == "abcdefghij");
  out = ask("/mem", "Range: bytes=2-4\r\nIf-Range: \"e\"\r\n");
  CHECK(out.rfind("HTTP/1.1 206", 0) == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("HTTP server: a handler that blocks runs on a worker and does not hold up other connections") {
  std::atomic<bool> release{false};
  TestServer s([&](const Request& req, Response& res, bool can_block) {
    if (req.path == "/slow") {
      if (!can_block) {
        return Disposition::blocking;
      }
      while (!release) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      res.set_body("slow done", "text/plain");
      return Disposition::done;
    }
    res.set_body("fast", "text/plain");
    return Disposition::done;
  });
  Client slow(s.port());
  slow.send(get("/slow") + get("/after-slow"));
  for (int i = 0; i < 20; ++i) {
    Client fast(s.port());
    fast.send(get("/fast", "Connection: close\r\n"));
    CHECK(fast.read_all().find("fast") != std::string::npos);
  }
  release = true;
  const std::string out = slow.read_until("HTTP/1.1 200", 2);
  CHECK(out.find("slow done") != std::string::npos);
  CHECK(out.find("slow done") < out.find("\r\n\r\nfast"));
}

TEST_CASE("HTTP server: a large body reaches a slow reader whole, and a throwing handler answers 500") {
  std::string big(8 * 1024 * 1024, 'x');
  for (size_t i = 0; i < big.size(); i += 4096) {
    big[i] = static_cast<char>('a' + (i / 4096) % 26);
  }
  auto shared = std::make_shared<const std::string>(big);
  TestServer s([&](const Request& req, Response& res, bool) {
    if (req.path == "/throw") {
      throw std::runtime_error("boom");
    }
    res.set_shared(shared, "application/octet-stream");
    return Disposition::done;
  });
  Client c(s.port());
  int small = 64 * 1024;
  setsockopt(c.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  c.send(get("/big", "Connection: close\r\n"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200)); // let the server fill the socket and wait
  const std::string out = c.read_all(3000);
  const size_t body = out.find("\r\n\r\n");
  REQUIRE(body != std::string::npos);
  CHECK(out.size() - body - 4 == big.size());
  CHECK(out.compare(body + 4, std::string::npos, big) == 0);
  Client t(s.port());
  t.send(get("/throw"));
  CHECK(t.read_until("\r\n\r\n").rfind("HTTP/1.1 500", 0) == 0);
}

TEST_CASE("HTTP server: HTTP/1.0 closes unless asked to keep alive, and Connection: close closes") {
  TestServer s(echo);
  {
    Client c(s.port());
    c.send("GET /a HTTP/1.0\r\n\r\n");
    const std::string out = c.read_all();
    CHECK(out.find("GET /a body=") != std::string::npos);
    CHECK(out.find("Connection: close") != std::string::npos);
  }
  {
    Client c(s.port());
    c.send("GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    const std::string out = c.read_until("body=");
    CHECK(out.find("Connection: keep-alive") != std::string::npos);
    c.send("GET /b HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
    CHECK(c.read_until("body=").find("GET /b") != std::string::npos);
  }
  {
    Client c(s.port());
    c.send(get("/a", "Connection: close\r\n") + get("/never"));
    const std::string out = c.read_all();
    CHECK(out.find("GET /a") != std::string::npos);
    CHECK(out.find("/never") == std::string::npos);
  }
}

TEST_CASE("HTTP server: idle and half-sent requests time out, and stop() does not wait for idle clients") {
  ServerOptions o;
  o.idle_timeout = std::chrono::seconds(1);
  o.request_timeout = std::chrono::seconds(1);
  auto s = std::make_unique<TestServer>(echo, o);
  Client idle(s->port());
  Client half(s->port());
  half.send("GET / HTTP/1.1\r\nHost:");
  CHECK(idle.closed_by_peer(4000));
  CHECK(half.closed_by_peer(4000));
  Client open(s->port());
  open.send(get("/x"));
  CHECK(open.read_until("body=").find("GET /x") != std::string::npos);
  const auto started = std::chrono::steady_clock::now();
  s.reset();
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(2));
  CHECK(open.closed_by_peer(1000));
}

TEST_CASE("HTTP server: an address in use is an io error naming it") {
  TestServer s(echo);
  ServerOptions o;
  o.port = s.port();
  Server second(o, echo);
  auto r = second.start();
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("cannot listen on 127.0.0.1:" + std::to_string(s.port())) != std::string::npos);
}

TEST_CASE("HTTP server: pipelined requests sent with a half-close are all answered, then the connection closes") {
  // The first goes to a worker, so that the half-close is seen while it
  // is out: the two behind it must still be answered.
  TestServer s([](const Request& req, Response& res, bool can_block) {
    if (req.path == "/one" && !can_block) {
      return Disposition::blocking;
    }
    if (req.path == "/one") {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return echo(req, res, can_block);
  });
  Client c(s.port());
  c.send(get("/one") + get("/two") + get("/three"));
  ::shutdown(c.fd, SHUT_WR);
  const std::string out = c.read_all();
  CHECK(out.find("GET /one body=") != std::string::npos);
  CHECK(out.find("GET /two body=") != std::string::npos);
  CHECK(out.find("GET /three body=") != std::string::npos);
}

TEST_CASE("HTTP server: no header value with CR, LF or NUL goes out, nor comes in") {
  TestServer s([](const Request&, Response& res, bool) {
    res.set_body("x", "text/plain\r\nSet-Cookie: injected=1");
    res.set_header("X-Fine", "yes");
    res.set_header("X-Nul", std::string("a\0b", 3));
    return Disposition::done;
  });
  {
    Client c(s.port());
    c.send(get("/"));
    const std::string out = c.read_until("\r\n\r\n");
    CHECK(out.find("HTTP/1.1 200") == 0);
    CHECK(out.find("Set-Cookie") == std::string::npos);
    CHECK(out.find("Content-Type") == std::string::npos); // dropped whole, not cut at the CR
    CHECK(out.find("X-Nul") == std::string::npos);
    CHECK(out.find("X-Fine: yes") != std::string::npos);
  }
  for (const std::string& bad : {std::string("X-A: a\rb\r\n"), std::string("X-A: a\nb\r\n"), std::string("X-A: a\0b\r\n", 10)}) {
    Client c(s.port());
    c.send("GET / HTTP/1.1\r\nHost: x\r\n" + bad + "\r\n");
    CHECK(c.read_all().find("HTTP/1.1 400") == 0);
  }
}

TEST_CASE("HTTP server: a body is read for POST, PUT and PATCH only, and a client has at most its cap of connections") {
  ServerOptions o;
  o.max_connections_per_client = 3;
  TestServer s(echo, o);
  {
    Client c(s.port());
    c.send("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
    CHECK(c.read_all().find("HTTP/1.1 413") == 0);
  }
  std::vector<std::unique_ptr<Client>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(std::make_unique<Client>(s.port()));
    held.back()->send(get("/hold"));
    CHECK(held.back()->read_until("body=").find("200 OK") != std::string::npos);
  }
  Client over(s.port());
  CHECK(over.read_all().find("HTTP/1.1 503") == 0);
  held.pop_back(); // one leaves: the next is let in
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Client again(s.port());
  again.send(get("/again"));
  CHECK(again.read_until("body=").find("GET /again") != std::string::npos);
}

// A baseline through the pipelined path, end to end: the engine against a
// raw server on 127.0.0.1 that answers pipelined requests as nginx does (in
// order, keep-alive, HEAD without content), with resources that are not a
// clean 2xx among them. The test upstreams of the other integration tests
// (cpp-httplib) drop pipelined requests, so there the probe turns
// pipelining off and only the ordinary path runs.
#include "sync_fixture.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>

using namespace tributary;
using namespace tributary::test;
using store::RunMode;
using store::RunStatus;

namespace {

class PipeliningUpstream {
public:
  struct Answer {
    int status = 200;
    std::string body;
    std::string headers; // extra lines, each ending CRLF
  };

  PipeliningUpstream() {
    m_listen = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(m_listen >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    REQUIRE(::bind(m_listen, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(m_listen, 64) == 0);
    socklen_t len = sizeof a;
    getsockname(m_listen, reinterpret_cast<sockaddr*>(&a), &len);
    m_port = ntohs(a.sin_port);
    m_thread = std::thread([this] { loop(); });
  }
  ~PipeliningUpstream() {
    m_stop = true;
    ::shutdown(m_listen, SHUT_RDWR);
    ::close(m_listen);
    m_thread.join();
    for (auto& t : m_conns) {
      t.join();
    }
  }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(m_port) + path; }
  void set(const std::string& path, Answer a) {
    std::lock_guard lock(m_mutex);
    m_paths[path] = std::move(a);
  }
  void set_document(const std::string& path, const rs::Document& d) {
    set(path, Answer{200, rs::write_document(d), "Content-Type: application/xml\r\n"});
  }
  size_t gets(const std::string& path) {
    std::lock_guard lock(m_mutex);
    return m_gets[path];
  }
  size_t heads() const { return m_heads.load(); }
  size_t most_in_one_read() const { return m_most.load(); }

private:
  void loop() {
    for (;;) {
      int fd = ::accept4(m_listen, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        return;
      }
      m_conns.emplace_back([this, fd] { serve(fd); });
    }
  }
  std::string answer(bool head, const std::string& path) {
    std::lock_guard lock(m_mutex);
    if (head) {
      ++m_heads;
    } else {
      ++m_gets[path];
    }
    auto it = m_paths.find(path);
    const Answer a = it == m_paths.end() ? Answer{404, "not here\n", ""} : it->second;
    std::string out = "HTTP/1.1 " + std::to_string(a.status) + " X\r\n" + a.headers +
                      "Content-Length: " + std::to_string(a.body.size()) + "\r\n\r\n";
    return head ? out : out + a.body;
  }
  void serve(int fd) {
    std::string in;
    char buf[65536];
    while (!m_stop) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) {
        continue;
      }
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) {
        break;
      }
      in.append(buf, static_cast<size_t>(n));
      std::string out;
      size_t count = 0;
      for (size_t end; (end = in.find("\r\n\r\n")) != std::string::npos;) {
        const size_t sp = in.find(' ');
        const bool head = in.compare(0, 5, "HEAD ") == 0;
        out += answer(head, in.substr(sp + 1, in.find(' ', sp + 1) - sp - 1));
        in.erase(0, end + 4);
        ++count;
      }
      if (count > m_most.load()) {
        m_most = count;
      }
      (void)::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
    }
    ::close(fd);
  }

  int m_listen = -1;
  int m_port = 0;
  std::thread m_thread;
  std::vector<std::thread> m_conns;
  std::atomic<bool> m_stop{false};
  std::mutex m_mutex;
  std::map<std::string, Answer> m_paths;
  std::map<std::string, size_t> m_gets;
  std::atomic<size_t> m_heads{0};
  std::atomic<size_t> m_most{0};
};

} // namespace

TEST_CASE("Pipelining: a baseline of 300 resources from a server that pipelines stores each once, and what is not a clean answer goes the ordinary way") {
  PipeliningUpstream up;
  rs::Document sd = make_doc("description");
  sd.entries.push_back(cap_entry(up.url("/caps.xml"), "capabilitylist"));
  up.set_document("/.well-known/resourcesync", sd);
  rs::Document caps = make_doc("capabilitylist");
  caps.entries.push_back(cap_entry(up.url("/rl.xml"), "resourcelist"));
  up.set_document("/caps.xml", caps);
  rs::Document rl = make_doc("resourcelist");
  rl.header.md->at = ts("2026-01-01T00:00:00Z");
  std::map<std::string, std::string> expected;
  for (int i = 0; i < 300; ++i) {
    const std::string path = "/res/" + std::to_string(i) + ".txt";
    const std::string body = "resource " + std::to_string(i) + "\n";
    up.set(path, {200, body, "Content-Type: text/plain\r\n"});
    rs::Entry e = resource_entry(up.url(path), body);
    if (i % 2 == 0) {
      e.md->length.reset(); // half without a length: the body's framing alone says where it ends
    }
    rl.entries.push_back(e);
    expected[up.url(path)] = body;
  }
  // Listed but missing; listed with another content's hash; moved.
  rl.entries.push_back(resource_entry(up.url("/gone.txt"), "gone"));
  up.set("/bad.txt", {200, "WHAT THE LIST SAYS\n", ""}); // as long, other bytes
  rl.entries.push_back(resource_entry(up.url("/bad.txt"), "what the list says\n"));
  up.set("/moved.txt", {302, "", "Location: /res/moved-here.txt\r\n"});
  up.set("/res/moved-here.txt", {200, "moved\n", ""});
  rl.entries.push_back(resource_entry(up.url("/moved.txt"), "moved\n"));
  expected[up.url("/moved.txt")] = "moved\n";
  up.set_document("/rl.xml", rl);

  SyncEnv env;
  auto src = SyncEnv::source(up.url("/"));
  src.allow_hosts = {"127.0.0.1"};
  auto r = env.run(src, RunMode::baseline);
  CHECK(r.status == RunStatus::partial);
  CHECK(r.counters.created == 301);
  CHECK(r.counters.failed == 2);
  CHECK(env.live() == expected);
  CHECK(env.stats_consistent());
  // Pipelined: several requests read at once by the server, one probe.
  CHECK(up.most_in_one_read() > 1);
  CHECK(up.heads() >= 1); // a probe on each connection opened before the verdict (two workers)
  CHECK(up.heads() <= 2);
  // Each resource asked once; what was not a clean 2xx asked again the
  // ordinary way (which judged it: not found, hash mismatch, followed).
  for (int i = 0; i < 300; ++i) {
    CHECK(up.gets("/res/" + std::to_string(i) + ".txt") == 1);
  }
  CHECK(up.gets("/gone.txt") >= 2);
  CHECK(up.gets("/moved.txt") >= 2);
  for (const auto& e : r.errors) {
    MESSAGE(e);
  }
  bool mismatch = false;
  bool missing = false;
  for (const auto& e : r.errors) {
    mismatch = mismatch || (e.find(up.url("/bad.txt")) != std::string::npos && e.find("hash mismatch") != std::string::npos);
    missing = missing || e.find(up.url("/gone.txt")) != std::string::npos;
  }
  CHECK(mismatch);
  CHECK(missing);
  CHECK(env.live().count(up.url("/bad.txt")) == 0);
}

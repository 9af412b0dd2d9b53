// A baseline through the pipelined path, end to end: the engine against a
// raw server on 127.0.0.1 that answers pipelined requests as nginx does (in
// order, keep-alive, HEAD without content), with resources that are not a
// clean 2xx among them. The test upstreams of the other integration tests
// (cpp-httplib) drop pipelined requests, so there the probe turns
// pipelining off and only the ordinary path runs.
#include "process.h"
#include "sync_fixture.h"
#include "../common/files.h"
#include "../common/pipelining_server.h"


#include <atomic>
#include <chrono>
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

  std::string url(const std::string& path) const { return m_server.url(path); }
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
  size_t most_in_one_read() const { return m_server.most_in_one_read(); }
  size_t connections_pipelined() const { return m_server.connections_pipelined(); }
  size_t most_open_at_once() const { return m_server.most_open_at_once(); }
  // Answers to paths under `prefix` take `delay` each; the most of them
  // being answered at once is counted.
  void slow_down(const std::string& prefix, std::chrono::milliseconds delay) {
    std::lock_guard lock(m_mutex);
    m_slow_prefix = prefix;
    m_slow_delay = delay;
  }
  int most_slow_at_once() const { return m_most_slow.load(); }

private:
  // Every request of a read, in order, as nginx does.
  bool answer(const std::vector<PipelinedRequest>& requests, std::string& out) {
    std::chrono::milliseconds delay{0};
    {
      std::lock_guard lock(m_mutex);
      if (!m_slow_prefix.empty() && requests.front().target.rfind(m_slow_prefix, 0) == 0) {
        delay = m_slow_delay;
      }
    }
    if (delay.count() > 0) {
      const int now = ++m_slow_now;
      for (int seen = m_most_slow.load(); now > seen && !m_most_slow.compare_exchange_weak(seen, now);) {
      }
      std::this_thread::sleep_for(delay);
      --m_slow_now;
    }
    std::lock_guard lock(m_mutex);
    for (const auto& r : requests) {
      if (r.head) {
        ++m_heads;
      } else {
        ++m_gets[r.target];
      }
      auto it = m_paths.find(r.target);
      const Answer a = it == m_paths.end() ? Answer{404, "not here\n", ""} : it->second;
      out += "HTTP/1.1 " + std::to_string(a.status) + " X\r\n" + a.headers +
             "Content-Length: " + std::to_string(a.body.size()) + "\r\n\r\n";
      if (!r.head) {
        out += a.body;
      }
    }
    return true;
  }

  std::mutex m_mutex;
  std::map<std::string, Answer> m_paths;
  std::map<std::string, size_t> m_gets;
  std::atomic<size_t> m_heads{0};
  std::string m_slow_prefix;
  std::chrono::milliseconds m_slow_delay{0};
  std::atomic<int> m_slow_now{0};
  std::atomic<int> m_most_slow{0};
  PipeliningServer m_server{[this](const std::vector<PipelinedRequest>& rs, std::string& out) { return answer(rs, out); }};
};

// `up` seen through tools/delay_proxy.py: 25 ms each way, a Source 50 ms
// away (the documents name the proxy's URLs).
struct FarUpstream {
  PipeliningUpstream& up;
  int port = free_port();
  pid_t pid = 0;
  explicit FarUpstream(PipeliningUpstream& u) : up(u) {
    const std::string script = (std::filesystem::path(TRIBUTARY_SOURCE_DIR) / "tools/delay_proxy.py").string();
    std::vector<std::string> args{python3(), script, std::to_string(port),
                                  std::to_string(std::stoi(up.url("").substr(up.url("").rfind(':') + 1))), "25"};
    std::vector<char*> argv;
    for (auto& a : args) {
      argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    REQUIRE(posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) == 0);
    for (int i = 0; i < 100 && !connectable(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~FarUpstream() {
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
  }
  bool connectable() const {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
  }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port) + path; }
  void set_document(const std::string& path, const rs::Document& d) { up.set_document(path, d); }
};

// A baseline of the Source `up` publishes (its host allowed: 127.0.0.1).
sync::SourceReport baseline_of(SyncEnv& env, PipeliningUpstream& up) {
  auto src = SyncEnv::source(up.url("/"));
  src.allow_hosts = {"127.0.0.1"};
  return env.run(src, RunMode::baseline);
}

} // namespace

TEST_CASE("Pipelining: a baseline of 300 resources from a server that pipelines stores each once, and what is not a clean answer goes the ordinary way") {
  PipeliningUpstream up;
  publish_list_only_caps(up);
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
  auto r = baseline_of(env, up);
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

TEST_CASE("Pipelining: what a fast server answers with redirects is fetched again by every worker of the window, not "
          "only the two that pipeline") {
  PipeliningUpstream up;
  publish_list_only_caps(up);
  rs::Document rl = make_doc("resourcelist");
  rl.header.md->at = ts("2026-01-01T00:00:00Z");
  std::map<std::string, std::string> expected;
  for (int i = 0; i < 160; ++i) {
    // Pipelined, each answer is a quick 302: not a clean answer, so each
    // goes the ordinary way, which follows it to a target that answers in
    // 20 ms.
    const std::string path = "/res/" + std::to_string(i) + ".txt";
    const std::string body = "resource " + std::to_string(i) + "\n";
    up.set(path, {302, "", "Location: /target/" + std::to_string(i) + ".txt\r\n"});
    up.set("/target/" + std::to_string(i) + ".txt", {200, body, "Content-Type: text/plain\r\n"});
    rl.entries.push_back(resource_entry(up.url(path), body));
    expected[up.url(path)] = body;
  }
  up.set_document("/rl.xml", rl);
  up.slow_down("/target/", std::chrono::milliseconds(20));
  SyncEnv env;
  auto r = baseline_of(env, up);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(env.live() == expected);
  const auto concurrency = SyncEnv::source(up.url("/")).concurrency;
  MESSAGE("most redirect targets answered at once: " << up.most_slow_at_once() << " (concurrency " << concurrency
                                                     << ")");
  // The workers beyond the two that pipeline start once fallbacks come.
  CHECK(up.most_slow_at_once() > 2);
  CHECK(up.most_slow_at_once() <= static_cast<int>(concurrency));
}

TEST_CASE("Pipelining: a fast Source 50 ms away is asked in bursts on every connection of the window, never more than "
          "the window answered at once") {
  PipeliningUpstream up;
  FarUpstream far(up);
  REQUIRE(far.connectable());
  publish_list_only_caps(far);
  rs::Document rl = make_doc("resourcelist");
  rl.header.md->at = ts("2026-01-01T00:00:00Z");
  std::map<std::string, std::string> expected;
  for (int i = 0; i < 600; ++i) {
    const std::string path = "/res/" + std::to_string(i) + ".txt";
    const std::string body = "resource " + std::to_string(i) + "\n";
    up.set(path, {200, body, "Content-Type: text/plain\r\n"});
    rl.entries.push_back(resource_entry(far.url(path), body));
    expected[far.url(path)] = body;
  }
  far.set_document("/rl.xml", rl);
  // Each read's answers take 1 ms: counts what the server answers at once.
  up.slow_down("/res/", std::chrono::milliseconds(1));
  SyncEnv env;
  env.batch_size = 1000; // the product's: a batch of 50 is two chunks, for two connections
  auto src = SyncEnv::source(far.url("/"));
  src.allow_hosts = {"127.0.0.1"};
  auto r = env.run(src, RunMode::baseline);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(env.live() == expected);
  for (int i = 0; i < 600; i += 37) {
    CHECK(up.gets("/res/" + std::to_string(i) + ".txt") == 1);
  }
  MESSAGE("most requests in one read " << up.most_in_one_read() << ", connections pipelined "
                                       << up.connections_pipelined() << ", most answered at once "
                                       << up.most_slow_at_once() << ", most connections open "
                                       << up.most_open_at_once());
  // Bursts, not one request at a time: the round trip is the path's, not
  // the server's time an answer.
  CHECK(up.most_in_one_read() >= 8);
  // On more connections than the two a near origin gets.
  CHECK(up.connections_pipelined() > 2);
  // The window caps what the server works on at once, pipelined or not.
  CHECK(up.most_slow_at_once() <= static_cast<int>(src.concurrency));
  CHECK(up.most_open_at_once() <= src.concurrency + 1); // the window's, and the documents' own
}

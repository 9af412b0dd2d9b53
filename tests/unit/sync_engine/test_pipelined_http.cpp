// PipelinedOrigin against a raw server on 127.0.0.1 that reads requests as
// they come and answers them the way the test says: in order, closing
// after some, chunked, refusing, or (a broken server) answering only the
// first request of each read and dropping the rest.
#include "sync_engine/pipelined_http.h"
#include "sync_engine/pipelining_verdicts.h"

#include "../../common/pipelining_server.h"

#include <doctest/doctest.h>


#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace tributary;
using namespace tributary::sync;
using namespace std::chrono_literals;

namespace {

struct Mode {
  size_t close_after = 0;        // answers per connection, then close (0: never)
  bool announce_close = true;    // "Connection: close" on the last one
  bool drop_pipelined = false;   // answer the first request of each read only
  bool chunked = false;
  int status = 200;
  std::string extra;             // more header lines
  std::string status_line;       // instead of "HTTP/1.1 <status> X"
  int delay_ms = 0;              // before answering a read
};

class PipeServer {
public:
  explicit PipeServer(Mode m)
      : m_mode(std::move(m)), m_server([this](const std::vector<test::PipelinedRequest>& rs, std::string& out) {
          return answer_read(rs, out);
        }) {}
  int port() const { return m_server.port(); }
  size_t connections() const { return m_server.connections(); }
  size_t requests() const { return m_requests.load(); } // GETs
  size_t heads() const { return m_heads.load(); }
  size_t most_in_one_read() const { return m_server.most_in_one_read(); }

private:
  static std::string body_of(const std::string& target) { return "content of " + target + "\n"; }
  std::string answer(const std::string& target, bool last) const {
    const std::string body = body_of(target);
    std::string head = m_mode.status_line.empty() ? "HTTP/1.1 " + std::to_string(m_mode.status) + " X\r\n"
                                                  : m_mode.status_line + "\r\n";
    head += "Content-Type: text/plain\r\n" + m_mode.extra;
    if (last && m_mode.announce_close) {
      head += "Connection: close\r\n";
    }
    if (m_mode.chunked) {
      const std::string a = body.substr(0, 5), b = body.substr(5);
      char sa[16], sb[16];
      std::snprintf(sa, sizeof sa, "%zx", a.size());
      std::snprintf(sb, sizeof sb, "%zx", b.size());
      return head + "Transfer-Encoding: chunked\r\n\r\n" + sa + ";ext=1\r\n" + a + "\r\n" + sb + "\r\n" + b +
             "\r\n0\r\nX-Trailer: y\r\n\r\n";
    }
    return head + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  }
  // One read's requests; false closes the connection. The count of answers
  // is per connection, kept by thread (each connection has its own).
  bool answer_read(const std::vector<test::PipelinedRequest>& requests, std::string& out) {
    thread_local size_t answered = 0;
    thread_local const void* owner = nullptr;
    if (owner != this) {
      owner = this;
      answered = 0;
    }
    if (m_mode.delay_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(m_mode.delay_ms));
    }
    const size_t take = m_mode.drop_pipelined ? 1 : requests.size();
    for (size_t i = 0; i < take; ++i) {
      const auto& r = requests[i];
      m_requests += r.head ? 0 : 1;
      m_heads += r.head ? 1 : 0;
      ++answered;
      const bool close = m_mode.close_after && answered == m_mode.close_after;
      std::string a = answer(r.target, close);
      if (r.head) {
        a.resize(a.find("\r\n\r\n") + 4); // the head alone (chunked or not)
      }
      out += a;
      if (close) {
        answered = 0;
        return false;
      }
    }
    return true;
  }

  Mode m_mode;
  std::atomic<size_t> m_requests{0};
  std::atomic<size_t> m_heads{0};
  test::PipeliningServer m_server; // last: stopped first
};

std::vector<PipelinedGet> gets(size_t n) {
  std::vector<PipelinedGet> v;
  for (size_t i = 0; i < n; ++i) {
    v.push_back(PipelinedGet{"/r/" + std::to_string(i)});
  }
  return v;
}

// Runs `n` GETs on `origin` and checks that none came back answered: all
// are handed back to the ordinary way.
void run_handed_back(PipelinedOrigin& origin, size_t n) {
  auto batch = gets(n);
  origin.run(batch);
  for (const auto& g : batch) {
    CHECK_FALSE(g.answered);
  }
}

PipelinedOrigin origin_for(const PipeServer& s, const std::shared_ptr<HostThrottle>& throttle,
                           std::chrono::milliseconds stall = 5000ms) {
  auto u = parse_url("http://127.0.0.1:" + std::to_string(s.port()) + "/");
  REQUIRE(u);
  PipelineSettings settings;
  settings.read_timeout = 5000ms;
  settings.pipelined_stall = stall;
  return PipelinedOrigin(*u, settings, throttle);
}

size_t answered_ok(const std::vector<PipelinedGet>& v) {
  size_t n = 0;
  for (const auto& g : v) {
    if (g.answered && g.status == 200 && g.body == "content of " + g.target + "\n") {
      ++n;
    }
  }
  return n;
}

} // namespace

TEST_CASE("pipelined GETs: several requests in flight on one connection, every answer in order") {
  PipeServer server(Mode{});
  auto throttle = std::make_shared<HostThrottle>();
  auto origin = origin_for(server, throttle);
  auto batch = gets(200);
  origin.run(batch);
  CHECK(answered_ok(batch) == 200);
  CHECK(server.connections() == 1);
  CHECK(server.requests() == 200);
  CHECK(server.most_in_one_read() > 1); // pipelined, not one by one
  CHECK(server.heads() == 1);           // one probe (GET then HEAD) before the first burst
  CHECK(pipeline_stats().answered >= 200); // for /metrics
  CHECK(pipeline_stats().hosts_on >= 1);
  CHECK(origin.usable());
  // The throttle saw every request come and go, never more than its window at once.
  auto v = throttle->snapshot();
  REQUIRE(v.size() == 1);
  CHECK(v[0].requests == 200);
  CHECK(v[0].in_flight == 0);
}

TEST_CASE("pipelined GETs: a server that closes after some answers costs none of the rest") {
  SUBCASE("announced with Connection: close") {
    PipeServer server(Mode{.close_after = 7});
    auto throttle = std::make_shared<HostThrottle>();
    auto origin = origin_for(server, throttle);
    auto batch = gets(50);
    origin.run(batch);
    CHECK(answered_ok(batch) == 50);
    CHECK(server.connections() >= 8);
    CHECK(origin.usable());
  }
  SUBCASE("closed without a word") {
    PipeServer server(Mode{.close_after = 7, .announce_close = false});
    auto throttle = std::make_shared<HostThrottle>();
    auto origin = origin_for(server, throttle);
    auto batch = gets(50);
    origin.run(batch);
    CHECK(answered_ok(batch) == 50);
    CHECK(origin.usable());
    INFO(origin.broken_reason());
  }
}

TEST_CASE("pipelined GETs: chunked answers are decoded, trailers skipped") {
  PipeServer server(Mode{.chunked = true});
  auto throttle = std::make_shared<HostThrottle>();
  auto origin = origin_for(server, throttle);
  auto batch = gets(40);
  origin.run(batch);
  CHECK(answered_ok(batch) == 40);
  CHECK(server.connections() == 1);
}

TEST_CASE("pipelined GETs: a server that drops pipelined requests turns pipelining off, and nothing is lost") {
  PipeServer server(Mode{.drop_pipelined = true});
  auto throttle = std::make_shared<HostThrottle>();
  auto origin = origin_for(server, throttle, 300ms);
  auto batch = gets(20);
  const auto t0 = std::chrono::steady_clock::now();
  origin.run(batch);
  CHECK(std::chrono::steady_clock::now() - t0 < 3s);
  CHECK_FALSE(origin.usable());
  CHECK(origin.broken_reason().find("no answer to a pipelined request") != std::string::npos);
  // No answer is kept for the wrong request: the burst the server cut short
  // is dropped whole and handed back, to be asked the ordinary way.
  size_t answered = 0;
  for (const auto& g : batch) {
    if (g.answered) {
      ++answered;
      CHECK(g.body == "content of " + g.target + "\n");
    }
  }
  CHECK(answered < 20);
  CHECK(throttle->snapshot()[0].in_flight == 0);
}

TEST_CASE("pipelined GETs: statuses other than 2xx come back for the caller, and 503 with Retry-After pauses the host") {
  PipeServer server(Mode{.status = 503, .extra = "Retry-After: 2\r\n"});
  auto throttle = std::make_shared<HostThrottle>();
  auto origin = origin_for(server, throttle);
  auto batch = gets(1);
  origin.run(batch);
  REQUIRE(batch[0].answered);
  CHECK(batch[0].status == 503);
  CHECK(batch[0].body.empty());
  auto v = throttle->snapshot();
  REQUIRE(v.size() == 1);
  CHECK(v[0].throttled == 1);
  CHECK(v[0].paused_until.has_value());
}

TEST_CASE("pipelined GETs: an answer not understood hands the batch back and turns pipelining off") {
  PipeServer server(Mode{.status_line = "HTTP/1.1 2000 Odd"});
  auto throttle = std::make_shared<HostThrottle>();
  auto origin = origin_for(server, throttle);
  run_handed_back(origin, 10);
  CHECK_FALSE(origin.usable());
  CHECK(origin.broken_reason().find("not understood") != std::string::npos);
  CHECK(throttle->snapshot()[0].in_flight == 0);
}

TEST_CASE("pipelined GETs: a content coding is reported, not decoded") {
  PipeServer server(Mode{.extra = "Content-Encoding: gzip\r\n"});
  auto throttle = std::make_shared<HostThrottle>();
  auto origin = origin_for(server, throttle);
  auto batch = gets(3);
  origin.run(batch);
  for (const auto& g : batch) {
    REQUIRE(g.answered);
    CHECK(g.content_encoding == "gzip"); // fetch_all asks again the ordinary way
  }
}

TEST_CASE("pipelined GETs: a connection refused leaves every request to the caller") {
  int port = 0;
  {
    PipeServer gone(Mode{});
    port = gone.port();
  }
  auto u = parse_url("http://127.0.0.1:" + std::to_string(port) + "/");
  REQUIRE(u);
  auto throttle = std::make_shared<HostThrottle>();
  PipelinedOrigin origin(*u, PipelineSettings{}, throttle);
  run_handed_back(origin, 5);
}

TEST_CASE("pipelined GETs: a server that closes after every answer is probed three times, then left to the ordinary way") {
  PipeServer server(Mode{.close_after = 1});
  auto throttle = std::make_shared<HostThrottle>();
  auto origin = origin_for(server, throttle);
  auto batch = gets(10);
  origin.run(batch);
  CHECK_FALSE(origin.usable());
  CHECK(origin.broken_reason().find("closed the connection after one answer 3 times") != std::string::npos);
  CHECK(answered_ok(batch) == 3); // each probe's GET, answered before the close
  CHECK(server.connections() == 3);
  CHECK(throttle->snapshot()[0].in_flight == 0);
  // The verdict holds for the process: a new PipelinedOrigin starts from it.
  auto again = origin_for(server, throttle);
  CHECK_FALSE(again.usable());
}

TEST_CASE("pipelined GETs: a server slower than the stall is left to the ordinary way for the run, not for the day") {
  PipeServer server(Mode{.delay_ms = 800});
  auto throttle = std::make_shared<HostThrottle>();
  auto origin = origin_for(server, throttle, 300ms);
  run_handed_back(origin, 5);
  CHECK_FALSE(origin.usable());
  CHECK(origin.broken_reason().find("for this run") != std::string::npos);
  CHECK(server.connections() == 1); // not one stall a request
  CHECK(origin_for(server, throttle, 300ms).usable()); // the next run tries again
  CHECK(throttle->snapshot()[0].in_flight == 0);
}

TEST_CASE("Pipelining verdicts: a broken origin is told once, however many runs meet it, and again after its day") {
  const std::string origin = "http://told-once.example:80";
  CHECK(!pipelining::first_telling(origin)); // nothing known: nothing to tell
  pipelining::record(origin, pipelining::Verdict::broken, "answered one request of each burst");
  CHECK(pipelining::first_telling(origin));
  CHECK(!pipelining::first_telling(origin)); // the next run, the next source
  CHECK(!pipelining::first_telling(origin));
  pipelining::record("http://works.example:80", pipelining::Verdict::works);
  CHECK(!pipelining::first_telling("http://works.example:80"));
}

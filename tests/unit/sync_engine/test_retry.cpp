#include "sync_engine/retry.h"

#include <doctest/doctest.h>

#include <deque>
#include <thread>

using namespace tributary;
using namespace tributary::sync;
using namespace std::chrono_literals;

namespace {

// Answers from a script: a status (with optional Retry-After and body) or a
// transport error.
struct Step {
  int status = 200;
  std::string body;
  std::string retry_after;
  std::optional<ErrorKind> error;
  bool error_after_body = false;
};

class ScriptedFetcher : public Fetcher {
public:
  explicit ScriptedFetcher(std::deque<Step> steps) : m_steps(std::move(steps)) {}
  Result<FetchResponse> fetch(const std::string& url, const FetchOptions&, const BodySink& sink) override {
    ++calls;
    REQUIRE_FALSE(m_steps.empty());
    Step s = m_steps.front();
    m_steps.pop_front();
    if (s.error && !s.error_after_body) {
      return make_error(*s.error, "connection refused: h.example.org:80");
    }
    FetchResponse r;
    r.status = s.status;
    if (!s.retry_after.empty()) {
      r.headers["retry-after"] = s.retry_after;
    }
    if (s.status >= 200 && s.status < 300) {
      sink(s.body.data(), s.body.size());
    }
    if (s.error) {
      return make_error(*s.error, "read failed (connection closed or no data in time) for " + url);
    }
    return r;
  }
  int calls = 0;

private:
  std::deque<Step> m_steps;
};

struct Harness {
  std::vector<std::chrono::milliseconds> sleeps;
  std::shared_ptr<ScriptedFetcher> inner;
  std::unique_ptr<RetryingFetcher> fetcher;
  explicit Harness(std::deque<Step> steps, RetryPolicy policy = {}) {
    inner = std::make_shared<ScriptedFetcher>(std::move(steps));
    fetcher = std::make_unique<RetryingFetcher>(inner, policy, nullptr,
                                                [this](std::chrono::milliseconds d) { sleeps.push_back(d); });
  }
  Result<FetchResponse> get(std::string& body, FetchOptions o = {}) {
    return fetcher->fetch("http://h.example.org/x", o, [&](const char* d, size_t n) {
      body.append(d, n);
      return true;
    });
  }
};

} // namespace

TEST_CASE("RetryingFetcher: retries 503 and network errors with growing, jittered backoff") {
  Harness h({{503}, {.error = ErrorKind::transient}, {502}, {200, "ok"}});
  std::string body;
  auto r = h.get(body);
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(body == "ok");
  CHECK(h.inner->calls == 4);
  REQUIRE(h.sleeps.size() == 3);
  CHECK(h.sleeps[0] >= 125ms);
  CHECK(h.sleeps[0] <= 250ms);
  CHECK(h.sleeps[1] >= 500ms);
  CHECK(h.sleeps[1] <= 1000ms);
  CHECK(h.sleeps[2] >= 2000ms);
  CHECK(h.sleeps[2] <= 4000ms);
}

TEST_CASE("RetryingFetcher: honours Retry-After, and gives up when it is too long") {
  Harness h({{429, "", "7"}, {200, "ok"}});
  std::string body;
  REQUIRE(h.get(body));
  REQUIRE(h.sleeps.size() == 1);
  CHECK(h.sleeps[0] == 7000ms);

  Harness longer({{503, "", "86400"}});
  auto r = longer.get(body);
  REQUIRE_FALSE(r);
  CHECK(r.error().kind == ErrorKind::transient);
  CHECK(r.error().message == "HTTP 503 for http://h.example.org/x with Retry-After 86400 s");
}

TEST_CASE("RetryingFetcher: 404 and permanent errors are not retried, and attempts are bounded") {
  Harness h(std::deque<Step>{Step{404}});
  std::string body;
  auto r = h.get(body);
  REQUIRE(r);
  CHECK(r->status == 404);
  CHECK(h.inner->calls == 1);

  Harness tls({{.error = ErrorKind::permanent}});
  CHECK_FALSE(tls.get(body));
  CHECK(tls.inner->calls == 1);

  Harness down({{503}, {503}, {503}}, RetryPolicy{.max_attempts = 3});
  auto d = down.get(body);
  REQUIRE_FALSE(d);
  CHECK(d.error().message == "HTTP 503 for http://h.example.org/x (3 attempts over 0 s)");
  CHECK(down.sleeps.size() == 2);
}

TEST_CASE("RetryingFetcher: a body cut off midway is retried only if the caller can restart") {
  Harness h({{200, "par", "", ErrorKind::transient, true}, {200, "full"}});
  std::string body;
  auto r = h.get(body);
  CHECK_FALSE(r);
  CHECK(h.inner->calls == 1);

  Harness again({{200, "par", "", ErrorKind::transient, true}, {200, "full"}});
  std::string b2;
  FetchOptions o;
  o.restart = [&] {
    b2.clear();
    return true;
  };
  auto r2 = again.get(b2, o);
  REQUIRE(r2);
  CHECK(b2 == "full");
}

TEST_CASE("parse_retry_after: seconds and HTTP dates") {
  auto now = std::chrono::system_clock::from_time_t(784111777); // Sun, 06 Nov 1994 08:49:37 GMT
  CHECK(parse_retry_after("120", now) == std::chrono::milliseconds(120000));
  CHECK(parse_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", now) == std::chrono::milliseconds(10000));
  CHECK(parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now) == std::chrono::milliseconds(0));
  CHECK_FALSE(parse_retry_after("soon", now));
}

TEST_CASE("RetryingFetcher: a Source that never answers is given up on by the deadline, whatever the attempts left") {
  // Each attempt waits out its read timeout (here, a second at most).
  struct Silent : Fetcher {
    std::vector<std::chrono::milliseconds> timeouts;
    Result<FetchResponse> fetch(const std::string& url, const FetchOptions& o, const BodySink&) override {
      timeouts.push_back(o.read_timeout);
      std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(o.read_timeout, 1000ms));
      return make_error(ErrorKind::transient, "read failed (connection closed or no data in time) for " + url);
    }
  };
  auto silent = std::make_shared<Silent>();
  RetryPolicy p;
  p.max_attempts = 5;
  p.initial_backoff = 1ms;
  p.deadline = 2500ms;
  RetryingFetcher f(silent, p, nullptr, [](std::chrono::milliseconds) {});
  FetchOptions o;
  o.read_timeout = 60000ms;
  const auto started = std::chrono::steady_clock::now();
  auto r = f.fetch("http://stalled.example/rl.xml", o, [](const char*, size_t) { return true; });
  const auto took = std::chrono::steady_clock::now() - started;
  REQUIRE_FALSE(r);
  CHECK(r.error().message.rfind("read failed (connection closed or no data in time) for http://stalled.example/rl.xml "
                                "(2 attempts over ", 0) == 0);
  CHECK(r.error().message.find(" s, the deadline of 2 s)") != std::string::npos);
  REQUIRE(silent->timeouts.size() == 2);
  CHECK(silent->timeouts[0] <= 2500ms); // never longer than the deadline
  CHECK(silent->timeouts[0] >= 2400ms);
  CHECK(silent->timeouts[1] <= 1500ms); // what was left of it
  CHECK(took < 3s);
}

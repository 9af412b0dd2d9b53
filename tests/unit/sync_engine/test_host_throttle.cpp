#include "sync_engine/host_throttle.h"
#include "sync_engine/retry.h"

#include <doctest/doctest.h>

#include <cmath>
#include <deque>

using namespace tributary;
using namespace tributary::sync;
using namespace std::chrono_literals;

namespace {

// A clock that moves only when told to, and a sleeper that moves it.
struct FakeTime {
  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::time_point{} + 1000h;
  std::vector<std::chrono::milliseconds> sleeps;
  HostThrottle::Clock clock() {
    return [this] { return now; };
  }
  Sleeper sleeper() {
    return [this](std::chrono::milliseconds d) {
      sleeps.push_back(d);
      now += d;
    };
  }
  HostThrottle make() { return HostThrottle(clock(), sleeper()); }
};

const HostThrottle::HostView& view_of(const std::vector<HostThrottle::HostView>& v, const std::string& host) {
  for (const auto& h : v) {
    if (h.host == host) {
      return h;
    }
  }
  FAIL("no host " << host);
  throw 0;
}

// `n` requests to `host` answered with `status` after `latency`, each
// finished before the next starts.
void run(FakeTime& t, HostThrottle& th, const std::string& host, int n, int status = 200,
         std::chrono::milliseconds latency = 1ms, double configured = 0) {
  for (int i = 0; i < n; ++i) {
    auto ticket = th.start(host, 8, configured);
    t.now += latency;
    HostThrottle::Outcome o;
    o.status = status;
    o.first_byte = latency;
    th.finish(ticket, o);
  }
}

} // namespace

TEST_CASE("HostThrottle: a healthy host has no rate limit, only the window") {
  FakeTime t;
  auto th = t.make();
  run(t, th, "http://a", 3000); // 3 s at 1,000/s
  CHECK(t.sleeps.empty());
  const auto& a = view_of(th.snapshot(), "http://a");
  CHECK_FALSE(a.rate_limit);
  CHECK(a.window == 8);
  CHECK(a.measured_rate == doctest::Approx(1000).epsilon(0.01));
  CHECK(a.throttled == 0);
}

TEST_CASE("HostThrottle: 503 with Retry-After pauses the host and halves the rate, once per burst") {
  FakeTime t;
  auto th = t.make();
  run(t, th, "http://a", 1500, 200, 1ms); // measured: 1,000/s
  // A burst of rejections of concurrent requests: one back-off, not four.
  std::vector<HostThrottle::Ticket> burst;
  for (int i = 0; i < 4; ++i) {
    burst.push_back(th.start("http://a", 8, 0));
  }
  for (const auto& ticket : burst) {
    HostThrottle::Outcome o;
    o.status = 503;
    o.retry_after = 2000ms;
    th.finish(ticket, o);
  }
  auto a = view_of(th.snapshot(), "http://a");
  REQUIRE(a.rate_limit);
  CHECK(*a.rate_limit == doctest::Approx(500).epsilon(0.05));
  CHECK(a.window == 4);
  CHECK(a.throttled == 4);
  CHECK(a.paused_until);
  CHECK(a.reason.find("HTTP 503 with Retry-After 2 s") != std::string::npos);
  // Another host is not affected.
  run(t, th, "http://b", 1);
  CHECK(t.sleeps.empty());
  // The next request to the host waits out the pause, then the limit spaces
  // requests 2 ms apart.
  const auto before = t.now;
  run(t, th, "http://a", 1, 200, 0ms);
  CHECK(t.now - before >= 1990ms);
  t.sleeps.clear();
  run(t, th, "http://a", 10, 200, 0ms);
  REQUIRE_FALSE(t.sleeps.empty());
  CHECK(t.sleeps.back() == std::chrono::milliseconds(static_cast<int>(std::ceil(1000 / *a.rate_limit))));
}

TEST_CASE("HostThrottle: a limit in use grows while the host is healthy, and an explicit rate stays a ceiling") {
  FakeTime t;
  auto th = t.make();
  run(t, th, "http://a", 200, 200, 5ms); // 200/s
  {
    auto ticket = th.start("http://a", 8, 0);
    HostThrottle::Outcome o;
    o.status = 429;
    th.finish(ticket, o);
  }
  const double first = *view_of(th.snapshot(), "http://a").rate_limit;
  CHECK(first == doctest::Approx(100).epsilon(0.1));
  run(t, th, "http://a", 300, 200, 0ms); // paced by the limit: healthy seconds
  const auto a = view_of(th.snapshot(), "http://a");
  REQUIRE(a.rate_limit);
  // Straight back to just under where the host refused (a first estimate,
  // so not held there).
  CHECK(*a.rate_limit > first * 1.8);
  CHECK(a.reason.find("(the host refused at ") != std::string::npos);
  run(t, th, "http://a", 1000, 200, 0ms); // then past it, probing
  CHECK(view_of(th.snapshot(), "http://a").reason.find("probing") == 0);
  CHECK(*view_of(th.snapshot(), "http://a").rate_limit > *a.rate_limit * 1.1);
  // The window did not grow: one request at a time never waited for it.
  CHECK(a.window == 4);

  // A configured ceiling holds whatever the adaptation says.
  FakeTime t2;
  auto th2 = t2.make();
  run(t2, th2, "http://c", 50, 200, 0ms, 10);
  CHECK(t2.now - (std::chrono::steady_clock::time_point{} + 1000h) >= 4900ms);
  CHECK(view_of(th2.snapshot(), "http://c").configured_rate == 10);
}

TEST_CASE("HostThrottle: against a host refusing past 150 requests/s (503, Retry-After 1 s), at least 80% of that "
          "from the tenth second, with fewer than 1% refused") {
  // The host: a token bucket of 150/s holding 10, answering in 5 ms; one
  // request after another, each paced by the throttle.
  FakeTime t;
  auto th = t.make();
  const auto t0 = t.now;
  double tokens = 10;
  auto last = t.now;
  std::vector<int> accepted(60), refused(60);
  while (t.now - t0 < 60s) {
    auto ticket = th.start("http://a", 8, 0);
    tokens = std::min(10.0, tokens + std::chrono::duration<double>(t.now - last).count() * 150);
    last = t.now;
    const auto second = static_cast<size_t>(std::chrono::duration_cast<std::chrono::seconds>(t.now - t0).count());
    HostThrottle::Outcome o;
    o.first_byte = 5ms;
    if (tokens >= 1) {
      tokens -= 1;
      o.status = 200;
      accepted[std::min<size_t>(second, 59)]++;
    } else {
      o.status = 503;
      o.retry_after = 1000ms;
      refused[std::min<size_t>(second, 59)]++;
    }
    t.now += 5ms;
    th.finish(ticket, o);
  }
  int ok = 0, no = 0;
  for (size_t s = 10; s < 60; ++s) {
    ok += accepted[s];
    no += refused[s];
  }
  const double rate = ok / 50.0;
  MESSAGE("from the tenth second: " << rate << " accepted/s, " << no << " refused; reason now: "
                                    << view_of(th.snapshot(), "http://a").reason);
  CHECK(rate >= 120);
  CHECK(no * 100 <= ok + no);
  CHECK(accepted[5] + accepted[6] + accepted[7] + accepted[8] + accepted[9] > 0);
}

TEST_CASE("HostThrottle: response times far above the usual one and timeouts back off") {
  FakeTime t;
  auto th = t.make();
  run(t, th, "http://a", 100, 200, 10ms);
  CHECK_FALSE(view_of(th.snapshot(), "http://a").rate_limit);
  run(t, th, "http://a", 40, 200, 3000ms);
  auto a = view_of(th.snapshot(), "http://a");
  REQUIRE(a.rate_limit);
  CHECK(a.reason.find("response time") != std::string::npos);

  FakeTime t2;
  auto th2 = t2.make();
  run(t2, th2, "http://b", 100, 200, 10ms);
  auto ticket = th2.start("http://b", 8, 0);
  HostThrottle::Outcome o;
  o.timed_out = true;
  th2.finish(ticket, o);
  auto b = view_of(th2.snapshot(), "http://b");
  REQUIRE(b.rate_limit);
  CHECK(b.reason.find("timeout") == 0);
}

TEST_CASE("HostThrottle: the window caps concurrent requests to a host") {
  HostThrottle th;
  std::vector<HostThrottle::Ticket> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(th.start("http://a", 3, 0));
  }
  std::atomic<bool> started{false};
  std::thread fourth([&] {
    auto ticket = th.start("http://a", 3, 0);
    started = true;
    th.finish(ticket, HostThrottle::Outcome{200, false, 1ms, std::nullopt});
  });
  std::this_thread::sleep_for(300ms);
  CHECK_FALSE(started.load());
  CHECK(view_of(th.snapshot(), "http://a").in_flight == 3);
  th.finish(held[0], HostThrottle::Outcome{200, false, 1ms, std::nullopt});
  fourth.join();
  CHECK(started.load());
}

TEST_CASE("HostThrottle: robots.txt Crawl-delay spaces requests") {
  FakeTime t;
  auto th = t.make();
  REQUIRE(th.claim_robots("http://a"));
  CHECK_FALSE(th.claim_robots("http://a")); // being fetched
  th.set_crawl_delay("http://a", 0.5);
  CHECK_FALSE(th.claim_robots("http://a")); // known for a day
  run(t, th, "http://a", 5, 200, 0ms);
  REQUIRE(t.sleeps.size() == 4);
  CHECK(t.sleeps[0] == 500ms);
  CHECK(view_of(th.snapshot(), "http://a").crawl_delay == 0.5);
  t.now += 25h;
  CHECK(th.claim_robots("http://a"));
}

TEST_CASE("parse_crawl_delay: our group, else the '*' group, capped") {
  CHECK_FALSE(parse_crawl_delay("", "tributary"));
  CHECK_FALSE(parse_crawl_delay("User-agent: *\nDisallow: /private\n", "tributary"));
  CHECK(parse_crawl_delay("User-agent: *\nCrawl-delay: 2\n", "tributary") == 2.0);
  CHECK(parse_crawl_delay("User-agent: Googlebot\nCrawl-delay: 9\n\nUser-agent: *\nCrawl-delay: 1.5 # polite\n",
                          "tributary") == 1.5);
  CHECK(parse_crawl_delay("User-agent: *\nCrawl-delay: 5\n\nUser-Agent: Tributary\r\nCrawl-Delay: 0.25\r\n",
                          "tributary") == 0.25);
  CHECK(parse_crawl_delay("User-agent: bingbot\nUser-agent: tributary\nCrawl-delay: 3\n", "tributary") == 3.0);
  CHECK(parse_crawl_delay("User-agent: *\nCrawl-delay: 86400\n", "tributary") == 60.0);
  CHECK_FALSE(parse_crawl_delay("User-agent: *\nCrawl-delay: soon\n", "tributary"));
  CHECK_FALSE(parse_crawl_delay("User-agent: *\nCrawl-delay: -1\n", "tributary"));
}

namespace {

// Answers robots.txt with a body, everything else 200.
class RobotsFetcher : public Fetcher {
public:
  std::string robots;
  int robots_status = 200;
  std::vector<std::string> urls;
  Result<FetchResponse> fetch(const std::string& url, const FetchOptions&, const BodySink& sink) override {
    urls.push_back(url);
    FetchResponse r;
    r.status = url.find("/robots.txt") != std::string::npos ? robots_status : 200;
    if (r.status == 200 && url.find("/robots.txt") != std::string::npos) {
      sink(robots.data(), robots.size());
    }
    return r;
  }
};

} // namespace

TEST_CASE("RetryingFetcher: reads robots.txt once per http host and feeds 503s to the throttle") {
  FakeTime t;
  auto th = std::make_shared<HostThrottle>(t.clock(), t.sleeper());
  auto inner = std::make_shared<RobotsFetcher>();
  inner->robots = "User-agent: *\nCrawl-delay: 0.1\n";
  RetryingFetcher f(inner, RetryPolicy{}, th, [](std::chrono::milliseconds) {});
  for (int i = 0; i < 3; ++i) {
    REQUIRE(f.fetch("http://h.example.org/r" + std::to_string(i), {}, [](const char*, size_t) { return true; }));
  }
  REQUIRE(inner->urls.size() == 4);
  CHECK(inner->urls[0] == "http://h.example.org/robots.txt");
  CHECK(view_of(th->snapshot(), "http://h.example.org").crawl_delay == 0.1);
  REQUIRE(f.fetch("file:///tmp/x", {}, [](const char*, size_t) { return true; }));
  CHECK(inner->urls.size() == 5); // no robots.txt for file:
}

TEST_CASE("HostThrottle: the rate a person reads is over the last minute, not 0 between a source's runs") {
  FakeTime t;
  auto th = t.make();
  // A run of 120 requests every 10 s, for a minute: 12 requests/s on
  // average, none in the last few seconds.
  for (int run_no = 0; run_no < 6; ++run_no) {
    run(t, th, "http://quiet", 120, 200, 1ms);
    t.now += std::chrono::milliseconds(10000 - 120);
  }
  t.now += 5s;
  const auto& v = view_of(th.snapshot(), "http://quiet");
  CHECK(v.measured_rate == 0); // the last second: nothing
  CHECK(v.minute_rate == doctest::Approx(12).epsilon(0.2));
  t.now += 120s; // two quiet minutes: 0 again
  CHECK(view_of(th.snapshot(), "http://quiet").minute_rate == 0);
}

TEST_CASE("HostThrottle: a request pipelined behind another holds no place in the window, but keeps the pauses and "
          "the rate") {
  FakeTime t;
  auto th = t.make();
  const std::string h = "http://far";
  th.set_crawl_delay(h, std::nullopt);
  // Two connections' heads fill a window of two.
  auto a = th.start(h, 2, 0);
  auto b = th.start(h, 2, 0);
  CHECK_FALSE(th.try_start(h, 2, 0)); // no room for a third head
  // Behind them on their connections: as many as the bursts need.
  std::vector<HostThrottle::Ticket> behind;
  for (int i = 0; i < 30; ++i) {
    auto x = th.try_start(h, 2, 0, /*behind=*/true);
    REQUIRE(x);
    CHECK(x->behind);
    behind.push_back(*x);
  }
  CHECK(view_of(th.snapshot(), h).in_flight == 2); // what the host works on at once
  for (const auto& x : behind) {
    th.finish(x, HostThrottle::Outcome{200, false, 1ms, std::nullopt});
  }
  CHECK(view_of(th.snapshot(), h).in_flight == 2); // the heads' places were not given back by them
  th.finish(a, HostThrottle::Outcome{200, false, 1ms, std::nullopt});
  CHECK(th.try_start(h, 2, 0)); // a head's place is free again
  // A 503 with Retry-After pauses the behind ones too.
  th.finish(b, HostThrottle::Outcome{503, false, 1ms, 2000ms});
  CHECK_FALSE(th.try_start(h, 2, 0, /*behind=*/true));
  t.now += 2100ms;
  // And the rate limit the 503 set spaces them.
  auto first = th.try_start(h, 2, 0, /*behind=*/true);
  REQUIRE(first);
  CHECK_FALSE(th.try_start(h, 2, 0, /*behind=*/true));
}

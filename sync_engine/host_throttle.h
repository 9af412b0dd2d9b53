#pragma once

#include <atomic>
#include <array>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tributary::sync {

// Sleeps for a duration; injected so tests run without waiting.
using Sleeper = std::function<void(std::chrono::milliseconds)>;
Sleeper real_sleeper();
// Sleeps `d` in slices of at most 100 ms and ends early once `*cancel` is
// set (null: never); false when cancelled. Every wait of a run goes through
// it, so that a daemon told to stop is not held by a back-off.
bool sleep_unless_cancelled(const std::atomic<bool>* cancel, std::chrono::milliseconds d,
                            const Sleeper& sleeper = real_sleeper());

// How fast we fetch from one host (scheme://host:port), shared by every
// source that fetches from it. What good crawlers do, not a fixed rate:
//
// - a cap on concurrent requests (the window), which alone limits a healthy
//   host to what its response time allows;
// - no rate limit at all until the host signals trouble: 429, 503 (also
//   502, 504), Retry-After, a timeout, or a response time grown well past
//   the host's usual one. A signal halves the window and cuts the rate: the
//   first to half the rate just measured, later ones to 70% of the limit in
//   force. Signals from requests sent before the last cut (or within 100 ms
//   after it) are the same burst and cut nothing more. Retry-After also
//   pauses the host;
// - recovery while the host is healthy, for what holds us back: every second
//   without a signal the window grows by one if requests waited for it, and
//   a limit that is being used climbs back to 95% of the rate at which the
//   host refused (straight there after a first refusal, three quarters of
//   the way a second after later ones), holds there four seconds (twice as
//   long each time the host refuses at about that rate again, up to 64 s),
//   then probes past it (+1.6%/s, doubling every second up to +12.5%/s;
//   +12.5% doubling to +25% while the rate is a single estimate). A limit
//   unused for ten minutes is dropped;
// - ceilings that adaptation never passes: the source's configured
//   max_requests_per_second and robots.txt Crawl-delay.
//
// Every change records why, for the status API.
class HostThrottle {
public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  // What a request came to, for adaptation.
  struct Outcome {
    int status = 0;       // 0: no response (a network error)
    bool timed_out = false;
    std::chrono::milliseconds first_byte{0}; // time to the response head
    std::optional<std::chrono::milliseconds> retry_after;
  };

  // One host's state as the status API shows it.
  struct HostView {
    std::string host;
    unsigned window = 0;          // concurrent requests allowed now
    unsigned max_window = 0;      // the configured cap (source concurrency)
    unsigned in_flight = 0;
    std::optional<double> rate_limit;      // adaptive limit, requests/s
    std::optional<double> configured_rate; // max_requests_per_second, when set
    std::optional<double> crawl_delay;     // seconds, from robots.txt
    double measured_rate = 0;     // requests/s completed over the last second
    double minute_rate = 0;       // requests/s completed over the last minute (what a person reads)
    double latency_ms = 0;        // moving average of the time to first byte
    double usual_latency_ms = 0;  // the host's usual (lowest recent) latency
    uint64_t requests = 0;
    uint64_t throttled = 0;       // 429/502/503/504 and timeouts
    std::optional<std::chrono::system_clock::time_point> paused_until;
    std::string reason;           // why the rate last changed
    std::optional<std::chrono::system_clock::time_point> changed_at;
  };

  // A started request; give it back with finish().
  struct Ticket {
    std::string host;
    std::chrono::steady_clock::time_point started;
    // Pipelined behind another request on its connection: the server
    // answers it after that one, never beside it, so it holds no place in
    // the window (which caps what the host works on at once).
    bool behind = false;
  };

  static constexpr unsigned k_default_connections = 8;

  explicit HostThrottle(Clock clock = std::chrono::steady_clock::now, Sleeper sleeper = real_sleeper());

  // Blocks until a request to `host` may start: a slot in its window, the
  // end of a pause, the next start the rate allows. `max_connections` caps
  // the window (0: 8); `configured_rate` (0: none) caps the rate. Once
  // `*cancel` is set it returns at once, and the caller should finish()
  // the ticket without making the request.
  Ticket start(const std::string& host, unsigned max_connections, double configured_rate,
               const std::atomic<bool>* cancel = nullptr);
  void finish(const Ticket& ticket, const Outcome& outcome);
  // start() without waiting: a ticket when a request may start now (no
  // robots.txt being read, no pause, room in the window, no wait for the
  // rate), else none. For requests pipelined behind one that waited:
  // `behind` ones need no room in the window (see Ticket::behind), only
  // the rest.
  std::optional<Ticket> try_start(const std::string& host, unsigned max_connections, double configured_rate,
                                  bool behind = false);
  // Whether robots.txt for `host` has been read (and is fresh): until it
  // is, requests should go through RetryingFetcher, which reads it.
  bool robots_known(const std::string& host) const;

  // robots.txt: true once for a host whose Crawl-delay is not known (or
  // is older than a day); the caller fetches it and calls
  // set_crawl_delay(). Others starting requests meanwhile wait for it.
  bool claim_robots(const std::string& host);
  void set_crawl_delay(const std::string& host, std::optional<double> seconds);

  std::vector<HostView> snapshot() const;

private:
  struct Host {
    double window = k_default_connections;
    unsigned max_window = k_default_connections;
    unsigned in_flight = 0;
    std::optional<double> rate;            // adaptive limit
    double configured_rate = 0;            // the last request's ceiling (0: none)
    std::optional<double> crawl_delay;
    enum class Robots { unknown, fetching, known } robots = Robots::unknown;
    std::chrono::steady_clock::time_point robots_at{};
    std::chrono::steady_clock::time_point paused_until{};
    std::chrono::steady_clock::time_point next_start{};
    // Measurement.
    std::chrono::steady_clock::time_point bucket_start{};
    unsigned bucket_count = 0;
    double measured_rate = 0;
    // Requests completed in each of the last 60 seconds (slot = second % 60),
    // and the second the newest slot counts.
    std::array<uint32_t, 60> per_second{};
    int64_t newest_second = 0;
    double latency_ms = -1; // moving average; < 0 until the first sample
    double floor_ms = -1;   // lowest recent latency, drifting up slowly
    bool signalled = false; // a signal in the current period
    bool window_waited = false; // a request waited for the window this period
    double ceiling = 0;     // the rate at which the host last refused (0: none)
    unsigned healthy_at_ceiling = 0; // healthy seconds since the limit got back to it
    unsigned confirmed = 0; // times in a row the host refused at about the same rate
    double healthy_rate = 0; // the last limit that held for a healthy second
    double window_ceiling = 0; // the window at which the host last refused
    std::chrono::steady_clock::time_point last_signal{}; // the last cut
    std::chrono::steady_clock::time_point limit_used{};
    uint64_t requests = 0;
    uint64_t throttled = 0;
    std::string reason = "no limit: the window of concurrent requests alone";
    std::optional<std::chrono::system_clock::time_point> changed_at;
  };

  Host& host_locked(const std::string& host);
  void tick_locked(Host& h, std::chrono::steady_clock::time_point now);
  // Moves `h`'s ring of per-second counts to `now`'s second.
  static void count_second_locked(Host& h, std::chrono::steady_clock::time_point now);
  void back_off_locked(Host& h, std::chrono::steady_clock::time_point now,
                       std::chrono::steady_clock::time_point started, const std::string& why,
                       std::optional<std::chrono::milliseconds> pause);
  void set_reason_locked(Host& h, std::string why);
  void raise_locked(Host& h);
  static bool probing_locked(const Host& h);
  static unsigned plateau_of(const Host& h);
  std::optional<double> effective_rate_locked(const Host& h) const;

  Clock m_clock;
  Sleeper m_sleeper;
  mutable std::mutex m_mutex;
  std::condition_variable m_cv;
  std::map<std::string, Host, std::less<>> m_hosts;
};

// The Crawl-delay (seconds) robots.txt sets for us: the group naming
// `agent` (case-insensitive, as a product token) if there is one, else the
// "*" group. Capped at 60 s; nullopt when unset or unreadable.
std::optional<double> parse_crawl_delay(std::string_view robots_txt, std::string_view agent);

} // namespace tributary::sync

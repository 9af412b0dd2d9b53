#include "sync_engine/host_throttle.h"

#include "common/text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <thread>

namespace tributary::sync {

namespace {

using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr auto k_bucket = std::chrono::seconds(1);        // measuring and recovery period
constexpr double k_first_cut = 0.5;                       // the first limit: half the rate measured
constexpr double k_cut = 0.7;                             // later: 70% of the limit in force
constexpr auto k_limit_idle = std::chrono::minutes(10);   // an unused limit is dropped after this
constexpr auto k_max_pause = std::chrono::minutes(2);     // Retry-After honoured up to this
constexpr auto k_robots_ttl = std::chrono::hours(24);     // RFC 9309 2.4
constexpr double k_min_rate = 0.5;                        // requests/s: never slower than this
constexpr double k_resume = 0.95;                         // recover to this share of where the host refused
constexpr double k_approach = 0.75;                       // of the way there each healthy second
constexpr unsigned k_plateau = 4;                         // healthy seconds held there before probing,
constexpr unsigned k_max_plateau = 64;                    // doubled each time the host refuses there again
constexpr double k_same_ceiling = 0.15;                   // "there": within 15%
constexpr double k_first_probe = 1.0 / 64;                // then +1.6%/s, doubling every second,
constexpr double k_max_probe = 0.25;                      // up to +25%/s
constexpr auto k_same_burst = std::chrono::milliseconds(100); // signals this soon after a cut: its burst
constexpr double k_latency_factor = 4;                    // "grown well past": ×4 and
constexpr double k_latency_margin_ms = 500;               // at least 500 ms more than usual
constexpr double k_max_crawl_delay = 60;

std::string format_rate(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, r < 10 ? "%.1f/s" : "%.0f/s", r);
  return buf;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::chrono::system_clock::time_point to_system(steady::time_point t, steady::time_point now) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(t - now);
}

} // namespace

Sleeper real_sleeper() {
  return [](milliseconds d) { std::this_thread::sleep_for(d); };
}

bool sleep_unless_cancelled(const std::atomic<bool>* cancel, milliseconds d, const Sleeper& sleeper) {
  if (!cancel) {
    if (d.count() > 0) {
      sleeper(d);
    }
    return true;
  }
  while (d.count() > 0) {
    if (cancel && cancel->load()) {
      return false;
    }
    const milliseconds slice = std::min(d, milliseconds(100));
    sleeper(slice);
    d -= slice;
  }
  return !(cancel && cancel->load());
}

HostThrottle::HostThrottle(Clock clock, Sleeper sleeper) : m_clock(std::move(clock)), m_sleeper(std::move(sleeper)) {}

HostThrottle::Host& HostThrottle::host_locked(const std::string& host) {
  auto it = m_hosts.find(host);
  if (it == m_hosts.end()) {
    it = m_hosts.emplace(host, Host{}).first;
    it->second.bucket_start = m_clock();
  }
  return it->second;
}

std::optional<double> HostThrottle::effective_rate_locked(const Host& h) const {
  std::optional<double> r = h.rate;
  auto cap = [&](double c) {
    if (c > 0) {
      r = r ? std::min(*r, c) : c;
    }
  };
  cap(h.configured_rate);
  if (h.crawl_delay && *h.crawl_delay > 0) {
    cap(1.0 / *h.crawl_delay);
  }
  return r;
}

void HostThrottle::set_reason_locked(Host& h, std::string why) {
  h.reason = std::move(why);
  h.changed_at = std::chrono::system_clock::now();
}

void HostThrottle::count_second_locked(Host& h, steady::time_point now) {
  // Moves the ring to `now`'s second, emptying the seconds passed since.
  const int64_t second = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  for (int64_t s = std::max(h.newest_second + 1, second - 59); s <= second; ++s) {
    h.per_second[static_cast<size_t>(s % 60)] = 0;
  }
  h.newest_second = std::max(h.newest_second, second);
}

void HostThrottle::tick_locked(Host& h, steady::time_point now) {
  const auto elapsed = now - h.bucket_start;
  if (elapsed < k_bucket) {
    return;
  }
  const double secs = std::chrono::duration<double>(elapsed).count();
  h.measured_rate = h.bucket_count / secs;
  const bool busy = h.bucket_count > 0;
  if (!h.signalled && busy) {
    // Growth only for what holds us back (else it would grow untested):
    // the window by one when requests waited for it (past the window at
    // which the host last refused only once the limit probes too), a
    // limit while it is nearly used.
    const double cap = h.window_ceiling > 0 && !probing_locked(h) ? h.window_ceiling - 1 : h.max_window;
    const double grown =
        h.window_waited && h.window < cap ? std::min<double>({double(h.max_window), cap, h.window + 1}) : h.window;
    const bool window_grew = grown > h.window;
    h.window = grown;
    if (h.rate && h.measured_rate >= 0.7 * *h.rate) {
      raise_locked(h);
      h.limit_used = now;
    } else if (window_grew && !h.rate) {
      set_reason_locked(h, "recovering: healthy for a second, window " + std::to_string(unsigned(h.window)));
    }
    if (h.floor_ms > 0) {
      h.floor_ms *= 1.02; // forget an old, unusually fast sample slowly
    }
  }
  if (h.rate && now - h.limit_used > k_limit_idle) {
    h.rate.reset();
    h.ceiling = 0;
    set_reason_locked(h, "limit dropped: unused for ten minutes");
  }
  h.signalled = false;
  h.window_waited = false;
  h.bucket_start = now;
  h.bucket_count = 0;
}

void HostThrottle::raise_locked(Host& h) {
  // Back quickly to just under the rate at which the host last refused,
  // hold there a while (longer each time the host refuses at the same
  // rate again), then probe past it slowly at first and faster the longer
  // it stays healthy (the shape of TCP CUBIC's window): a limit that found
  // the host's ceiling spends most of its time near it, and one the host
  // raised, or a first estimate too low, is found again in seconds.
  h.healthy_rate = *h.rate;
  const double target = h.ceiling * k_resume;
  if (*h.rate < target) {
    // Straight back while the ceiling is a single estimate.
    const double approach = h.confirmed > 0 ? k_approach : 1.0;
    h.rate = std::min(target, *h.rate + std::max(1.0, (target - *h.rate) * approach));
    set_reason_locked(h, "recovering: healthy for a second, limit raised to " + format_rate(*h.rate) +
                             " (the host refused at " + format_rate(h.ceiling) + ")");
    return;
  }
  ++h.healthy_at_ceiling;
  const unsigned plateau = plateau_of(h);
  if (h.healthy_at_ceiling <= plateau) {
    return;
  }
  const unsigned doublings = h.healthy_at_ceiling - plateau - 1;
  const double first = h.confirmed > 0 ? k_first_probe : k_first_probe * 8;
  const double most = h.confirmed > 0 ? k_max_probe / 2 : k_max_probe; // near a known ceiling, smaller leaps
  const double step = std::min(most, first * std::pow(2.0, std::min(doublings, 8u)));
  h.rate = *h.rate + std::max(1.0, *h.rate * step);
  set_reason_locked(h, "probing: healthy for a second, limit raised to " + format_rate(*h.rate));
}

bool HostThrottle::probing_locked(const Host& h) {
  return h.ceiling <= 0 || h.healthy_at_ceiling > plateau_of(h);
}

unsigned HostThrottle::plateau_of(const Host& h) {
  // A rate the host refused at only once may be a poor estimate (the
  // first is taken from a second's start): probed at once.
  return h.ceiling > 0 && h.confirmed > 0 ? std::min(k_max_plateau, k_plateau << std::min(h.confirmed - 1, 6u)) : 0;
}

void HostThrottle::back_off_locked(Host& h, steady::time_point now, steady::time_point started,
                                   const std::string& why, std::optional<milliseconds> pause) {
  ++h.throttled;
  h.signalled = true;
  if (pause) {
    const auto p = std::min<steady::duration>(*pause, k_max_pause);
    h.paused_until = std::max(h.paused_until, now + p);
  }
  if (started <= h.last_signal + k_same_burst) {
    return; // sent before the last cut, or just after: the same burst, already answered
  }
  h.last_signal = now;
  const double previous = h.ceiling;
  if (h.rate) {
    // Multiplicative decrease of the limit in force. The host refused
    // between the last limit that held for a second and this one: halfway,
    // if the limit was raised since, else at this one.
    h.ceiling = h.healthy_rate > 0 && h.healthy_rate < *h.rate ? (h.healthy_rate + *h.rate) / 2 : *h.rate;
    h.rate = std::max(k_min_rate, *h.rate * k_cut);
  } else {
    // The first limit: half the rate just measured (the last full period,
    // or this one so far; early in the first period an estimate from what
    // little there is, which later signals correct).
    const double so_far = std::chrono::duration<double>(now - h.bucket_start).count();
    const double rate = std::max(h.measured_rate, h.bucket_count / std::max(so_far, 0.01));
    h.ceiling = rate;
    h.rate = std::max(k_min_rate, rate * k_first_cut);
  }
  h.healthy_at_ceiling = 0;
  const bool same = previous > 0 && std::abs(h.ceiling - previous) <= k_same_ceiling * previous;
  h.confirmed = same ? h.confirmed + 1 : 0;
  h.limit_used = now;
  h.healthy_rate = 0;
  h.window_ceiling = std::max(2.0, h.window);
  h.window = std::max(1.0, h.window / 2);
  std::string text = why + ": limit " + format_rate(*h.rate) + ", window " + std::to_string(unsigned(h.window));
  if (pause) {
    text += ", paused " + std::to_string(std::chrono::duration_cast<milliseconds>(
                                             std::min<steady::duration>(*pause, k_max_pause))
                                             .count()) +
            " ms";
  }
  set_reason_locked(h, std::move(text));
}

HostThrottle::Ticket HostThrottle::start(const std::string& host, unsigned max_connections, double configured_rate,
                                         const std::atomic<bool>* cancel) {
  std::unique_lock lock(m_mutex);
  Host& h = host_locked(host);
  h.max_window = max_connections ? max_connections : k_default_connections;
  h.window = std::min<double>(h.window, h.max_window);
  h.configured_rate = configured_rate;
  for (;;) {
    if (cancel && cancel->load()) {
      break;
    }
    const auto now = m_clock();
    tick_locked(h, now);
    if (h.robots == Host::Robots::fetching) {
      m_cv.wait_for(lock, milliseconds(100));
      continue;
    }
    if (h.paused_until > now) {
      const auto d = std::chrono::ceil<milliseconds>(h.paused_until - now);
      lock.unlock();
      m_sleeper(std::min(d, milliseconds(1000)));
      lock.lock();
      continue;
    }
    if (h.in_flight >= std::max(1u, static_cast<unsigned>(h.window))) {
      h.window_waited = true;
      m_cv.wait_for(lock, milliseconds(100));
      continue;
    }
    break;
  }
  ++h.in_flight;
  ++h.requests;
  auto now = m_clock();
  steady::duration wait{0};
  if (auto r = effective_rate_locked(h)) {
    const auto interval =
        std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(1.0 / *r));
    h.next_start = std::max(h.next_start, now);
    wait = h.next_start - now;
    h.next_start += interval; // reserve our start, then sleep outside the lock
    if (h.rate) {
      h.limit_used = now;
    }
  }
  lock.unlock();
  if (wait.count() > 0) {
    sleep_unless_cancelled(cancel, std::chrono::ceil<milliseconds>(wait), m_sleeper);
    now = m_clock();
  }
  return Ticket{host, now};
}

std::optional<HostThrottle::Ticket> HostThrottle::try_start(const std::string& host, unsigned max_connections,
                                                            double configured_rate, bool behind) {
  std::lock_guard lock(m_mutex);
  Host& h = host_locked(host);
  h.max_window = max_connections ? max_connections : k_default_connections;
  h.window = std::min<double>(h.window, h.max_window);
  h.configured_rate = configured_rate;
  const auto now = m_clock();
  tick_locked(h, now);
  if (h.robots == Host::Robots::fetching || h.paused_until > now ||
      (!behind && h.in_flight >= std::max(1u, static_cast<unsigned>(h.window)))) {
    return std::nullopt;
  }
  if (auto r = effective_rate_locked(h)) {
    if (h.next_start > now) {
      return std::nullopt;
    }
    h.next_start = now + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(1.0 / *r));
    if (h.rate) {
      h.limit_used = now;
    }
  }
  if (!behind) {
    ++h.in_flight;
  }
  ++h.requests;
  return Ticket{host, now, behind};
}

bool HostThrottle::robots_known(const std::string& host) const {
  std::lock_guard lock(m_mutex);
  auto it = m_hosts.find(host);
  return it != m_hosts.end() && it->second.robots == Host::Robots::known && m_clock() - it->second.robots_at < k_robots_ttl;
}

void HostThrottle::finish(const Ticket& ticket, const Outcome& o) {
  {
    std::lock_guard lock(m_mutex);
    Host& h = host_locked(ticket.host);
    const auto now = m_clock();
    if (!ticket.behind) {
      h.in_flight = h.in_flight ? h.in_flight - 1 : 0;
    }
    ++h.bucket_count;
    count_second_locked(h, now);
    ++h.per_second[static_cast<size_t>(h.newest_second % 60)];
    const auto code = o.status;
    if (code == 429 || code == 502 || code == 503 || code == 504) {
      std::string why = "HTTP " + std::to_string(code);
      if (o.retry_after) {
        why += " with Retry-After " + std::to_string(o.retry_after->count() / 1000) + " s";
      }
      back_off_locked(h, now, ticket.started, why, o.retry_after);
    } else if (o.timed_out) {
      back_off_locked(h, now, ticket.started, "timeout", std::nullopt);
    } else if (code > 0) {
      const double ms = static_cast<double>(o.first_byte.count());
      h.latency_ms = h.latency_ms < 0 ? ms : 0.9 * h.latency_ms + 0.1 * ms;
      h.floor_ms = h.floor_ms < 0 ? ms : std::min(h.floor_ms, ms);
      if (h.latency_ms > std::max(h.floor_ms * k_latency_factor, h.floor_ms + k_latency_margin_ms)) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "response time %.0f ms (usually %.0f ms)", h.latency_ms, h.floor_ms);
        back_off_locked(h, now, ticket.started, buf, std::nullopt);
      }
    }
    tick_locked(h, now);
  }
  m_cv.notify_all();
}

bool HostThrottle::claim_robots(const std::string& host) {
  std::lock_guard lock(m_mutex);
  Host& h = host_locked(host);
  const auto now = m_clock();
  if (h.robots == Host::Robots::fetching) {
    return false;
  }
  if (h.robots == Host::Robots::known && now - h.robots_at < k_robots_ttl) {
    return false;
  }
  h.robots = Host::Robots::fetching;
  return true;
}

void HostThrottle::set_crawl_delay(const std::string& host, std::optional<double> seconds) {
  {
    std::lock_guard lock(m_mutex);
    Host& h = host_locked(host);
    const bool changed = h.crawl_delay != seconds;
    h.crawl_delay = seconds;
    h.robots = Host::Robots::known;
    h.robots_at = m_clock();
    if (changed && seconds) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "robots.txt Crawl-delay %.3g s", *seconds);
      set_reason_locked(h, buf);
    }
  }
  m_cv.notify_all();
}

std::vector<HostThrottle::HostView> HostThrottle::snapshot() const {
  std::lock_guard lock(m_mutex);
  std::vector<HostView> out;
  const auto now = m_clock();
  for (const auto& [name, h] : m_hosts) {
    HostView v;
    v.host = name;
    v.window = std::max(1u, static_cast<unsigned>(h.window));
    v.max_window = h.max_window;
    v.in_flight = h.in_flight;
    v.rate_limit = h.rate;
    if (h.configured_rate > 0) {
      v.configured_rate = h.configured_rate;
    }
    v.crawl_delay = h.crawl_delay;
    v.measured_rate = now - h.bucket_start < 2 * k_bucket ? h.measured_rate : 0;
    {
      // The ring's seconds within the last minute (those before are stale).
      const int64_t second = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
      uint64_t sum = 0;
      for (int64_t s = std::max(h.newest_second - 59, second - 59); s <= h.newest_second; ++s) {
        sum += h.per_second[static_cast<size_t>(s % 60)];
      }
      v.minute_rate = static_cast<double>(sum) / 60.0;
    }
    v.latency_ms = std::max(0.0, h.latency_ms);
    v.usual_latency_ms = std::max(0.0, h.floor_ms);
    v.requests = h.requests;
    v.throttled = h.throttled;
    if (h.paused_until > now) {
      v.paused_until = to_system(h.paused_until, now);
    }
    v.reason = h.reason;
    v.changed_at = h.changed_at;
    out.push_back(std::move(v));
  }
  return out;
}

std::optional<double> parse_crawl_delay(std::string_view text, std::string_view agent) {
  // Groups: one or more User-agent lines, then rules. We want the group
  // naming our agent, else "*".
  std::optional<double> ours;
  std::optional<double> any;
  bool in_agents = false;   // the previous line was a User-agent line
  bool group_ours = false;
  bool group_any = false;
  const std::string want = to_lower(agent);
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    const auto colon = line.find(':');
    if (colon == std::string::npos) {
      continue;
    }
    std::string key = to_lower(trim(std::string_view(line).substr(0, colon)));
    std::string value(trim(std::string_view(line).substr(colon + 1)));
    if (key == "user-agent") {
      if (!in_agents) {
        group_ours = group_any = false;
      }
      in_agents = true;
      const std::string v = to_lower(value);
      group_any = group_any || v == "*";
      group_ours = group_ours || (!want.empty() && v == want);
      continue;
    }
    in_agents = false;
    if (key != "crawl-delay" || (!group_ours && !group_any)) {
      continue;
    }
    char* end = nullptr;
    const double d = std::strtod(value.c_str(), &end);
    if (end == value.c_str() || !std::isfinite(d) || d < 0) {
      continue;
    }
    const double capped = std::min(d, k_max_crawl_delay);
    if (group_ours) {
      ours = capped;
    } else {
      any = capped;
    }
  }
  return ours ? ours : any;
}

} // namespace tributary::sync

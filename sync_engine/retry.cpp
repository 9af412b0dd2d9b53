#include "sync_engine/retry.h"

#include "sync_engine/fetch_error_text.h"

#include <ctime>
#include <random>
#include <thread>

namespace tributary::sync {

std::chrono::milliseconds backoff_delay(const RetryPolicy& policy, int attempt) {
  double base = static_cast<double>(policy.initial_backoff.count());
  for (int i = 1; i < attempt; ++i) {
    base *= 4;
  }
  base = std::min(base, static_cast<double>(policy.max_backoff.count()));
  // Full jitter between half and the whole backoff: spreads retries of many
  // clients without ever retrying immediately.
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_real_distribution<double> d(0.5, 1.0);
  return std::chrono::milliseconds(static_cast<long long>(base * d(rng)));
}

bool is_retryable_status(int status) {
  return status == 408 || status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

std::optional<std::chrono::milliseconds> parse_retry_after(const std::string& value,
                                                           std::chrono::system_clock::time_point now) {
  if (value.empty()) {
    return std::nullopt;
  }
  bool digits = true;
  for (char c : value) {
    digits = digits && c >= '0' && c <= '9';
  }
  if (digits) {
    if (value.size() > 9) {
      return std::chrono::milliseconds(std::chrono::hours(24 * 365));
    }
    return std::chrono::seconds(std::stol(value));
  }
  // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT".
  std::tm tm{};
  if (!strptime(value.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm)) {
    return std::nullopt;
  }
  auto when = std::chrono::system_clock::from_time_t(timegm(&tm));
  auto d = std::chrono::duration_cast<std::chrono::milliseconds>(when - now);
  return d.count() > 0 ? d : std::chrono::milliseconds(0);
}

RetryingFetcher::RetryingFetcher(std::shared_ptr<Fetcher> inner, RetryPolicy policy,
                                 std::shared_ptr<HostThrottle> throttle, Sleeper sleeper)
    : m_inner(std::move(inner)), m_policy(policy), m_throttle(std::move(throttle)), m_sleeper(std::move(sleeper)) {}

void RetryingFetcher::read_robots(const Url& url, const FetchOptions& options) {
  const std::string host = url.origin();
  if (!m_throttle->claim_robots(host)) {
    return;
  }
  // Best effort: a missing, failing or unreadable robots.txt sets no delay.
  FetchOptions o;
  o.connect_timeout = options.connect_timeout;
  o.read_timeout = std::min(options.read_timeout, std::chrono::milliseconds(10000));
  o.verify_tls = options.verify_tls;
  o.max_body_bytes = 512 * 1024; // RFC 9309 2.5: at least 500 KiB are parsed
  o.headers = options.headers;
  o.allow_url = options.allow_url;
  o.addresses = options.addresses;
  o.cancel = options.cancel;
  std::string body;
  auto r = m_inner->fetch(host + "/robots.txt", o, [&](const char* d, size_t n) {
    body.append(d, n);
    return true;
  });
  std::optional<double> delay;
  if (r && r->status >= 200 && r->status <= 299) {
    delay = parse_crawl_delay(body, "tributary");
  }
  m_throttle->set_crawl_delay(host, delay);
}

Result<FetchResponse> RetryingFetcher::fetch(const std::string& url, const FetchOptions& options,
                                             const BodySink& sink) {
  auto parsed = parse_url(url);
  const bool throttled = m_throttle && parsed && (parsed->scheme == "http" || parsed->scheme == "https");
  if (throttled) {
    read_robots(*parsed, options);
  }
  Result<FetchResponse> last = make_error(ErrorKind::transient, "not attempted: " + url);
  const auto first_try = std::chrono::steady_clock::now();
  const auto deadline = first_try + m_policy.deadline;
  FetchOptions timed = options;
  int attempts = 0;
  for (int attempt = 1; attempt <= m_policy.max_attempts; ++attempt) {
    if (m_policy.deadline.count() > 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (attempt > 1 && left < std::chrono::seconds(1)) {
        break;
      }
      timed.read_timeout = std::min(options.read_timeout, std::max(left, std::chrono::milliseconds(1000)));
    }
    ++attempts;
    std::optional<HostThrottle::Ticket> ticket;
    if (throttled) {
      ticket = m_throttle->start(parsed->origin(), options.max_connections, options.requests_per_second,
                                 options.cancel);
    }
    if (options.cancel && options.cancel->load()) {
      if (ticket) {
        m_throttle->finish(*ticket, HostThrottle::Outcome{});
      }
      return make_error(ErrorKind::transient, "stopped (shutting down): " + url);
    }
    const auto started = std::chrono::steady_clock::now();
    std::optional<std::chrono::steady_clock::duration> first_byte;
    bool delivered = false;
    last = m_inner->fetch(url, timed, [&](const char* d, size_t n) {
      if (!delivered) {
        first_byte = std::chrono::steady_clock::now() - started;
      }
      delivered = true;
      return !(options.cancel && options.cancel->load()) && sink(d, n);
    });
    if (ticket) {
      HostThrottle::Outcome o;
      const auto took = std::chrono::steady_clock::now() - started;
      o.first_byte = std::chrono::duration_cast<std::chrono::milliseconds>(first_byte.value_or(took));
      if (last) {
        o.status = last->status;
        o.retry_after = parse_retry_after(last->header("retry-after"), std::chrono::system_clock::now());
      } else {
        const auto& m = last.error().message;
        o.timed_out = last.error().kind == ErrorKind::transient &&
                      (m.find("connection timed out") != std::string::npos ||
                       (m.find("read failed") != std::string::npos && took >= options.read_timeout * 9 / 10));
      }
      m_throttle->finish(*ticket, o);
    }
    std::optional<std::chrono::milliseconds> wait;
    if (last) {
      if (!is_retryable_status(last->status)) {
        return last;
      }
      wait = parse_retry_after(last->header("retry-after"), std::chrono::system_clock::now());
      if (wait && *wait > m_policy.max_retry_after) {
        // The server asks for longer than we wait inside one request: give
        // up now and let the scheduler come back later.
        return make_error(ErrorKind::transient, http_status_words(last->status, url) + " with Retry-After " +
                                                    std::to_string(wait->count() / 1000) + " s");
      }
    } else if (last.error().kind != ErrorKind::transient) {
      return last;
    }
    if (delivered && !(options.restart && options.restart())) {
      return last;
    }
    if (attempt == m_policy.max_attempts) {
      break;
    }
    auto pause = wait ? *wait : backoff_delay(m_policy, attempt);
    if (m_policy.deadline.count() > 0 &&
        std::chrono::steady_clock::now() + pause + std::chrono::seconds(1) > deadline) {
      break; // no time left for another attempt
    }
    if (!sleep_unless_cancelled(options.cancel, pause, m_sleeper)) {
      return make_error(ErrorKind::transient, "stopped (shutting down): " + url);
    }
  }
  const auto spent = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - first_try);
  const std::string within =
      std::to_string(attempts) + " attempt" + (attempts == 1 ? "" : "s") + " over " + std::to_string(spent.count()) +
      " s" +
      (attempts < m_policy.max_attempts
           ? ", the deadline of " + std::to_string(m_policy.deadline.count() / 1000) + " s"
           : std::string());
  if (last) {
    return make_error(ErrorKind::transient, http_status_words(last->status, url) + " (" + within + ")");
  }
  return make_error(ErrorKind::transient, last.error().message + " (" + within + ")");
}

} // namespace tributary::sync

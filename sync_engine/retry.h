#pragma once

#include "sync_engine/fetcher.h"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

namespace tributary::sync {

// Sleeps for a duration; injected so tests run without waiting.
using Sleeper = std::function<void(std::chrono::milliseconds)>;
Sleeper real_sleeper();

struct RetryPolicy {
  int max_attempts = 5;                           // including the first
  std::chrono::milliseconds initial_backoff{250}; // then ×4 each attempt, with jitter
  std::chrono::milliseconds max_backoff{30000};
  std::chrono::milliseconds max_retry_after{120000}; // cap on a server's Retry-After
};

// The pause before retry number `attempt` (1-based): initial_backoff ×4 per
// attempt, capped at max_backoff, with jitter between half and all of it.
std::chrono::milliseconds backoff_delay(const RetryPolicy& policy, int attempt);

// Whether an HTTP status is worth retrying: 408, 429, 500, 502, 503, 504.
bool is_retryable_status(int status);

// Parses Retry-After (delta-seconds or an HTTP-date) relative to `now`.
std::optional<std::chrono::milliseconds> parse_retry_after(const std::string& value,
                                                           std::chrono::system_clock::time_point now);

// Requests per second per host, shared by every source that fetches from the
// same host (politeness). A rate of 0 means unlimited.
class HostRateLimiter {
public:
  explicit HostRateLimiter(Sleeper sleeper = real_sleeper()) : m_sleeper(std::move(sleeper)) {}
  // Blocks until a request to `host` may start at `per_second`.
  void acquire(const std::string& host, double per_second);

private:
  Sleeper m_sleeper;
  std::mutex m_mutex;
  std::map<std::string, std::chrono::steady_clock::time_point> m_next;
};

// Decorates a Fetcher with retries (request errors and retryable statuses,
// exponential backoff ×4 with jitter, Retry-After honoured up to a cap) and
// per-host rate limiting. A failure after part of a body reached the sink is
// retried only when `restart` is given and returns true (the caller resets
// what it built from the partial body).
class RetryingFetcher : public Fetcher {
public:
  RetryingFetcher(std::shared_ptr<Fetcher> inner, RetryPolicy policy,
                  std::shared_ptr<HostRateLimiter> limiter = nullptr, Sleeper sleeper = real_sleeper());

  Result<FetchResponse> fetch(const std::string& url, const FetchOptions& options, const BodySink& sink) override;

private:
  std::shared_ptr<Fetcher> m_inner;
  RetryPolicy m_policy;
  std::shared_ptr<HostRateLimiter> m_limiter;
  Sleeper m_sleeper;
};

} // namespace tributary::sync

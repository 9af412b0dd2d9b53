#pragma once

#include "sync_engine/fetcher.h"
#include "sync_engine/host_throttle.h"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

namespace tributary::sync {

struct RetryPolicy {
  int max_attempts = 5;                           // including the first
  std::chrono::milliseconds initial_backoff{250}; // then ×4 each attempt, with jitter
  std::chrono::milliseconds max_backoff{30000};
  std::chrono::milliseconds max_retry_after{120000}; // cap on a server's Retry-After
  // One fetch, every attempt and pause included, ends by this: a Source
  // that accepts connections and never answers held a sync slot for 326 s
  // (five read timeouts of 60 s and their pauses). The last attempt's read
  // timeout is cut to what is left. Zero: no deadline.
  std::chrono::milliseconds deadline{90000};
};

// The pause before retry number `attempt` (1-based): initial_backoff ×4 per
// attempt, capped at max_backoff, with jitter between half and all of it.
std::chrono::milliseconds backoff_delay(const RetryPolicy& policy, int attempt);

// Whether an HTTP status is worth retrying: 408, 429, 500, 502, 503, 504.
bool is_retryable_status(int status);

// Parses Retry-After (delta-seconds or an HTTP-date) relative to `now`.
std::optional<std::chrono::milliseconds> parse_retry_after(const std::string& value,
                                                           std::chrono::system_clock::time_point now);

// Decorates a Fetcher with retries (request errors and retryable statuses,
// exponential backoff ×4 with jitter, Retry-After honoured up to a cap) and
// the per-host throttle (HostThrottle: concurrency, adaptive rate, robots.txt
// Crawl-delay, fetched once a day per http(s) host). A failure after part of a body reached the sink is
// retried only when `restart` is given and returns true (the caller resets
// what it built from the partial body).
class RetryingFetcher : public Fetcher {
public:
  RetryingFetcher(std::shared_ptr<Fetcher> inner, RetryPolicy policy,
                  std::shared_ptr<HostThrottle> throttle = nullptr, Sleeper sleeper = real_sleeper());

  Result<FetchResponse> fetch(const std::string& url, const FetchOptions& options, const BodySink& sink) override;

private:
  std::shared_ptr<Fetcher> m_inner;
  RetryPolicy m_policy;
  void read_robots(const Url& url, const FetchOptions& options);

  std::shared_ptr<HostThrottle> m_throttle;
  Sleeper m_sleeper;
};

} // namespace tributary::sync

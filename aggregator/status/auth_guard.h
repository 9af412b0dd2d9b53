#pragma once

// Wrong admin tokens, counted per client (#50): 3,000 guesses at 1,926/s
// were answered 401 each, with no log line. A client that sends
// `max_failures` wrong tokens within `window` is answered 429 (with
// Retry-After) until the window has passed, whatever it sends; each wrong
// token is logged, the first of a client's window and then every hundredth,
// naming the client. Clients as http::Request::client says (behind a
// trusted proxy, the forwarded address; IPv6 by /64).

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace tributary::agg {

class AuthGuard {
public:
  using Clock = std::chrono::steady_clock;
  explicit AuthGuard(uint32_t max_failures = 10, std::chrono::seconds window = std::chrono::seconds(60),
                     size_t max_clients = 10000)
      : m_max(max_failures), m_window(window), m_max_clients(max_clients) {}

  // Seconds until `client` may try again; 0: it may now.
  int64_t blocked_for(const std::string& client, Clock::time_point now = Clock::now());
  // A wrong token from `client`: whether to log it (first of its window,
  // then every hundredth), and how many it sent in this window.
  std::pair<bool, uint32_t> failed(const std::string& client, Clock::time_point now = Clock::now());

private:
  struct Count {
    Clock::time_point since;
    uint32_t failures = 0;
  };
  std::mutex m_mutex;
  std::unordered_map<std::string, Count> m_clients;
  uint32_t m_max;
  std::chrono::seconds m_window;
  size_t m_max_clients;
};

} // namespace tributary::agg

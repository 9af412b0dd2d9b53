#pragma once

// One HTTP request to a whole URL, for tests that read what a server
// publishes, and a wait for a document to say something.
#include "sync_engine/fetcher.h"

#include <doctest/doctest.h>
#include <httplib.h>

#include <chrono>
#include <string>
#include <thread>

namespace tributary::test {

struct Got {
  int status = 0; // 0: no answer at all
  std::string body;
  httplib::Headers headers;
};

inline Got http_get(const std::string& url, const httplib::Headers& headers = {}, bool head = false,
                    int read_timeout = 10) {
  auto u = sync::parse_url(url);
  REQUIRE(u);
  httplib::Client c(u->origin());
  c.set_connection_timeout(2);
  c.set_read_timeout(read_timeout);
  auto r = head ? c.Head(u->target, headers) : c.Get(u->target, headers);
  return r ? Got{r->status, r->body, r->headers} : Got{};
}

// Polls `url` until its body holds `needle` (true) or `seconds` pass.
inline bool eventually_says(const std::string& url, const std::string& needle, double seconds = 10) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (http_get(url).body.find(needle) != std::string::npos) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

} // namespace tributary::test

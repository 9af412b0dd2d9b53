#pragma once

// One HTTP request to a whole URL, for tests that read what a server
// publishes, a wait for a document to say something, and a test's own
// server run in the background.
#include "sync_engine/fetcher.h"

#include <doctest/doctest.h>
#include <httplib.h>

#include <sys/socket.h>

#include <chrono>
#include <functional>
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

// Asks `pred` every 50 ms until it holds (true) or `seconds` pass (then it
// is asked a last time).
inline bool eventually(const std::function<bool()>& pred, double seconds = 10) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pred();
}

// Polls `url` until its body holds `needle` (true) or `seconds` pass.
inline bool eventually_says(const std::string& url, const std::string& needle, double seconds = 10) {
  return eventually([&] { return http_get(url).body.find(needle) != std::string::npos; }, seconds);
}

// Runs `server` (its routes set) on a port of its own at `host`, in a
// thread of its own, from construction until destruction.
class ServerThread {
public:
  explicit ServerThread(httplib::Server& server, const std::string& host = "127.0.0.1") : m_server(server) {
    // cpp-httplib 0.11 listens with a backlog of 5; concurrent clients would
    // lose SYNs and stall for a 1 s retransmit. Listen again, deeper.
    int listen_fd = -1;
    m_server.set_socket_options([&listen_fd](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
      listen_fd = sock;
    });
    m_port = m_server.bind_to_any_port(host);
    REQUIRE(m_port > 0);
    ::listen(listen_fd, 1024);
    m_thread = std::thread([this] { m_server.listen_after_bind(); });
    while (!m_server.is_running()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  ~ServerThread() {
    m_server.stop();
    m_thread.join();
  }
  ServerThread(const ServerThread&) = delete;
  ServerThread& operator=(const ServerThread&) = delete;
  int port() const { return m_port; }
  std::string base() const { return "http://127.0.0.1:" + std::to_string(m_port); }

private:
  httplib::Server& m_server;
  int m_port = 0;
  std::thread m_thread;
};

} // namespace tributary::test

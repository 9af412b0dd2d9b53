#pragma once

// A raw HTTP/1.1 server on 127.0.0.1 (an ephemeral port) for the pipelining
// tests: each connection on a thread of its own reads what comes and hands
// every whole request head in it, in order, to the test's `answer`, which
// writes the bytes to send back (all of one read go in one send, as nginx
// answers a pipelined segment). The test decides what a read answers: all
// of its requests, the first only (a server that drops pipelined
// requests), or some and then a close.
#include <doctest/doctest.h>

#include "loopback_listener.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tributary::test {

struct PipelinedRequest {
  bool head = false; // HEAD, else GET
  std::string target;
};

class PipeliningServer {
public:
  // Given one read's requests (at least one), appends the answer to `out`;
  // returns false to close the connection after sending it.
  using Answer = std::function<bool(const std::vector<PipelinedRequest>& requests, std::string& out)>;

  explicit PipeliningServer(Answer answer) : m_answer(std::move(answer)) {
    m_listen = listen_loopback("127.0.0.1", 64, m_port);
    m_thread = std::thread([this] { accept_loop(); });
  }
  ~PipeliningServer() {
    m_stop = true;
    ::shutdown(m_listen, SHUT_RDWR);
    ::close(m_listen);
    m_thread.join();
    std::lock_guard lock(m_mutex);
    for (auto& t : m_conns) {
      t.join();
    }
  }
  PipeliningServer(const PipeliningServer&) = delete;
  PipeliningServer& operator=(const PipeliningServer&) = delete;

  int port() const { return m_port; }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(m_port) + path; }
  size_t connections() const { return m_connections.load(); }
  size_t most_in_one_read() const { return m_most.load(); } // requests
  size_t most_open_at_once() const { return m_most_open.load(); } // connections
  // Connections on which one read brought several requests (pipelined).
  size_t connections_pipelined() const { return m_pipelined.load(); }

private:
  void accept_loop() {
    for (;;) {
      int fd = ::accept4(m_listen, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        return;
      }
      ++m_connections;
      std::lock_guard lock(m_mutex);
      m_conns.emplace_back([this, fd] { serve(fd); });
    }
  }
  void serve(int fd) {
    const size_t now_open = ++m_open;
    for (size_t seen = m_most_open.load(); now_open > seen && !m_most_open.compare_exchange_weak(seen, now_open);) {
    }
    bool counted = false;
    std::string in;
    char buf[65536];
    bool open = true;
    while (open && !m_stop) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) {
        continue;
      }
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) {
        break;
      }
      in.append(buf, static_cast<size_t>(n));
      std::vector<PipelinedRequest> requests;
      for (size_t end; (end = in.find("\r\n\r\n")) != std::string::npos;) {
        const size_t sp = in.find(' ');
        requests.push_back({in.compare(0, 5, "HEAD ") == 0, in.substr(sp + 1, in.find(' ', sp + 1) - sp - 1)});
        in.erase(0, end + 4);
      }
      if (requests.empty()) {
        continue;
      }
      if (requests.size() > m_most.load()) {
        m_most = requests.size();
      }
      if (requests.size() > 1 && !counted) {
        counted = true;
        ++m_pipelined;
      }
      std::string out;
      open = m_answer(requests, out);
      (void)::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
    }
    ::close(fd);
    --m_open;
  }

  Answer m_answer;
  int m_listen = -1;
  int m_port = 0;
  std::thread m_thread;
  std::mutex m_mutex; // guards m_conns
  std::vector<std::thread> m_conns;
  std::atomic<bool> m_stop{false};
  std::atomic<size_t> m_connections{0};
  std::atomic<size_t> m_most{0};
  std::atomic<size_t> m_open{0};
  std::atomic<size_t> m_most_open{0};
  std::atomic<size_t> m_pipelined{0};
};

} // namespace tributary::test

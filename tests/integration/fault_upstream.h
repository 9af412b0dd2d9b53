#pragma once

// A hostile upstream: a raw TCP server on a loopback address whose every
// answer is a script over the socket, so that tests can send what no
// well-behaved HTTP library would: a byte a second, a reset mid-body, a
// Content-Length that lies, a redirect to ftp:, a header with CR LF in it.
// One request per connection (each answer ends by closing it).
#include <doctest/doctest.h>

#include "../common/loopback_listener.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tributary::test {

class FaultUpstream {
public:
  // Writes the answer to `fd`; `request` is the request head.
  using Script = std::function<void(int fd, const std::string& request)>;

  explicit FaultUpstream(const std::string& host = "127.0.0.1") : m_host(host) {
    m_listen = listen_loopback(host, 256, m_port);
    m_accept = std::thread([this] { accept_loop(); });
  }

  ~FaultUpstream() {
    m_stop = true;
    ::shutdown(m_listen, SHUT_RDWR);
    ::close(m_listen);
    m_accept.join();
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(m_mutex);
      for (int fd : m_open) {
        ::shutdown(fd, SHUT_RDWR);
      }
      threads.swap(m_threads);
    }
    for (auto& t : threads) {
      t.join();
    }
  }
  FaultUpstream(const FaultUpstream&) = delete;
  FaultUpstream& operator=(const FaultUpstream&) = delete;

  std::string base() const { return "http://" + m_host + ":" + std::to_string(m_port); }
  std::string url(const std::string& path) const { return base() + path; }

  void on(const std::string& path, Script s) {
    std::lock_guard lock(m_mutex);
    m_scripts[path] = std::move(s);
  }
  // A well-formed answer.
  void serve(const std::string& path, const std::string& body, const std::string& type = "application/xml",
             int status = 200, const std::string& extra_headers = "") {
    on(path, [=](int fd, const std::string&) { send_all(fd, response(status, body, type, extra_headers)); });
  }

  size_t hits(const std::string& path) const {
    std::lock_guard lock(m_mutex);
    auto it = m_hits.find(path);
    return it == m_hits.end() ? 0 : it->second;
  }
  size_t total_hits() const {
    std::lock_guard lock(m_mutex);
    size_t n = 0;
    for (const auto& [p, c] : m_hits) {
      n += c;
    }
    return n;
  }
  // The request heads received for `path`, in order.
  std::vector<std::string> requests(const std::string& path) const {
    std::lock_guard lock(m_mutex);
    auto it = m_requests.find(path);
    return it == m_requests.end() ? std::vector<std::string>{} : it->second;
  }

  // ---- script helpers -------------------------------------------------

  static bool send_all(int fd, const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) {
        return false;
      }
      sent += static_cast<size_t>(n);
    }
    return true;
  }
  static std::string head(int status, const std::string& type, size_t length, const std::string& extra = "") {
    return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: " + type +
           "\r\nContent-Length: " + std::to_string(length) + "\r\nConnection: close\r\n" + extra + "\r\n";
  }
  static std::string response(int status, const std::string& body, const std::string& type = "application/xml",
                              const std::string& extra = "") {
    return head(status, type, body.size(), extra) + body;
  }
  // Ends the connection with a TCP reset instead of a close.
  static void reset(int fd) {
    linger l{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  }

private:
  void accept_loop() {
    while (!m_stop) {
      const int fd = ::accept4(m_listen, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (m_stop) {
          return;
        }
        continue;
      }
      std::lock_guard lock(m_mutex);
      m_open.push_back(fd);
      m_threads.emplace_back([this, fd] { answer(fd); });
    }
  }

  void answer(int fd) {
    std::string in;
    char buf[4096];
    while (in.find("\r\n\r\n") == std::string::npos && in.size() < 65536) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) {
        break;
      }
      in.append(buf, static_cast<size_t>(n));
    }
    const size_t sp1 = in.find(' ');
    const size_t sp2 = sp1 == std::string::npos ? sp1 : in.find(' ', sp1 + 1);
    const std::string path = sp2 == std::string::npos ? "" : in.substr(sp1 + 1, sp2 - sp1 - 1);
    Script script;
    {
      std::lock_guard lock(m_mutex);
      ++m_hits[path];
      m_requests[path].push_back(in.substr(0, in.find("\r\n\r\n")));
      if (auto it = m_scripts.find(path); it != m_scripts.end()) {
        script = it->second;
      }
    }
    if (script) {
      script(fd, in);
    } else {
      send_all(fd, response(404, "not here\n", "text/plain"));
    }
    std::lock_guard lock(m_mutex);
    for (auto it = m_open.begin(); it != m_open.end(); ++it) {
      if (*it == fd) {
        m_open.erase(it);
        break;
      }
    }
    ::close(fd);
  }

  std::string m_host;
  int m_listen = -1;
  int m_port = 0;
  std::atomic<bool> m_stop{false};
  std::thread m_accept;
  mutable std::mutex m_mutex;
  std::map<std::string, Script> m_scripts;
  std::map<std::string, size_t> m_hits;
  std::map<std::string, std::vector<std::string>> m_requests;
  std::vector<int> m_open;
  std::vector<std::thread> m_threads;
};

} // namespace tributary::test

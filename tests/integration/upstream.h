#pragma once

// A programmable upstream ResourceSync Source on a loopback address: a real
// cpp-httplib server whose documents and resources tests set and change
// between runs, with a request log and injectable failures.
#include "http_get.h"
#include "resourcesync/writer.h"

#include <httplib.h>
#include <doctest/doctest.h>

#include <sys/socket.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace tributary::test {

struct Served {
  int status = 200;
  std::string body;
  std::string content_type = "application/xml";
  std::map<std::string, std::string> headers;
};

class Upstream {
public:
  explicit Upstream(const std::string& host = "127.0.0.1") : m_host(host) {
    m_server.set_tcp_nodelay(true);
    // cpp-httplib gives each open connection a worker of a pool of 8 until
    // it closes (keep-alive waits up to 5 s): several clients with pools of
    // their own, as several daemons are, would queue behind idle
    // connections and see a slow Source. A real server has more workers.
    m_server.new_task_queue = [] { return new httplib::ThreadPool(48); };
    m_server.Get(".*", [this](const httplib::Request& req, httplib::Response& res) { handle(req, res); });
    m_running = std::make_unique<ServerThread>(m_server, host);
  }
  ~Upstream() { m_running.reset(); } // stopped while what handle() uses is still here
  Upstream(const Upstream&) = delete;
  Upstream& operator=(const Upstream&) = delete;

  std::string base() const { return "http://" + m_host + ":" + std::to_string(m_running->port()); }
  std::string url(const std::string& path) const { return base() + path; }

  void set(const std::string& path, Served s) {
    std::lock_guard lock(m_mutex);
    m_paths[path] = std::move(s);
  }
  void set(const std::string& path, const std::string& body, const std::string& type = "application/xml") {
    set(path, Served{200, body, type, {}});
  }
  void set_document(const std::string& path, const rs::Document& doc) { set(path, rs::write_document(doc)); }
  void remove(const std::string& path) {
    std::lock_guard lock(m_mutex);
    m_paths.erase(path);
  }
  // Every request must carry this Authorization header, else 401.
  void require_auth(const std::string& value) {
    std::lock_guard lock(m_mutex);
    m_auth = value;
  }
  // Answers every request with `status` (e.g. 503) until cleared.
  void fail_all(std::optional<int> status) {
    std::lock_guard lock(m_mutex);
    m_fail_all = status;
  }
  // Delay before answering each resource (paths not ending in .xml).
  void set_delay(std::chrono::milliseconds d) {
    std::lock_guard lock(m_mutex);
    m_delay = d;
  }

  // Past `per_second` requests a second (a token bucket holding `burst`),
  // answers 503 with Retry-After: `retry_after` seconds, as an overloaded
  // repository server behind a rate limiter does.
  void set_rate_threshold(double per_second, double burst, int retry_after) {
    std::lock_guard lock(m_mutex);
    m_threshold = per_second;
    m_burst = m_tokens = burst;
    m_retry_after = retry_after;
    m_refilled = std::chrono::steady_clock::now();
  }
  size_t rejected() const {
    std::lock_guard lock(m_mutex);
    return m_rejected;
  }
  // When each request not refused by the threshold arrived, in order.
  std::vector<std::chrono::steady_clock::time_point> accepted_times() const {
    std::lock_guard lock(m_mutex);
    std::vector<std::chrono::steady_clock::time_point> out;
    for (const auto& r : m_log) {
      if (!r.rejected) {
        out.push_back(r.at);
      }
    }
    return out;
  }

  size_t requests(const std::string& path) const {
    std::lock_guard lock(m_mutex);
    size_t n = 0;
    for (const auto& r : m_log) {
      n += r.path == path ? 1 : 0;
    }
    return n;
  }
  size_t total_requests() const {
    std::lock_guard lock(m_mutex);
    return m_log.size();
  }
  // Authorization headers seen (empty string for none).
  std::vector<std::string> auth_headers() const {
    std::lock_guard lock(m_mutex);
    std::vector<std::string> out;
    for (const auto& r : m_log) {
      out.push_back(r.auth);
    }
    return out;
  }

private:
  struct Logged {
    std::string path;
    std::string auth;
    std::chrono::steady_clock::time_point at;
    bool rejected = false;
  };

  void handle(const httplib::Request& req, httplib::Response& res) {
    Served s;
    bool found = false;
    std::chrono::milliseconds delay{0};
    {
      std::lock_guard lock(m_mutex);
      const auto now = std::chrono::steady_clock::now();
      m_log.push_back(Logged{req.path, req.get_header_value("Authorization"), now});
      if (m_threshold > 0) {
        m_tokens = std::min(m_burst, m_tokens + m_threshold * std::chrono::duration<double>(now - m_refilled).count());
        m_refilled = now;
        if (m_tokens < 1) {
          ++m_rejected;
          m_log.back().rejected = true;
          res.status = 503;
          res.set_header("Retry-After", std::to_string(m_retry_after));
          return;
        }
        m_tokens -= 1;
      }
      if (m_fail_all) {
        res.status = *m_fail_all;
        return;
      }
      if (!m_auth.empty() && req.get_header_value("Authorization") != m_auth) {
        res.status = 401;
        return;
      }
      auto it = m_paths.find(req.path);
      if (it != m_paths.end()) {
        s = it->second;
        found = true;
      }
      if (req.path.size() < 4 || req.path.compare(req.path.size() - 4, 4, ".xml") != 0) {
        delay = m_delay;
      }
    }
    if (delay.count() > 0) {
      std::this_thread::sleep_for(delay);
    }
    if (!found) {
      res.status = 404;
      return;
    }
    if (auto etag = s.headers.find("ETag");
        etag != s.headers.end() && req.get_header_value("If-None-Match") == etag->second) {
      res.status = 304;
      return;
    }
    res.status = s.status;
    for (const auto& [k, v] : s.headers) {
      res.set_header(k, v);
    }
    if (s.body.empty()) {
      // (A content provider of length 0 makes cpp-httplib 0.11 spin.)
      res.set_content("", s.content_type);
      return;
    }
    // Served through a content provider so that httplib does not compress
    // it on its own (the bytes are what the test says they are).
    auto body = std::make_shared<std::string>(s.body);
    res.set_content_provider(body->size(), s.content_type,
                             [body](size_t offset, size_t length, httplib::DataSink& sink) {
                               sink.write(body->data() + offset, length);
                               return true;
                             });
  }

  std::string m_host;
  httplib::Server m_server;
  std::unique_ptr<ServerThread> m_running;
  mutable std::mutex m_mutex;
  std::map<std::string, Served> m_paths;
  std::vector<Logged> m_log;
  std::string m_auth;
  std::optional<int> m_fail_all;
  std::chrono::milliseconds m_delay{0};
  double m_threshold = 0;
  double m_burst = 0;
  double m_tokens = 0;
  int m_retry_after = 1;
  std::chrono::steady_clock::time_point m_refilled{};
  size_t m_rejected = 0;
};

} // namespace tributary::test

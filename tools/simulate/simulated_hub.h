#pragma once

// Room tools/simulate/simulated_hub: the simulated Source's WebSub hub.
// Subscription requests verified at the callback, every change pushed to
// the subscribers on a thread of its own; a test tool's, bounded all the
// same (#35): at most 100 subscribers and 100 pending intents (503 past
// them), callbacks on public or loopback addresses only, answers read up to
// 64 KiB. Owns its subscribers, its thread and its lock.

#include "tools/simulate/simulated_source.h"

#include "common/http/server.h"
#include "sync_engine/fetcher.h"
#include "sync_engine/net_policy.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace tributary::agg {

class SimulatedHub {
public:
  // `source` must outlive this.
  explicit SimulatedHub(const SimulatedSource& source) : m_source(source) {}
  ~SimulatedHub(); // stops
  SimulatedHub(const SimulatedHub&) = delete;
  SimulatedHub& operator=(const SimulatedHub&) = delete;

  void start();
  void stop();
  // POST /hub: 202, 400, or 503 when too many wait.
  void request(const http::Request& req, http::Response& res);
  // The source changed: push now.
  void wake();

private:
  sync::FetchOptions callback_options() const;
  // Verifies intents and pushes changes.
  void push_loop();
  void verify(const std::map<std::string, std::string>& form);
  bool post(const std::string& callback, const std::string& secret, const std::string& body);

  static constexpr size_t k_max_subscribers = 100;
  static constexpr size_t k_max_intents = 100;

  const SimulatedSource& m_source;
  const std::shared_ptr<const sync::AddressPolicy> m_callback_policy =
      std::make_shared<const sync::AddressPolicy>(std::set<std::string>{"127.0.0.1", "::1"});
  std::shared_ptr<sync::Fetcher> m_client;

  struct Subscriber {
    std::string secret;
    std::chrono::steady_clock::time_point expires;
    size_t sent = 0; // how far into the source's log it was sent
    std::chrono::steady_clock::time_point retry_at{};
  };
  std::mutex m_mutex; // guards what follows
  std::condition_variable m_pushed;
  std::map<std::string, Subscriber> m_subscribers;
  std::deque<std::map<std::string, std::string>> m_intents; // subscription requests to verify
  bool m_stopping = false;
  std::thread m_pusher;
};

} // namespace tributary::agg

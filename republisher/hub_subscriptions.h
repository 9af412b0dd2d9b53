#pragma once

// Room republisher/hub_subscriptions: the hub's subscription requests
// (WebSub 5.1), parsed, capped per client and per callback host, and
// verified at the callback (5.3) by a pool of verifiers, one host at a time
// and hosts in turns, before anything is recorded; the quotas per host,
// address and registrable domain are checked at the write. Owns its
// threads, its lock and the queues of intents.

#include "republisher/hub.h"
#include "republisher/hub_common.h"
#include "republisher/hub_delivery.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

namespace tributary::pub {

class HubSubscriptions {
public:
  // `urls`, `transport`, `options` and `delivery` must outlive this (the
  // hub owns them all).
  HubSubscriptions(std::shared_ptr<store::PushStore> store, const UrlScheme& urls, const HubTransport& transport,
                   const HubOptions& options, HubDelivery& delivery)
      : m_store(std::move(store)), m_urls(urls), m_transport(transport), m_options(options), m_delivery(delivery) {}
  ~HubSubscriptions(); // stops
  HubSubscriptions(const HubSubscriptions&) = delete;
  HubSubscriptions& operator=(const HubSubscriptions&) = delete;

  // Starts the verifiers.
  void start();
  void stop();

  // POST /hub: 202 when the intent is queued for verification; 400 when
  // it is malformed; 429 or 503 when too many wait.
  void request(const http::Request& req, http::Response& res);

private:
  // What a subscription request asks for, checked.
  struct Intent {
    std::string mode; // "subscribe" or "unsubscribe"
    std::string topic;
    std::string set;
    std::string callback;
    std::string secret;
    std::chrono::seconds lease{0};
    std::string client;          // who asked (its address)
    std::string callback_host;   // the callback's host, lower-cased
    std::string callback_domain; // its registrable domain
  };
  // The request's intent, or the reason it is refused (a 4xx).
  std::variant<Intent, std::string> parse(const http::Request& req);
  static bool renews(const std::vector<store::HubSubscription>& existing, const Intent& i);
  static size_t on_host(const std::vector<store::HubSubscription>& existing, const std::string& host);
  static size_t on_domain(const std::vector<store::HubSubscription>& existing, const std::string& domain);
  // How many subscriptions have a callback on a host that resolves to one
  // of `host`'s addresses (none known: 0).
  size_t on_addresses(const std::vector<store::HubSubscription>& existing, const std::string& host);
  std::vector<std::string> addresses_of(const std::string& host);
  // WebSub 5.3: the hub asks the callback whether it meant it; only an
  // answer of 2xx carrying the challenge, unchanged, confirms.
  void verify(const Intent& i);
  // Takes the intent of the host whose turn it is; that host has no other
  // verification under way until this one ends.
  void verifier();

  std::shared_ptr<store::PushStore> m_store;
  const UrlScheme& m_urls;
  const HubTransport& m_transport;
  const HubOptions& m_options;
  HubDelivery& m_delivery;

  std::mutex m_mutex; // guards what follows, to m_pending
  std::condition_variable m_wake;
  bool m_stopping = false;
  // Intents waiting per callback host; the hosts whose turn may come
  // (waiting intents, none under way), in order; and what each client and
  // host has waiting or under way.
  std::map<std::string, std::deque<Intent>> m_waiting;
  std::deque<std::string> m_turns;
  std::set<std::string> m_verifying_hosts;
  std::map<std::string, size_t> m_pending_by_client;
  std::map<std::string, size_t> m_pending_by_host;
  size_t m_pending = 0;
  // Held from a verified subscription's quota checks to its write: the
  // verifiers run on several threads, and two callbacks on different hosts
  // of one domain, verified at once, each counted the other's domain short
  // of its quota (a fourth subscription under a quota of three, in CI).
  std::mutex m_admit_mutex;
  std::mutex m_resolved_mutex; // guards m_resolved
  std::map<std::string, std::pair<std::chrono::steady_clock::time_point, std::vector<std::string>>> m_resolved;
  std::vector<std::thread> m_threads;
};

} // namespace tributary::pub

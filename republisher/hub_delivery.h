#pragma once

// Room republisher/hub_delivery: the hub's deliveries. It hears what the
// Change Lists show (published) and which of our documents changed
// (framework); a scheduler picks the subscriptions that are due (one node
// delivers: the store's lead), and two pools of workers POST their
// notifications (prompt, and slow for hosts whose last delivery was slow),
// with retries, back-off, and the external hub as a subscriber. Owns its
// threads, its lock and the queues.

#include "republisher/hub.h"
#include "republisher/hub_common.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace tributary::pub {

class HubDelivery {
public:
  // `urls`, `transport` and `options` must outlive this (the hub owns them
  // all).
  HubDelivery(std::shared_ptr<store::PushStore> store, std::shared_ptr<store::StoreReader> reader,
              const UrlScheme& urls, const HubTransport& transport, const HubOptions& options)
      : m_store(std::move(store)), m_reader(std::move(reader)), m_urls(urls), m_transport(transport),
        m_options(options) {}
  ~HubDelivery(); // stops
  HubDelivery(const HubDelivery&) = delete;
  HubDelivery& operator=(const HubDelivery&) = delete;

  // Starts the scheduler and the delivery workers.
  void start();
  void stop();

  // The Change Lists of `sets` show the change log up to `seq`.
  void published(const std::vector<PublishedSet>& sets, int64_t seq);
  // One of our documents changed: recorded for the framework channels by
  // the node that delivers.
  void framework(store::FrameworkEvent event);
  // The seq the Change List of `set` shows; nullopt: not a set we publish.
  std::optional<int64_t> shown(const std::string& set) const;
  // A subscription was added: look now.
  void wake();

private:
  // The notification body: the changes as our Change List shows them.
  std::string payload(const PublishedSet& set, const std::vector<store::LoggedChange>& changes);
  // With an external hub: each published set's topic has it as a
  // subscriber (added once; its cursor then moves like any other's).
  void publish_to_external(const std::vector<std::pair<std::string, int64_t>>& missing);
  static std::chrono::seconds backoff(int failures);
  // POSTs a notification; records what came of it.
  void post_notification(const store::HubSubscription& s, std::string body, int64_t last, bool full);
  // A framework channel's events after the cursor, as one notification.
  void deliver_framework(const store::HubSubscription& s, const std::string& set, int64_t upto);
  void deliver(const store::HubSubscription& s);
  // Picks what is due; the workers deliver it.
  void scheduler();
  // A delivery worker: of the prompt pool or the slow one.
  void worker(bool slow);

  std::shared_ptr<store::PushStore> m_store;
  std::shared_ptr<store::StoreReader> m_reader;
  const UrlScheme& m_urls;
  const HubTransport& m_transport;
  const HubOptions& m_options;

  mutable std::mutex m_mutex; // guards what follows
  std::condition_variable m_wake;
  bool m_stopping = false;
  std::map<std::string, PublishedSet> m_sets; // name -> set, as last published
  std::map<std::string, int64_t> m_shown_seq; // name -> seq its Change List shows
  std::set<std::pair<std::string, std::string>> m_in_flight; // (topic, callback)
  std::deque<store::HubSubscription> m_due;      // for the prompt workers
  std::deque<store::HubSubscription> m_due_slow; // for the slow pool: hosts whose last delivery was slow
  std::map<std::string, size_t> m_delivering;    // callback host -> deliveries under way or due
  std::set<std::string> m_slow_hosts;            // their last delivery took longer than slow_delivery
  bool m_leading = false;
  std::set<std::string> m_external_known; // sets whose topic the external hub follows (scheduler only)
  std::vector<store::FrameworkEvent> m_framework_pending; // for the scheduler to record
  int64_t m_framework_seq = 0;                            // the newest recorded
  std::chrono::steady_clock::time_point m_framework_expired{}; // scheduler only
  std::vector<std::thread> m_threads;
};

} // namespace tributary::pub

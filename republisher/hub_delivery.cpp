// The hub's deliveries: which subscriptions are due, the notification
// bodies, the POSTs (prompt and slow pools), retries and the external hub.
#include "republisher/hub_delivery.h"

#include "common/stop_and_join.h"
#include "common/thread_name.h"

namespace tributary::pub {

using namespace hub_detail;

HubDelivery::~HubDelivery() { stop(); }

void HubDelivery::start() {
  m_threads.emplace_back([this] {
    name_thread("hub scheduler");
    scheduler();
  });
  for (unsigned i = 0; i < std::max(1u, m_options.delivery_threads); ++i) {
    m_threads.emplace_back([this] {
      name_thread("hub delivery");
      worker(false);
    });
  }
  for (unsigned i = 0; i < std::max(1u, m_options.slow_delivery_threads); ++i) {
    m_threads.emplace_back([this] { worker(true); });
  }
}

void HubDelivery::stop() {
  stop_and_join(m_mutex, m_stopping, m_wake, m_threads);
}

void HubDelivery::published(const std::vector<PublishedSet>& sets, int64_t seq) {
  {
    std::lock_guard lock(m_mutex);
    for (const auto& s : sets) {
      m_sets[s.name] = s;
      m_shown_seq[s.name] = seq;
    }
  }
  m_wake.notify_all();
}

void HubDelivery::framework(store::FrameworkEvent event) {
  {
    std::lock_guard lock(m_mutex);
    if (m_framework_pending.size() < 10000) {
      m_framework_pending.push_back(std::move(event));
    }
  }
  m_wake.notify_all();
}

std::optional<int64_t> HubDelivery::shown(const std::string& set) const {
  std::lock_guard lock(m_mutex);
  auto it = m_shown_seq.find(set);
  if (it == m_shown_seq.end()) {
    return std::nullopt;
  }
  return it->second;
}

void HubDelivery::wake() { m_wake.notify_all(); }

auto HubDelivery::payload(const PublishedSet& set, const std::vector<store::LoggedChange>& changes) -> std::string {
  rs::Document d = capability_document("changelist-notification");
  d.header.links.push_back(link("up", m_urls.capability_list(set.name)));
  std::optional<rs::Timestamp> previous;
  for (const auto& c : changes) {
    rs::Entry e = change_entry(m_urls, set.name, c, previous, {});
    previous = e.md && e.md->datetime ? e.md->datetime : previous;
    d.entries.push_back(std::move(e));
  }
  return rs::write_document(d);
}

auto HubDelivery::publish_to_external(const std::vector<std::pair<std::string, int64_t>>& missing) -> void {
  auto have = m_store->hub_subscriptions();
  if (!have) {
    return;
  }
  for (const auto& [name, seq] : missing) {
    const std::string topic = m_urls.change_notification(name);
    const bool there = std::any_of(have->begin(), have->end(), [&](const store::HubSubscription& h) {
      return h.topic == topic && h.callback == m_options.external_hub;
    });
    if (!there) {
      store::HubSubscription s;
      s.topic = topic;
      s.callback = m_options.external_hub;
      s.secret = m_options.external_hub_secret;
      s.lease_seconds = 0;
      s.expires_at = at(Clock::now() + std::chrono::hours(24 * 365 * 100)); // the operator's: never expires
      s.delivered_seq = seq;
      if (!m_store->put_hub_subscription(s)) {
        continue;
      }
      log::info("", "hub: publishing to the external hub", {{"topic", topic}, {"hub", m_options.external_hub}});
    }
    m_external_known.insert(name);
  }
}

auto HubDelivery::backoff(int failures) -> std::chrono::seconds {
  return std::chrono::seconds(std::min<int64_t>(int64_t(1) << std::min(failures, 12), 3600));
}

auto HubDelivery::post_notification(const store::HubSubscription& s, std::string body, int64_t last, bool full) -> void {
  HubRequest post;
  post.method = "POST";
  post.url = s.callback;
  post.body = std::move(body);
  post.content_type = "application/xml";
  post.headers.emplace_back("Link", rs::websub::link_header(hub_url(m_urls, m_options), s.topic));
  if (!s.secret.empty()) {
    post.headers.emplace_back("X-Hub-Signature", rs::websub::signature(s.secret, post.body));
  }
  auto reply = m_transport(post);
  const auto now = Clock::now();
  if (reply && reply->status >= 200 && reply->status <= 299) {
    if (auto r = m_store->hub_delivered(s.topic, s.callback, last, at(now)); !r) {
      log::warn("", "hub: " + r.error().message);
    }
    if (full) {
      m_wake.notify_all(); // more to send
    }
    return;
  }
  if (reply && reply->status == 410) {
    // WebSub: the subscriber wants no more.
    (void)m_store->remove_hub_subscription(s.topic, s.callback);
    log::info("", "hub: the callback answered 410 Gone: unsubscribed",
              {{"topic", s.topic}, {"callback", rs::websub::callback_label(s.callback)}});
    return;
  }
  const std::string error =
      reply ? "HTTP " + std::to_string(reply->status) : scrubbed(reply.error().message, s.callback);
  const auto since = s.delivered_at ? *s.delivered_at : s.created_at;
  if (s.failures >= 3 && at(now) - since > m_options.give_up) {
    (void)m_store->remove_hub_subscription(s.topic, s.callback);
    log::warn("", "hub: deliveries failed for over " + std::to_string(m_options.give_up.count()) +
                      " s: subscription dropped (the subscriber catches up by polling)",
              {{"topic", s.topic}, {"callback", rs::websub::callback_label(s.callback)}, {"error", error}});
    return;
  }
  const auto wait = backoff(s.failures);
  (void)m_store->hub_delivery_failed(s.topic, s.callback, at(now + wait), error);
  log::warn("", "hub: delivery failed, retried in " + std::to_string(wait.count()) + " s",
            {{"topic", s.topic}, {"callback", rs::websub::callback_label(s.callback)}, {"error", error}});
}

auto HubDelivery::deliver_framework(const store::HubSubscription& s, const std::string& set, int64_t upto) -> void {
  auto events = m_store->framework_events(set, s.delivered_seq, m_options.changes_per_notification);
  if (!events) {
    log::warn("", "hub: reading framework events for " + s.topic + ": " + events.error().message);
    return;
  }
  while (!events->empty() && events->back().seq > upto) {
    events->pop_back();
  }
  if (events->empty()) {
    (void)m_store->hub_delivered(s.topic, s.callback, upto, at(Clock::now()));
    return;
  }
  rs::Document d = capability_document("framework-notification");
  d.header.links.push_back(link("up", m_urls.capability_list(set)));
  for (const auto& e : *events) {
    rs::Entry entry;
    entry.loc = e.loc;
    entry.md = rs::Metadata{};
    entry.md->capability = e.capability;
    entry.md->change = e.change == "created" ? rs::Change::created
                       : e.change == "deleted" ? rs::Change::deleted
                                               : rs::Change::updated;
    entry.md->datetime = e.at;
    d.entries.push_back(std::move(entry));
  }
  const int64_t last = events->back().seq;
  post_notification(s, rs::write_document(d), last, events->size() >= m_options.changes_per_notification);
}

auto HubDelivery::deliver(const store::HubSubscription& s) -> void {
  bool framework = false;
  if (auto name = m_urls.notification_set(s.topic, &framework); name && framework) {
    int64_t upto = 0;
    {
      std::lock_guard lock(m_mutex);
      if (!m_sets.count(*name)) {
        return;
      }
      upto = m_framework_seq;
    }
    deliver_framework(s, *name, upto);
    return;
  }
  PublishedSet set;
  int64_t upto = 0;
  {
    std::lock_guard lock(m_mutex);
    auto name = m_urls.notification_set(s.topic);
    auto it = name ? m_sets.find(*name) : m_sets.end();
    if (it == m_sets.end()) {
      return;
    }
    set = it->second;
    upto = m_shown_seq[set.name];
  }
  auto changes = m_reader->changes(set.feeds, s.delivered_seq, m_options.changes_per_notification);
  if (!changes) {
    log::warn("", "hub: reading the change log for " + s.topic + ": " + changes.error().message);
    return;
  }
  while (!changes->empty() && changes->back().seq > upto) {
    changes->pop_back(); // not in the Change List yet
  }
  if (changes->empty()) {
    // Nothing of this set between the cursor and what is shown.
    (void)m_store->hub_delivered(s.topic, s.callback, upto, at(Clock::now()));
    return;
  }
  const int64_t last = changes->back().seq;
  post_notification(s, payload(set, *changes), last, changes->size() >= m_options.changes_per_notification);
}

auto HubDelivery::scheduler() -> void {
  std::unique_lock lock(m_mutex);
  while (!m_stopping) {
    m_wake.wait_for(lock, std::chrono::seconds(1));
    if (m_stopping) {
      break;
    }
    // With an external hub: the sets it does not follow yet, at the
    // seq their Change Lists show now.
    std::vector<std::pair<std::string, int64_t>> unfollowed;
    if (!m_options.external_hub.empty()) {
      for (const auto& [name, seq] : m_shown_seq) {
        if (!m_external_known.count(name)) {
          unfollowed.emplace_back(name, seq);
        }
      }
    }
    std::vector<store::FrameworkEvent> events = std::move(m_framework_pending);
    m_framework_pending.clear();
    lock.unlock();
    auto lead = m_store->lead_hub_delivery();
    if (lead && *lead && !unfollowed.empty()) {
      publish_to_external(unfollowed);
    }
    int64_t newest_framework = -1;
    if (lead && *lead) {
      if (!events.empty()) {
        if (auto r = m_store->add_framework_events(events); !r) {
          log::warn("", "hub: framework events not recorded: " + r.error().message);
        }
      }
      if (auto last = m_store->last_framework_seq()) {
        newest_framework = *last;
      }
      if (std::chrono::steady_clock::now() - m_framework_expired > std::chrono::hours(1)) {
        m_framework_expired = std::chrono::steady_clock::now();
        (void)m_store->expire_framework_events(at(Clock::now() - std::chrono::hours(24 * 7)));
      }
    }
    std::vector<store::HubSubscription> subs;
    if (lead && *lead) {
      auto got = m_store->hub_subscriptions();
      if (got) {
        subs = std::move(*got);
      } else {
        log::warn("", "hub: " + got.error().message);
      }
    }
    const auto now = at(Clock::now());
    std::vector<store::HubSubscription> expired;
    lock.lock();
    if (newest_framework >= 0) {
      m_framework_seq = newest_framework;
    }
    if (lead && *lead != m_leading) {
      m_leading = *lead;
      log::info("", m_leading ? "hub: this node delivers notifications" : "hub: another node delivers notifications");
    }
    for (auto& s : subs) {
      if (s.expires_at < now) {
        expired.push_back(std::move(s));
        continue;
      }
      bool framework = false;
      auto name = m_urls.notification_set(s.topic, &framework);
      auto seq = name ? m_shown_seq.find(*name) : m_shown_seq.end();
      const std::pair<std::string, std::string> key{s.topic, s.callback};
      const int64_t upto = framework ? m_framework_seq : (seq == m_shown_seq.end() ? 0 : seq->second);
      if (seq == m_shown_seq.end() || s.delivered_seq >= upto || (s.retry_at && *s.retry_at > now) ||
          m_in_flight.count(key)) {
        continue;
      }
      const std::string host = host_of(s.callback);
      if (m_delivering[host] >= std::max<size_t>(1, m_options.deliveries_per_host)) {
        continue; // its turn comes when one of them ends
      }
      ++m_delivering[host];
      m_in_flight.insert(key);
      (m_slow_hosts.count(host) ? m_due_slow : m_due).push_back(std::move(s));
    }
    lock.unlock();
    for (const auto& s : expired) {
      (void)m_store->remove_hub_subscription(s.topic, s.callback);
      log::info("", "hub: lease expired", {{"topic", s.topic}, {"callback", rs::websub::callback_label(s.callback)}});
    }
    lock.lock();
    if (!m_due.empty() || !m_due_slow.empty()) {
      m_wake.notify_all();
    }
  }
}

auto HubDelivery::worker(bool slow) -> void {
  std::unique_lock lock(m_mutex);
  while (!m_stopping) {
    auto& queue = slow ? m_due_slow : m_due;
    if (queue.empty()) {
      m_wake.wait(lock);
      continue;
    }
    store::HubSubscription s = std::move(queue.front());
    queue.pop_front();
    lock.unlock();
    const auto began = std::chrono::steady_clock::now();
    try {
      deliver(s);
    } catch (const std::exception& e) {
      log::error("", std::string("hub: delivery: ") + e.what());
    }
    const auto took = std::chrono::steady_clock::now() - began;
    lock.lock();
    m_in_flight.erase({s.topic, s.callback});
    const std::string host = host_of(s.callback);
    if (took > m_options.slow_delivery) {
      m_slow_hosts.insert(host);
    } else {
      m_slow_hosts.erase(host);
    }
    if (auto it = m_delivering.find(host); it != m_delivering.end() && --it->second == 0) {
      m_delivering.erase(it);
    }
    m_wake.notify_all(); // the scheduler may hand out the host's next one
  }
}

} // namespace tributary::pub

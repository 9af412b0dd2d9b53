// The hub's deliveries: which subscriptions are due, the notification
// bodies, the POSTs (prompt and slow pools), retries and the external hub.
#include "republisher/hub_impl.h"

namespace tributary::pub {

using namespace hub_detail;

auto Hub::Impl::payload(const PublishedSet& set, const std::vector<store::LoggedChange>& changes) -> std::string {
  rs::Document d = capability_document("changelist-notification");
  d.header.links.push_back(link("up", urls.capability_list(set.name)));
  std::optional<rs::Timestamp> previous;
  for (const auto& c : changes) {
    rs::Entry e = change_entry(urls, set.name, c, previous, {});
    previous = e.md && e.md->datetime ? e.md->datetime : previous;
    d.entries.push_back(std::move(e));
  }
  return rs::write_document(d);
}

auto Hub::Impl::publish_to_external(const std::vector<std::pair<std::string, int64_t>>& missing) -> void {
  auto have = store->hub_subscriptions();
  if (!have) {
    return;
  }
  for (const auto& [name, seq] : missing) {
    const std::string topic = urls.change_notification(name);
    const bool there = std::any_of(have->begin(), have->end(), [&](const store::HubSubscription& h) {
      return h.topic == topic && h.callback == options.external_hub;
    });
    if (!there) {
      store::HubSubscription s;
      s.topic = topic;
      s.callback = options.external_hub;
      s.secret = options.external_hub_secret;
      s.lease_seconds = 0;
      s.expires_at = at(Clock::now() + std::chrono::hours(24 * 365 * 100)); // the operator's: never expires
      s.delivered_seq = seq;
      if (!store->put_hub_subscription(s)) {
        continue;
      }
      log::info("", "hub: publishing to the external hub", {{"topic", topic}, {"hub", options.external_hub}});
    }
    external_known.insert(name);
  }
}

auto Hub::Impl::backoff(int failures) -> std::chrono::seconds {
  return std::chrono::seconds(std::min<int64_t>(int64_t(1) << std::min(failures, 12), 3600));
}

auto Hub::Impl::post_notification(const store::HubSubscription& s, std::string body, int64_t last, bool full) -> void {
  HubRequest post;
  post.method = "POST";
  post.url = s.callback;
  post.body = std::move(body);
  post.content_type = "application/xml";
  post.headers.emplace_back("Link", rs::websub::link_header(hub_url(), s.topic));
  if (!s.secret.empty()) {
    post.headers.emplace_back("X-Hub-Signature", rs::websub::signature(s.secret, post.body));
  }
  auto reply = transport(post);
  const auto now = Clock::now();
  if (reply && reply->status >= 200 && reply->status <= 299) {
    if (auto r = store->hub_delivered(s.topic, s.callback, last, at(now)); !r) {
      log::warn("", "hub: " + r.error().message);
    }
    if (full) {
      wake.notify_all(); // more to send
    }
    return;
  }
  if (reply && reply->status == 410) {
    // WebSub: the subscriber wants no more.
    (void)store->remove_hub_subscription(s.topic, s.callback);
    log::info("", "hub: the callback answered 410 Gone: unsubscribed",
              {{"topic", s.topic}, {"callback", rs::websub::callback_label(s.callback)}});
    return;
  }
  const std::string error =
      reply ? "HTTP " + std::to_string(reply->status) : scrubbed(reply.error().message, s.callback);
  const auto since = s.delivered_at ? *s.delivered_at : s.created_at;
  if (s.failures >= 3 && at(now) - since > options.give_up) {
    (void)store->remove_hub_subscription(s.topic, s.callback);
    log::warn("", "hub: deliveries failed for over " + std::to_string(options.give_up.count()) +
                      " s: subscription dropped (the subscriber catches up by polling)",
              {{"topic", s.topic}, {"callback", rs::websub::callback_label(s.callback)}, {"error", error}});
    return;
  }
  const auto wait = backoff(s.failures);
  (void)store->hub_delivery_failed(s.topic, s.callback, at(now + wait), error);
  log::warn("", "hub: delivery failed, retried in " + std::to_string(wait.count()) + " s",
            {{"topic", s.topic}, {"callback", rs::websub::callback_label(s.callback)}, {"error", error}});
}

auto Hub::Impl::deliver_framework(const store::HubSubscription& s, const std::string& set, int64_t upto) -> void {
  auto events = store->framework_events(set, s.delivered_seq, options.changes_per_notification);
  if (!events) {
    log::warn("", "hub: reading framework events for " + s.topic + ": " + events.error().message);
    return;
  }
  while (!events->empty() && events->back().seq > upto) {
    events->pop_back();
  }
  if (events->empty()) {
    (void)store->hub_delivered(s.topic, s.callback, upto, at(Clock::now()));
    return;
  }
  rs::Document d = capability_document("framework-notification");
  d.header.links.push_back(link("up", urls.capability_list(set)));
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
  post_notification(s, rs::write_document(d), last, events->size() >= options.changes_per_notification);
}

auto Hub::Impl::deliver(const store::HubSubscription& s) -> void {
  bool framework = false;
  if (auto name = urls.notification_set(s.topic, &framework); name && framework) {
    int64_t upto = 0;
    {
      std::lock_guard lock(mutex);
      if (!sets.count(*name)) {
        return;
      }
      upto = framework_seq;
    }
    deliver_framework(s, *name, upto);
    return;
  }
  PublishedSet set;
  int64_t upto = 0;
  {
    std::lock_guard lock(mutex);
    auto name = urls.notification_set(s.topic);
    auto it = name ? sets.find(*name) : sets.end();
    if (it == sets.end()) {
      return;
    }
    set = it->second;
    upto = shown_seq[set.name];
  }
  auto changes = reader->changes(set.feeds, s.delivered_seq, options.changes_per_notification);
  if (!changes) {
    log::warn("", "hub: reading the change log for " + s.topic + ": " + changes.error().message);
    return;
  }
  while (!changes->empty() && changes->back().seq > upto) {
    changes->pop_back(); // not in the Change List yet
  }
  if (changes->empty()) {
    // Nothing of this set between the cursor and what is shown.
    (void)store->hub_delivered(s.topic, s.callback, upto, at(Clock::now()));
    return;
  }
  const int64_t last = changes->back().seq;
  post_notification(s, payload(set, *changes), last, changes->size() >= options.changes_per_notification);
}

auto Hub::Impl::scheduler() -> void {
  std::unique_lock lock(mutex);
  while (!stopping) {
    wake.wait_for(lock, std::chrono::seconds(1));
    if (stopping) {
      break;
    }
    // With an external hub: the sets it does not follow yet, at the
    // seq their Change Lists show now.
    std::vector<std::pair<std::string, int64_t>> unfollowed;
    if (!options.external_hub.empty()) {
      for (const auto& [name, seq] : shown_seq) {
        if (!external_known.count(name)) {
          unfollowed.emplace_back(name, seq);
        }
      }
    }
    std::vector<store::FrameworkEvent> events = std::move(framework_pending);
    framework_pending.clear();
    lock.unlock();
    auto lead = store->lead_hub_delivery();
    if (lead && *lead && !unfollowed.empty()) {
      publish_to_external(unfollowed);
    }
    int64_t newest_framework = -1;
    if (lead && *lead) {
      if (!events.empty()) {
        if (auto r = store->add_framework_events(events); !r) {
          log::warn("", "hub: framework events not recorded: " + r.error().message);
        }
      }
      if (auto last = store->last_framework_seq()) {
        newest_framework = *last;
      }
      if (std::chrono::steady_clock::now() - framework_expired > std::chrono::hours(1)) {
        framework_expired = std::chrono::steady_clock::now();
        (void)store->expire_framework_events(at(Clock::now() - std::chrono::hours(24 * 7)));
      }
    }
    std::vector<store::HubSubscription> subs;
    if (lead && *lead) {
      auto got = store->hub_subscriptions();
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
      framework_seq = newest_framework;
    }
    if (lead && *lead != leading) {
      leading = *lead;
      log::info("", leading ? "hub: this node delivers notifications" : "hub: another node delivers notifications");
    }
    for (auto& s : subs) {
      if (s.expires_at < now) {
        expired.push_back(std::move(s));
        continue;
      }
      bool framework = false;
      auto name = urls.notification_set(s.topic, &framework);
      auto seq = name ? shown_seq.find(*name) : shown_seq.end();
      const std::pair<std::string, std::string> key{s.topic, s.callback};
      const int64_t upto = framework ? framework_seq : (seq == shown_seq.end() ? 0 : seq->second);
      if (seq == shown_seq.end() || s.delivered_seq >= upto || (s.retry_at && *s.retry_at > now) ||
          in_flight.count(key)) {
        continue;
      }
      const std::string host = host_of(s.callback);
      if (delivering[host] >= std::max<size_t>(1, options.deliveries_per_host)) {
        continue; // its turn comes when one of them ends
      }
      ++delivering[host];
      in_flight.insert(key);
      (slow_hosts.count(host) ? due_slow : due).push_back(std::move(s));
    }
    lock.unlock();
    for (const auto& s : expired) {
      (void)store->remove_hub_subscription(s.topic, s.callback);
      log::info("", "hub: lease expired", {{"topic", s.topic}, {"callback", rs::websub::callback_label(s.callback)}});
    }
    lock.lock();
    if (!due.empty() || !due_slow.empty()) {
      wake.notify_all();
    }
  }
}

auto Hub::Impl::worker(bool slow) -> void {
  std::unique_lock lock(mutex);
  while (!stopping) {
    auto& queue = slow ? due_slow : due;
    if (queue.empty()) {
      wake.wait(lock);
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
    in_flight.erase({s.topic, s.callback});
    const std::string host = host_of(s.callback);
    if (took > options.slow_delivery) {
      slow_hosts.insert(host);
    } else {
      slow_hosts.erase(host);
    }
    if (auto it = delivering.find(host); it != delivering.end() && --it->second == 0) {
      delivering.erase(it);
    }
    wake.notify_all(); // the scheduler may hand out the host's next one
  }
}

} // namespace tributary::pub

#include "republisher/hub.h"

#include "common/log.h"
#include "resourcesync/websub.h"
#include "resourcesync/writer.h"

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <variant>

namespace tributary::pub {

namespace {

// `text` with `callback` (whose path may hold the subscriber's only
// credential) shown as its label: what the log and the status API say.
std::string scrubbed(std::string text, const std::string& callback) {
  if (callback.empty()) {
    return text;
  }
  const std::string label = rs::websub::callback_label(callback);
  for (size_t at = text.find(callback); at != std::string::npos; at = text.find(callback, at + label.size())) {
    text.replace(at, callback.size(), label);
  }
  return text;
}

} // namespace

namespace {

using Clock = std::chrono::system_clock;

rs::Timestamp at(Clock::time_point t) { return std::chrono::time_point_cast<std::chrono::microseconds>(t); }

bool http_url(const std::string& u) {
  return (u.rfind("http://", 0) == 0 && u.size() > 7) || (u.rfind("https://", 0) == 0 && u.size() > 8);
}

void answer(http::Response& res, int status, const std::string& text) {
  res.status = status;
  res.set_body(text + "\n", "text/plain; charset=utf-8");
}

// What a subscription request asks for, checked.
struct Intent {
  std::string mode; // "subscribe" or "unsubscribe"
  std::string topic;
  std::string set;
  std::string callback;
  std::string secret;
  std::chrono::seconds lease{0};
  std::string client;        // who asked (its address)
  std::string callback_host; // the callback's host, lower-cased
};

// The host of an http(s) URL, lower-cased ("" when there is none).
std::string host_of(const std::string& url) {
  const size_t start = url.find("://");
  if (start == std::string::npos) {
    return {};
  }
  std::string rest = url.substr(start + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (auto at = rest.rfind('@'); at != std::string::npos) {
    rest = rest.substr(at + 1);
  }
  if (!rest.empty() && rest[0] == '[') {
    rest = rest.substr(0, rest.find(']') + 1);
  } else {
    rest = rest.substr(0, rest.find(':'));
  }
  for (char& c : rest) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return rest;
}

} // namespace

struct Hub::Impl {
  std::shared_ptr<store::PushStore> store;
  std::shared_ptr<store::StoreReader> reader;
  UrlScheme urls;
  HubTransport transport;
  HubOptions options;

  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  bool started = false;
  std::map<std::string, PublishedSet> sets; // name -> set, as last published
  std::map<std::string, int64_t> shown_seq; // name -> seq its Change List shows
  // Verifications: intents waiting per callback host; the hosts whose turn
  // may come (waiting intents, none under way), in order; and what each
  // client and host has waiting or under way.
  std::map<std::string, std::deque<Intent>> waiting;
  std::deque<std::string> turns;
  std::set<std::string> verifying_hosts;
  std::map<std::string, size_t> pending_by_client;
  std::map<std::string, size_t> pending_by_host;
  size_t pending = 0;
  std::set<std::pair<std::string, std::string>> in_flight; // (topic, callback)
  std::deque<store::HubSubscription> due;      // for the delivery workers
  std::deque<store::HubSubscription> due_slow; // for the slow pool: hosts whose last delivery was slow
  std::map<std::string, size_t> delivering;    // callback host -> deliveries under way or due
  std::set<std::string> slow_hosts;            // their last delivery took longer than slow_delivery
  bool leading = false;
  std::vector<std::thread> threads;
  std::set<std::string> external_known; // sets whose topic the external hub follows (scheduler only)
  std::vector<store::FrameworkEvent> framework_pending; // under mutex: for the scheduler to record
  int64_t framework_seq = 0;                           // under mutex: the newest recorded
  std::chrono::steady_clock::time_point framework_expired{};

  Impl(std::shared_ptr<store::PushStore> s, std::shared_ptr<store::StoreReader> r, UrlScheme u, HubTransport t,
       HubOptions o)
      : store(std::move(s)), reader(std::move(r)), urls(std::move(u)), transport(std::move(t)), options(o) {}

  // ---- subscription requests -------------------------------------------------

  // The request's intent, or the reason it is refused (a 4xx).
  std::variant<Intent, std::string> parse(const http::Request& req) {
    const std::string type = req.header_value("content-type");
    if (type.rfind("application/x-www-form-urlencoded", 0) != 0) {
      return std::string("a subscription request is application/x-www-form-urlencoded");
    }
    auto form = rs::websub::parse_form(req.body);
    if (!form) {
      return std::string("malformed form body");
    }
    auto get = [&](const char* k) {
      auto it = form->find(k);
      return it == form->end() ? std::string() : it->second;
    };
    Intent i;
    i.mode = get("hub.mode");
    if (i.mode != "subscribe" && i.mode != "unsubscribe") {
      return "hub.mode must be subscribe or unsubscribe, not '" + i.mode.substr(0, 40) + "'";
    }
    i.callback = get("hub.callback");
    if (!http_url(i.callback) || i.callback.size() > 2048 || i.callback.find('#') != std::string::npos) {
      return std::string("hub.callback must be an absolute http(s) URL of at most 2048 characters");
    }
    i.topic = get("hub.topic");
    auto set = urls.notification_set(i.topic);
    {
      std::lock_guard lock(mutex);
      if (!set || !sets.count(*set)) {
        return "hub.topic '" + i.topic.substr(0, 200) + "' is not a topic of this hub";
      }
    }
    i.set = *set;
    i.secret = get("hub.secret");
    if (i.secret.size() > 199) {
      return std::string("hub.secret must be shorter than 200 bytes");
    }
    const std::string lease = get("hub.lease_seconds");
    i.lease = options.default_lease;
    if (!lease.empty()) {
      if (lease.size() > 10 || lease.find_first_not_of("0123456789") != std::string::npos) {
        return std::string("hub.lease_seconds must be a number of seconds");
      }
      i.lease = std::clamp(std::chrono::seconds(std::stoll(lease)), options.min_lease, options.max_lease);
    }
    return i;
  }

  static bool renews(const std::vector<store::HubSubscription>& existing, const Intent& i) {
    return std::any_of(existing.begin(), existing.end(),
                       [&](const auto& e) { return e.topic == i.topic && e.callback == i.callback; });
  }

  static size_t on_host(const std::vector<store::HubSubscription>& existing, const std::string& host) {
    return static_cast<size_t>(std::count_if(existing.begin(), existing.end(),
                                             [&](const auto& e) { return host_of(e.callback) == host; }));
  }

  void subscription_request(const http::Request& req, http::Response& res) {
    auto parsed = parse(req);
    if (auto* why = std::get_if<std::string>(&parsed)) {
      answer(res, 400, "subscription refused: " + *why);
      return;
    }
    Intent i = std::get<Intent>(std::move(parsed));
    i.client = req.peer;
    i.callback_host = host_of(i.callback);
    {
      std::lock_guard lock(mutex);
      if (pending >= options.max_pending_verifications) {
        res.set_header("Retry-After", "60");
        answer(res, 503, "too many subscription requests waiting for verification; try again later");
        return;
      }
      if (pending_by_client[i.client] >= options.max_pending_per_client) {
        res.set_header("Retry-After", "60");
        answer(res, 429, "too many of your subscription requests are waiting for verification; try again later");
        return;
      }
      if (pending_by_host[i.callback_host] >= options.max_pending_per_callback_host) {
        res.set_header("Retry-After", "60");
        answer(res, 429, "too many subscription requests for callbacks on that host are waiting for "
                         "verification; try again later");
        return;
      }
      ++pending;
      ++pending_by_client[i.client];
      ++pending_by_host[i.callback_host];
      auto& queue = waiting[i.callback_host];
      if (queue.empty() && !verifying_hosts.count(i.callback_host)) {
        turns.push_back(i.callback_host);
      }
      queue.push_back(std::move(i));
    }
    wake.notify_all();
    answer(res, 202, "accepted: the callback will be asked to confirm");
  }

  // WebSub 5.3: the hub asks the callback whether it meant it; only an
  // answer of 2xx carrying the challenge, unchanged, confirms.
  void verify(const Intent& i) {
    const std::string challenge = rs::websub::random_hex(16);
    std::map<std::string, std::string> q{{"hub.mode", i.mode}, {"hub.topic", i.topic}, {"hub.challenge", challenge}};
    if (i.mode == "subscribe") {
      q["hub.lease_seconds"] = std::to_string(i.lease.count());
    }
    HubRequest get;
    get.method = "GET";
    get.verification = true;
    get.url = i.callback + (i.callback.find('?') == std::string::npos ? "?" : "&") + rs::websub::encode_form(q);
    auto reply = transport(get);
    const std::string who = "subscription of " + rs::websub::callback_label(i.callback) + " to " + i.topic;
    if (!reply) {
      log::warn("", "hub: " + i.mode + " not verified, " + who + ": " + scrubbed(reply.error().message, i.callback));
      return;
    }
    if (reply->status < 200 || reply->status > 299 || reply->body != challenge) {
      log::warn("", "hub: " + i.mode + " not confirmed by the callback (HTTP " + std::to_string(reply->status) +
                        (reply->status >= 200 && reply->status <= 299 ? ", challenge not echoed" : "") + "), " + who);
      return;
    }
    if (i.mode == "unsubscribe") {
      auto r = store->remove_hub_subscription(i.topic, i.callback);
      if (!r) {
        log::warn("", "hub: " + who + ": " + r.error().message);
      } else {
        log::info("", "hub: unsubscribed", {{"topic", i.topic}, {"callback", rs::websub::callback_label(i.callback)}});
      }
      return;
    }
    store::HubSubscription s;
    s.topic = i.topic;
    s.callback = i.callback;
    s.secret = i.secret;
    s.lease_seconds = static_cast<int>(i.lease.count());
    s.expires_at = at(Clock::now() + i.lease);
    bool framework = false;
    (void)urls.notification_set(i.topic, &framework);
    if (framework) {
      auto last = store->last_framework_seq();
      s.delivered_seq = last ? *last : 0;
    } else {
      std::lock_guard lock(mutex);
      // A new subscriber gets the changes from now on.
      auto it = shown_seq.find(i.set);
      s.delivered_seq = it == shown_seq.end() ? 0 : it->second;
    }
    auto existing = store->hub_subscriptions();
    if (existing && !renews(*existing, i) && on_host(*existing, i.callback_host) >= options.max_subscriptions_per_host) {
      log::warn("", "hub: refused, " + who + ": its callback host holds the maximum of " +
                        std::to_string(options.max_subscriptions_per_host) + " subscriptions a host may hold");
      return;
    }
    if (existing && existing->size() >= options.max_subscriptions &&
        std::none_of(existing->begin(), existing->end(),
                     [&](const auto& e) { return e.topic == i.topic && e.callback == i.callback; })) {
      log::warn("", "hub: refused, " + who + ": the hub holds its maximum of " +
                        std::to_string(options.max_subscriptions) + " subscriptions");
      return;
    }
    if (auto r = store->put_hub_subscription(s); !r) {
      log::warn("", "hub: " + who + ": " + r.error().message);
      return;
    }
    log::info("", "hub: subscribed", {{"topic", i.topic}, {"callback", rs::websub::callback_label(i.callback)},
                                      {"lease_seconds", std::to_string(i.lease.count())},
                                      {"signed", i.secret.empty() ? "no" : "yes"}});
    wake.notify_all();
  }

  // Takes the intent of the host whose turn it is; that host has no other
  // verification under way until this one ends.
  void verifier() {
    std::unique_lock lock(mutex);
    while (!stopping) {
      if (turns.empty()) {
        wake.wait(lock);
        continue;
      }
      const std::string host = std::move(turns.front());
      turns.pop_front();
      auto& queue = waiting[host];
      Intent i = std::move(queue.front());
      queue.pop_front();
      if (queue.empty()) {
        waiting.erase(host);
      }
      verifying_hosts.insert(host);
      lock.unlock();
      try {
        verify(i);
      } catch (const std::exception& e) {
        log::error("", std::string("hub: verification failed: ") + e.what());
      }
      lock.lock();
      verifying_hosts.erase(host);
      if (waiting.count(host)) {
        turns.push_back(host); // its next intent, after the other hosts' turns
        wake.notify_all();
      }
      --pending;
      if (--pending_by_client[i.client] == 0) {
        pending_by_client.erase(i.client);
      }
      if (--pending_by_host[host] == 0) {
        pending_by_host.erase(host);
      }
    }
  }

  // ---- deliveries ---------------------------------------------------------

  // The notification body: the changes as our Change List shows them.
  std::string payload(const PublishedSet& set, const std::vector<store::LoggedChange>& changes) {
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

  std::string hub_url() const { return options.external_hub.empty() ? urls.hub() : options.external_hub; }

  // With an external hub: each published set's topic has it as a
  // subscriber (added once; its cursor then moves like any other's).
  void publish_to_external(const std::vector<std::pair<std::string, int64_t>>& missing) {
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

  std::chrono::seconds backoff(int failures) {
    return std::chrono::seconds(std::min<int64_t>(int64_t(1) << std::min(failures, 12), 3600));
  }

  // POSTs a notification; records what came of it. True when delivered.
  void post_notification(const store::HubSubscription& s, std::string body, int64_t last, bool full) {
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
      log::info("", "hub: the callback answered 410 Gone: unsubscribed", {{"topic", s.topic}, {"callback", rs::websub::callback_label(s.callback)}});
      return;
    }
    const std::string error = reply ? "HTTP " + std::to_string(reply->status) : scrubbed(reply.error().message, s.callback);
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

  // A framework channel's events after the cursor, as one notification.
  void deliver_framework(const store::HubSubscription& s, const std::string& set, int64_t upto) {
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

  void deliver(const store::HubSubscription& s) {
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

  // Picks what is due; the workers deliver it.
  void scheduler() {
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

  // A delivery worker: of the prompt pool (`due`) or the slow one.
  void worker(bool slow) {
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
};

Hub::Hub(std::shared_ptr<store::PushStore> store, std::shared_ptr<store::StoreReader> reader, UrlScheme urls,
         HubTransport transport, HubOptions options)
    : m_impl(std::make_unique<Impl>(std::move(store), std::move(reader), std::move(urls), std::move(transport),
                                    options)) {}

Hub::~Hub() { stop(); }

void Hub::start() {
  std::lock_guard lock(m_impl->mutex);
  if (m_impl->started) {
    return;
  }
  m_impl->started = true;
  Impl* impl = m_impl.get();
  for (unsigned i = 0; i < std::max(1u, m_impl->options.verification_threads); ++i) {
    m_impl->threads.emplace_back([impl] { impl->verifier(); });
  }
  m_impl->threads.emplace_back([impl] { impl->scheduler(); });
  for (unsigned i = 0; i < std::max(1u, m_impl->options.delivery_threads); ++i) {
    m_impl->threads.emplace_back([impl] { impl->worker(false); });
  }
  for (unsigned i = 0; i < std::max(1u, m_impl->options.slow_delivery_threads); ++i) {
    m_impl->threads.emplace_back([impl] { impl->worker(true); });
  }
}

void Hub::stop() {
  {
    std::lock_guard lock(m_impl->mutex);
    m_impl->stopping = true;
  }
  m_impl->wake.notify_all();
  for (auto& t : m_impl->threads) {
    if (t.joinable()) {
      t.join();
    }
  }
  m_impl->threads.clear();
}

bool Hub::handle(const http::Request& req, http::Response& res) {
  const std::string hub_path = m_impl->urls.path_of(m_impl->urls.hub());
  if (req.path == hub_path) {
    if (!m_impl->options.external_hub.empty()) {
      // Our documents name the external hub: subscriptions here would get
      // notifications nobody asked us to send (#35).
      answer(res, 404, "this Tributary's topics are served by the hub at " + m_impl->options.external_hub +
                           ": subscribe there");
      return true;
    }
    if (req.method != "POST") {
      res.set_header("Allow", "POST");
      answer(res, 405, "the hub takes WebSub subscription requests: POST, application/x-www-form-urlencoded");
      return true;
    }
    m_impl->subscription_request(req, res);
    return true;
  }
  // "<base path>/sets/<set>/notification/changelist" (or /framework)
  bool framework = false;
  const std::optional<std::string> set = m_impl->urls.notification_set(m_impl->urls.url_of(req.path), &framework);
  if (!set) {
    return false;
  }
  {
    std::lock_guard lock(m_impl->mutex);
    if (!m_impl->sets.count(*set)) {
      return false;
    }
  }
  if (req.method != "GET" && req.method != "HEAD") {
    res.set_header("Allow", "GET, HEAD");
    answer(res, 405, "a topic is read with GET or HEAD; subscribe at " + m_impl->urls.hub());
    return true;
  }
  // WebSub 4: discovery through the topic's Link header.
  const std::string topic =
      framework ? m_impl->urls.framework_notification(*set) : m_impl->urls.change_notification(*set);
  res.set_header("Link", rs::websub::link_header(m_impl->hub_url(), topic));
  answer(res, 200,
         std::string("ResourceSync ") + (framework ? "Framework" : "Change") + " Notification channel of set '" + *set +
             "' (its Capability List: " + m_impl->urls.capability_list(*set) +
             "); subscribe through the WebSub hub " + m_impl->hub_url());
  return true;
}

void Hub::published(const std::vector<PublishedSet>& sets, int64_t seq) {
  {
    std::lock_guard lock(m_impl->mutex);
    for (const auto& s : sets) {
      m_impl->sets[s.name] = s;
      m_impl->shown_seq[s.name] = seq;
    }
  }
  m_impl->wake.notify_all();
}

void Hub::framework(const std::string& set, const std::string& loc, const std::string& capability,
                    const std::string& change) {
  {
    std::lock_guard lock(m_impl->mutex);
    if (m_impl->framework_pending.size() < 10000) {
      m_impl->framework_pending.push_back(store::FrameworkEvent{0, set, loc, capability, change, at(Clock::now())});
    }
  }
  m_impl->wake.notify_all();
}

std::string Hub::advertised_hub() const { return m_impl->hub_url(); }

Result<std::vector<store::HubSubscription>> Hub::subscriptions() { return m_impl->store->hub_subscriptions(); }

} // namespace tributary::pub

#include "aggregator/push/subscriber.h"

#include "aggregator/push/notified_runs.h"

#include "common/log.h"
#include "common/thread_name.h"
#include "resourcesync/reader.h"
#include "resourcesync/websub.h"
#include "sync_engine/discovery.h"
#include "sync_engine/endpoint_fetcher.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

namespace tributary::agg {

namespace {

using Clock = std::chrono::system_clock;

rs::Timestamp now_ts() { return std::chrono::time_point_cast<std::chrono::microseconds>(Clock::now()); }

void answer(http::Response& res, int status, const std::string& text) {
  res.status = status;
  res.set_body(text + "\n", "text/plain; charset=utf-8");
}

std::string query_value(const std::map<std::string, std::string>& q, const char* k) {
  auto it = q.find(k);
  return it == q.end() ? std::string() : it->second;
}

// The largest notification we read: a Change Notification carries changes,
// not content.
constexpr size_t k_max_notification_bytes = 16 << 20;

} // namespace

struct PushSubscriber::Impl {
  std::shared_ptr<store::PushStore> store;
  std::shared_ptr<store::StoreReader> feeds;      // which feeds are a source's
  std::shared_ptr<store::Store> watermarks;        // what each applied
  std::shared_ptr<sync::Fetcher> fetcher;
  PushOptions options;
  Hooks hooks;
  std::string base; // public URL without a trailing slash

  std::mutex mutex; // guards stopping, offered and configured, asked
  // Requests of ours a hub may still verify, by (source, topic): when sent
  // and which mode. A verification is confirmed only while its request is
  // pending (#35: a stranger's GET with a token was confirmed, with any
  // lease).
  std::map<std::pair<std::string, std::string>, std::pair<Clock::time_point, std::string>> asked;
  static constexpr std::chrono::minutes k_verify_within{15};
  std::condition_variable wake;
  bool stopping = false;
  std::thread thread;

  NotifiedRuns runs; // how many runs notifications may start

  // Whether to give this hub a secret: over http a secret travels in the
  // clear (WebSub 5.1: only over https), so "https" signs wherever signing
  // can work.
  bool wants_secret(const std::string& hub) const {
    if (options.sign == "always") {
      return true;
    }
    if (options.sign != "https") {
      return false;
    }
    auto u = sync::parse_url(hub);
    return u && u->scheme == "https";
  }

  // A notification was accepted: run the source now, or when its gap ends.
  void run_notified(const std::string& source) {
    if (runs.notified(source)) {
      hooks.notified(source);
    }
  }

  // Held notifications whose gap has ended, and whose last run reported.
  void release_held() {
    for (const auto& source : runs.release_held()) {
      log::info(source, "push: a notification held back by the gap starts its run now");
      hooks.notified(source);
    }
  }

  // What each source's Capability Lists offered at its last run in this
  // process (a source not run yet keeps what it has).
  std::map<std::string, std::vector<sync::NotificationChannel>> offered;
  std::optional<std::set<std::string>> configured;
  // (source, topic) -> when to ask the hub again, and how often it failed.
  std::mutex tries_mutex; // guards next_try (the callback touches it too) and last_config
  std::map<std::string, sync::SourceConfig> last_config;
  std::map<std::pair<std::string, std::string>, std::pair<Clock::time_point, int>> next_try;
  std::set<std::string> active_sources; // as last told through hooks.active (reconcile only)

  std::string callback_url(const std::string& token) const { return base + "/push/" + token; }

  // ---- asking hubs --------------------------------------------------------

  // POSTs a (un)subscription to the hub through the source's own fetcher
  // (its hosts and allow_hosts only: an upstream document cannot make us
  // POST anywhere else).
  // The source's configuration, or, for a source removed since, the last
  // one seen (its subscriptions are still to be ended at its hub, with its
  // rules).
  std::optional<sync::SourceConfig> config_of(const std::string& source) {
    auto cfg = hooks.source(source);
    std::lock_guard lock(tries_mutex);
    if (cfg) {
      last_config[source] = *cfg;
      return cfg;
    }
    auto it = last_config.find(source);
    return it == last_config.end() ? std::nullopt : std::optional<sync::SourceConfig>(it->second);
  }

  Result<void> ask_hub(const store::PushSubscription& s, const std::string& mode) {
    auto cfg = config_of(s.source);
    if (!cfg) {
      return make_error(ErrorKind::permanent, "source '" + s.source + "' is no longer configured");
    }
    auto ep = sync::EndpointFetcher::create(fetcher, *cfg);
    if (!ep) {
      return tl::unexpected(ep.error());
    }
    std::map<std::string, std::string> form{
        {"hub.mode", mode}, {"hub.topic", s.topic}, {"hub.callback", callback_url(s.token)}};
    if (mode == "subscribe") {
      form["hub.lease_seconds"] = std::to_string(options.lease.count());
      if (!s.secret.empty()) {
        form["hub.secret"] = s.secret;
      }
    }
    {
      std::lock_guard lock(mutex);
      asked[{s.source, s.topic}] = {Clock::now(), mode}; // before the POST: a hub may verify before it answers
    }
    sync::FetchOptions o = (*ep)->base_options();
    o.method = "POST";
    o.content_type = "application/x-www-form-urlencoded";
    o.body = rs::websub::encode_form(form);
    o.max_redirects = 0;
    o.max_body_bytes = 64 * 1024;
    std::string body;
    auto r = (*ep)->fetch(s.hub, o, [&](const char* d, size_t n) {
      body.append(d, std::min(n, size_t(4096) - std::min(body.size(), size_t(4096))));
      return true;
    });
    if (!r) {
      return tl::unexpected(r.error());
    }
    if (r->status < 200 || r->status > 299) {
      for (char& c : body) {
        c = (c == '\n' || c == '\r') ? ' ' : c;
      }
      return make_error(ErrorKind::permanent, "POST " + s.hub + ": HTTP " + std::to_string(r->status) +
                                                  (body.empty() ? "" : ": " + body.substr(0, 200)));
    }
    return {};
  }

  // The hub of a channel whose Capability List entry named none: the
  // topic's Link header (WebSub 4).
  std::string discover_hub(const std::string& source, const std::string& topic) {
    auto cfg = config_of(source);
    if (!cfg) {
      return {};
    }
    auto ep = sync::EndpointFetcher::create(fetcher, *cfg);
    if (!ep) {
      return {};
    }
    sync::FetchOptions o = (*ep)->base_options();
    o.max_body_bytes = 64 * 1024;
    auto r = (*ep)->fetch(topic, o, [](const char*, size_t) { return true; });
    if (!r) {
      return {};
    }
    auto hubs = sync::link_header_targets(r->header("link"), "hub", r->final_url);
    return hubs.empty() ? std::string() : hubs.front();
  }

  void backoff(const store::PushSubscription& s, const std::string& why) {
    std::chrono::seconds wait;
    {
      std::lock_guard lock(tries_mutex);
      auto& [when, failures] = next_try[{s.source, s.topic}];
      ++failures;
      wait = std::chrono::seconds(std::min<int64_t>(int64_t(30) << std::min(failures, 7), 3600));
      when = Clock::now() + wait;
    }
    log::warn(s.source, "push: " + why + "; asked again in " + std::to_string(wait.count()) + " s",
              {{"topic", s.topic}, {"hub", s.hub}});
  }

  void retry_at(const std::pair<std::string, std::string>& key, std::optional<Clock::time_point> when) {
    std::lock_guard lock(tries_mutex);
    if (when) {
      next_try[key] = {*when, 0};
    } else {
      next_try.erase(key);
    }
  }

  bool due(const store::PushSubscription& s) {
    std::lock_guard lock(tries_mutex);
    auto it = next_try.find({s.source, s.topic});
    return it == next_try.end() || Clock::now() >= it->second.first;
  }

  // One pass: subscribe to what is offered, renew what expires, unsubscribe
  // from what is no longer wanted. Never under `mutex`: a hub may verify
  // while we wait for its answer.
  std::string last_read_error; // reconcile() only

  void reconcile() {
    std::map<std::string, std::vector<sync::NotificationChannel>> offers;
    std::optional<std::set<std::string>> sources;
    {
      std::lock_guard lock(mutex);
      offers = offered;
      sources = configured;
    }
    auto have = store->push_subscriptions();
    if (!have) {
      // Once per cause: the database away, this is tried every second.
      if (have.error().message != last_read_error) {
        log::warn("", "push: " + have.error().message);
        last_read_error = have.error().message;
      }
      return;
    }
    last_read_error.clear();
    std::map<std::pair<std::string, std::string>, store::PushSubscription> by_key;
    for (auto& s : *have) {
      by_key[{s.source, s.topic}] = s;
    }
    const auto now = Clock::now();
    // Wanted: offered by a configured source's last run.
    std::map<std::pair<std::string, std::string>, sync::NotificationChannel> wanted;
    if (options.subscribe) {
      for (const auto& [source, channels] : offers) {
        if (sources && !sources->count(source)) {
          continue;
        }
        for (const auto& ch : channels) {
          wanted.emplace(std::make_pair(source, ch.topic), ch);
        }
      }
    }
    for (const auto& [key, ch] : wanted) {
      auto it = by_key.find(key);
      if (it != by_key.end() && it->second.state != "unsubscribing") {
        renew(it->second, key, now);
      } else {
        subscribe(key, ch, it != by_key.end() ? &it->second : nullptr);
      }
    }
    unsubscribe_unwanted(by_key, wanted, offers, sources, now);
    tell_active();
  }

  // A subscription we hold and still want: renewed when its lease nears its
  // end, asked for again when the hub has not confirmed it in a minute.
  void renew(store::PushSubscription& s, const std::pair<std::string, std::string>& key, Clock::time_point now) {
    const bool expiring = s.state == "active" && s.expires_at &&
                          now_ts() + std::chrono::seconds(std::max(s.lease_seconds, 10)) / 5 >= *s.expires_at;
    const bool unconfirmed = s.state == "requested" && now_ts() - s.requested_at > std::chrono::seconds(60);
    if ((!expiring && !unconfirmed) || !due(s)) {
      return;
    }
    s.requested_at = now_ts();
    (void)store->put_push_subscription(s);
    if (auto r = ask_hub(s, "subscribe"); !r) {
      backoff(s, (expiring ? "renewal failed: " : "subscription not confirmed, asked again: ") + r.error().message);
    } else {
      retry_at(key, now + std::chrono::seconds(std::max(s.lease_seconds, 10)) / 10);
      log::info(s.source, expiring ? "push: renewing the subscription" : "push: subscription asked for again",
                {{"topic", s.topic}, {"hub", s.hub}});
    }
  }

  // A channel we want and do not hold (or were leaving: `was`): recorded,
  // then asked of its hub (found by the topic's Link header when the
  // Capability List named none).
  void subscribe(const std::pair<std::string, std::string>& key, const sync::NotificationChannel& ch,
                 const store::PushSubscription* was) {
    store::PushSubscription s;
    s.source = key.first;
    s.topic = ch.topic;
    s.hub = ch.hub;
    if (was) {
      s = *was; // unsubscribing, wanted again
      s.state = "requested";
    } else if (!due(s)) {
      return;
    }
    if (s.hub.empty()) {
      s.hub = discover_hub(s.source, s.topic);
      if (s.hub.empty()) {
        backoff(s, "the channel " + s.topic + " names no hub (neither in the Capability List nor in a Link header)");
        return;
      }
    }
    if (s.token.empty()) {
      s.token = rs::websub::random_hex(16);
      s.secret = wants_secret(s.hub) ? rs::websub::random_hex(24) : std::string();
    }
    s.state = "requested";
    s.requested_at = now_ts();
    // Recorded before the hub is asked: a hub may verify before it answers.
    if (auto r = store->put_push_subscription(s); !r) {
      log::warn(s.source, "push: " + r.error().message);
      return;
    }
    if (auto r = ask_hub(s, "subscribe"); !r) {
      s.last_note = r.error().message;
      (void)store->put_push_subscription(s);
      backoff(s, "subscription refused: " + r.error().message);
    } else {
      retry_at(key, std::nullopt);
      log::info(s.source, "push: subscription requested", {{"topic", s.topic}, {"hub", s.hub},
                                                           {"callback", rs::websub::callback_label(callback_url(s.token))}});
    }
  }

  // Not wanted: the source went from the config, or its last run no
  // longer found the channel.
  void unsubscribe_unwanted(std::map<std::pair<std::string, std::string>, store::PushSubscription>& by_key,
                            const std::map<std::pair<std::string, std::string>, sync::NotificationChannel>& wanted,
                            const std::map<std::string, std::vector<sync::NotificationChannel>>& offers,
                            const std::optional<std::set<std::string>>& sources, Clock::time_point now) {
    for (auto& [key, s] : by_key) {
      const bool known = offers.count(key.first) > 0 || (sources && !sources->count(key.first));
      if (wanted.count(key) || !known || !due(s)) {
        continue;
      }
      if (s.state == "unsubscribing" && now_ts() - s.requested_at > std::chrono::hours(24)) {
        (void)store->remove_push_subscription(s.source, s.topic); // the hub never confirmed: forget it
        continue;
      }
      if (s.state != "unsubscribing") {
        s.state = "unsubscribing";
        s.requested_at = now_ts(); // asked again, with back-off, for a day
        (void)store->put_push_subscription(s);
      }
      if (auto r = ask_hub(s, "unsubscribe"); !r) {
        backoff(s, "unsubscribe failed: " + r.error().message);
      } else {
        retry_at(key, now + std::chrono::minutes(1));
        log::info(s.source, "push: unsubscribing", {{"topic", s.topic}, {"hub", s.hub}});
      }
    }
  }

  // Tells the scheduler which sources have an active subscription.
  void tell_active() {
    std::set<std::string> active;
    if (auto again = store->push_subscriptions()) {
      for (const auto& s : *again) {
        if (s.state == "active" && s.expires_at && *s.expires_at > now_ts()) {
          active.insert(s.source);
        }
      }
    }
    for (const auto& src : active) {
      if (!active_sources.count(src) && hooks.active) {
        hooks.active(src, true);
      }
    }
    for (const auto& src : active_sources) {
      if (!active.count(src) && hooks.active) {
        hooks.active(src, false);
      }
    }
    active_sources = std::move(active);
  }

  void loop() {
    std::unique_lock lock(mutex);
    while (!stopping) {
      lock.unlock();
      release_held();
      try {
        reconcile();
      } catch (const std::exception& e) {
        log::error("", std::string("push: ") + e.what());
      }
      lock.lock();
      wake.wait_for(lock, std::chrono::seconds(1));
    }
  }

  // ---- the callback ------------------------------------------------------

  std::optional<store::PushSubscription> find(const std::string& token) {
    auto all = store->push_subscriptions();
    if (!all) {
      return std::nullopt;
    }
    for (auto& s : *all) {
      if (s.token == token) {
        return std::move(s);
      }
    }
    return std::nullopt;
  }

  void verification(const http::Request& req, http::Response& res, const std::string& token) {
    auto q = rs::websub::parse_form(req.query);
    if (!q) {
      answer(res, 400, "malformed query");
      return;
    }
    const std::string mode = query_value(*q, "hub.mode");
    const std::string topic = query_value(*q, "hub.topic");
    auto s = find(token);
    // Only intents we asked for are confirmed: anything else is 404 (WebSub 5.3).
    if (!s || s->topic != topic) {
      log::warn(s ? s->source : "", "push: refused a verification we did not ask for", {{"mode", mode}, {"topic", topic}});
      answer(res, 404, "no such subscription");
      return;
    }
    // Ours only while a request of ours in that mode is pending.
    const bool pending = [&] {
      std::lock_guard lock(mutex);
      auto it = asked.find({s->source, s->topic});
      return it != asked.end() && Clock::now() - it->second.first <= k_verify_within &&
             (mode == "denied" || it->second.second == mode);
    }();
    if (!pending) {
      log::warn(s->source, "push: refused a verification we did not ask for", {{"mode", mode}, {"state", s->state}});
      answer(res, 404, "not asked for");
      return;
    }
    if (mode == "denied") {
      // What a hub says is shown as text, never as markup or control bytes.
      std::string reason = query_value(*q, "hub.reason").substr(0, 200);
      for (char& c : reason) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u == 0x7f || c == '<' || c == '>' || c == '&' || c == '"' || c == '\'') {
          c = '?';
        }
      }
      s->last_note = "denied by the hub: " + reason;
      (void)store->put_push_subscription(*s);
      backoff(*s, s->last_note);
      answer(res, 200, "noted");
      return;
    }
    const std::string challenge = query_value(*q, "hub.challenge");
    if (challenge.empty() || challenge.size() > 1024) {
      answer(res, 400, "no usable hub.challenge");
      return;
    }
    if (mode == "subscribe" && (s->state == "requested" || s->state == "active")) {
      const std::string lease = query_value(*q, "hub.lease_seconds");
      int seconds = static_cast<int>(options.lease.count());
      if (!lease.empty() && lease.size() <= 9 && lease.find_first_not_of("0123456789") == std::string::npos) {
        // Never longer than we asked for (a hub once granted 999,999,999 s).
        seconds = std::min(std::stoi(lease), static_cast<int>(options.lease.count()));
      }
      s->state = "active";
      s->lease_seconds = seconds;
      s->verified_at = now_ts();
      s->expires_at = now_ts() + std::chrono::seconds(seconds);
      s->last_note.clear();
      (void)store->put_push_subscription(*s);
      retry_at({s->source, s->topic}, std::nullopt);
      log::info(s->source, "push: subscription active", {{"topic", s->topic}, {"lease_seconds", std::to_string(seconds)}});
      wake.notify_all();
    } else if (mode == "unsubscribe" && s->state == "unsubscribing") {
      (void)store->remove_push_subscription(s->source, s->topic);
      log::info(s->source, "push: unsubscribed", {{"topic", s->topic}});
    } else {
      log::warn(s->source, "push: refused a verification we did not ask for", {{"mode", mode}, {"state", s->state}});
      answer(res, 404, "not asked for");
      return;
    }
    {
      std::lock_guard lock(mutex);
      asked.erase({s->source, s->topic});
    }
    res.status = 200;
    res.set_body(challenge, "text/plain");
  }

  // A notification is refused with a note, never with an error the hub
  // would retry: it is answered 2xx either way (WebSub 8: a subscriber
  // that finds the signature wrong still acknowledges).
  void ignore(store::PushSubscription& s, const std::string& why, http::Response& res) {
    ++s.ignored;
    s.last_note = "ignored a notification: " + why;
    (void)store->put_push_subscription(s);
    log::warn(s.source, "push: " + s.last_note, {{"topic", s.topic}});
    answer(res, 202, "ignored");
  }

  void notification(const http::Request& req, http::Response& res, const std::string& token) {
    auto found = find(token);
    if (!found) {
      answer(res, 410, "no such subscription"); // WebSub: the hub stops sending
      return;
    }
    store::PushSubscription& s = *found;
    if (!s.secret.empty()) {
      const auto check = rs::websub::check_signature(req.header("x-hub-signature"), s.secret, req.body);
      if (check != rs::websub::SignatureCheck::valid) {
        ignore(s, std::string(rs::websub::to_string(check)), res);
        return;
      }
    }
    const auto selves = sync::link_header_targets(req.header_value("link"), "self", s.topic);
    if (std::find(selves.begin(), selves.end(), s.topic) == selves.end()) {
      ignore(s, selves.empty() ? "no topic named (Link rel=\"self\")" : "foreign topic " + selves.front().substr(0, 200),
             res);
      return;
    }
    if (req.body.size() > k_max_notification_bytes) {
      ignore(s, "larger than " + std::to_string(k_max_notification_bytes) + " bytes", res);
      return;
    }
    auto parsed = rs::parse_document(req.body);
    const auto& h = parsed.document.header;
    const auto cap = h.md && h.md->capability ? *h.md->capability : std::string();
    if (!parsed.summary.usable() || h.root != rs::RootElement::urlset ||
        (cap != "changelist-notification" && cap != "changelist")) {
      ignore(s, "not a Change Notification (a urlset of capability changelist-notification)", res);
      return;
    }
    // Out of order: nothing in it is newer than what the source's feeds
    // applied already.
    std::optional<rs::Timestamp> newest;
    for (const auto& e : parsed.document.entries) {
      if (auto t = e.change_time(); t && (!newest || *t > *newest)) {
        newest = t;
      }
    }
    std::optional<rs::Timestamp> applied;
    if (auto all = feeds->feeds()) {
      for (const auto& f : *all) {
        if (f.source_name == s.source) {
          if (auto w = watermarks->watermark(f.feed_id); w && w->last_time && (!applied || *w->last_time > *applied)) {
            applied = w->last_time;
          }
        }
      }
    }
    if (!newest || (applied && *newest <= *applied)) {
      ignore(s, newest ? "out of order: its newest change (" + rs::format_w3c_datetime(*newest) +
                             ") is not after what was applied (" + rs::format_w3c_datetime(*applied) + ")"
                       : "it announces no change",
             res);
      return;
    }
    ++s.notifications;
    s.last_notification_at = now_ts();
    (void)store->put_push_subscription(s);
    const std::string source = s.source;
    log::info(source, "push: notification accepted: syncing now",
              {{"changes", std::to_string(parsed.document.entries.size())}, {"newest", rs::format_w3c_datetime(*newest)}});
    run_notified(source);
    answer(res, 202, "accepted");
  }
};

PushSubscriber::PushSubscriber(std::shared_ptr<store::PushStore> store, std::shared_ptr<store::StoreReader> feeds,
                               std::shared_ptr<store::Store> watermarks, std::shared_ptr<sync::Fetcher> fetcher,
                               PushOptions options, Hooks hooks)
    : m_impl(std::make_unique<Impl>()) {
  m_impl->store = std::move(store);
  m_impl->feeds = std::move(feeds);
  m_impl->watermarks = std::move(watermarks);
  m_impl->fetcher = std::move(fetcher);
  m_impl->options = std::move(options);
  m_impl->hooks = std::move(hooks);
  m_impl->base = m_impl->options.public_url;
  while (!m_impl->base.empty() && m_impl->base.back() == '/') {
    m_impl->base.pop_back();
  }
}

PushSubscriber::~PushSubscriber() { stop(); }

void PushSubscriber::start() {
  Impl* impl = m_impl.get();
  m_impl->thread = std::thread([impl] {
    name_thread("push subscriber");
    impl->loop();
  });
}

void PushSubscriber::stop() {
  {
    std::lock_guard lock(m_impl->mutex);
    m_impl->stopping = true;
  }
  m_impl->wake.notify_all();
  if (m_impl->thread.joinable()) {
    m_impl->thread.join();
  }
}

void PushSubscriber::discovered(const std::string& source, const std::vector<sync::NotificationChannel>& channels) {
  {
    std::lock_guard lock(m_impl->mutex);
    auto& have = m_impl->offered[source];
    if (have == channels) {
      return;
    }
    have = channels;
  }
  m_impl->wake.notify_all();
}

void PushSubscriber::ran(const std::string& source, bool applied) { m_impl->runs.ran(source, applied); }

void PushSubscriber::configured(const std::set<std::string>& sources) {
  {
    std::lock_guard lock(m_impl->mutex);
    m_impl->configured = sources;
  }
  m_impl->wake.notify_all();
}

std::string PushSubscriber::callback_path() const {
  const std::string url = m_impl->base + "/push/";
  const size_t scheme = url.find("://");
  const size_t slash = scheme == std::string::npos ? 0 : url.find('/', scheme + 3);
  return url.substr(slash);
}

http::Disposition PushSubscriber::handle(const http::Request& req, http::Response& res, bool can_block) {
  if (!can_block) {
    return http::Disposition::blocking;
  }
  const std::string prefix = callback_path();
  const std::string token = req.path.substr(std::min(prefix.size(), req.path.size()));
  if (token.empty() || token.size() > 64 || token.find_first_not_of("0123456789abcdef") != std::string::npos) {
    answer(res, 404, "no such callback");
    return http::Disposition::done;
  }
  try {
    if (req.method == "GET") {
      m_impl->verification(req, res, token);
    } else if (req.method == "POST") {
      m_impl->notification(req, res, token);
    } else {
      res.set_header("Allow", "GET, POST");
      answer(res, 405, "a WebSub callback takes GET (verification) and POST (notifications)");
    }
  } catch (const std::exception& e) {
    answer(res, 500, std::string("internal error: ") + e.what());
  }
  return http::Disposition::done;
}

Result<std::vector<store::PushSubscription>> PushSubscriber::subscriptions() { return m_impl->store->push_subscriptions(); }

} // namespace tributary::agg

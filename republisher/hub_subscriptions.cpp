// The hub's subscription requests: parsed, capped per client and callback
// host, and verified at the callback (hosts in m_turns) before anything is
// recorded.
#include "republisher/hub_subscriptions.h"

#include "common/stop_and_join.h"
#include "common/thread_name.h"

namespace tributary::pub {

using namespace hub_detail;

HubSubscriptions::~HubSubscriptions() { stop(); }

void HubSubscriptions::start() {
  for (unsigned i = 0; i < std::max(1u, m_options.verification_threads); ++i) {
    m_threads.emplace_back([this] {
      name_thread("hub verifier");
      verifier();
    });
  }
}

void HubSubscriptions::stop() {
  stop_and_join(m_mutex, m_stopping, m_wake, m_threads);
}

auto HubSubscriptions::parse(const http::Request& req) -> std::variant<Intent, std::string> {
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
  auto set = m_urls.notification_set(i.topic);
  {
    if (!set || !m_delivery.shown(*set)) {
      return "hub.topic '" + i.topic.substr(0, 200) + "' is not a topic of this hub";
    }
  }
  i.set = *set;
  i.secret = get("hub.secret");
  if (i.secret.size() > 199) {
    return std::string("hub.secret must be shorter than 200 bytes");
  }
  const std::string lease = get("hub.lease_seconds");
  i.lease = m_options.default_lease;
  if (!lease.empty()) {
    if (lease.size() > 10 || lease.find_first_not_of("0123456789") != std::string::npos) {
      return std::string("hub.lease_seconds must be a number of seconds");
    }
    i.lease = std::clamp(std::chrono::seconds(std::stoll(lease)), m_options.min_lease, m_options.max_lease);
  }
  return i;
}

auto HubSubscriptions::renews(const std::vector<store::HubSubscription>& existing, const Intent& i) -> bool {
  return std::any_of(existing.begin(), existing.end(),
                     [&](const auto& e) { return e.topic == i.topic && e.callback == i.callback; });
}

auto HubSubscriptions::on_host(const std::vector<store::HubSubscription>& existing, const std::string& host) -> size_t {
  return static_cast<size_t>(std::count_if(existing.begin(), existing.end(),
                                           [&](const auto& e) { return host_of(e.callback) == host; }));
}

auto HubSubscriptions::on_domain(const std::vector<store::HubSubscription>& existing, const std::string& domain)
    -> size_t {
  return static_cast<size_t>(std::count_if(existing.begin(), existing.end(), [&](const auto& e) {
    return registrable_domain(host_of(e.callback)) == domain;
  }));
}

auto HubSubscriptions::addresses_of(const std::string& host) -> std::vector<std::string> {
  if (!m_options.resolve || host.empty()) {
    return {};
  }
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(m_resolved_mutex);
    auto it = m_resolved.find(host);
    if (it != m_resolved.end() && now - it->second.first < std::chrono::minutes(5)) {
      return it->second.second;
    }
  }
  std::vector<std::string> out;
  for (const auto& a : m_options.resolve(host)) {
    out.push_back(canonical_host(a));
  }
  std::sort(out.begin(), out.end());
  std::lock_guard lock(m_resolved_mutex);
  if (m_resolved.size() > 100000) {
    m_resolved.clear();
  }
  m_resolved[host] = {now, out};
  return out;
}

auto HubSubscriptions::on_addresses(const std::vector<store::HubSubscription>& existing, const std::string& host) -> size_t {
  const std::vector<std::string> mine = addresses_of(host);
  if (mine.empty()) {
    return 0;
  }
  size_t n = 0;
  for (const auto& e : existing) {
    const std::vector<std::string> theirs = addresses_of(host_of(e.callback));
    n += std::any_of(theirs.begin(), theirs.end(),
                     [&](const std::string& a) { return std::binary_search(mine.begin(), mine.end(), a); })
             ? 1
             : 0;
  }
  return n;
}

auto HubSubscriptions::request(const http::Request& req, http::Response& res) -> void {
  auto parsed = parse(req);
  if (auto* why = std::get_if<std::string>(&parsed)) {
    answer(res, 400, "subscription refused: " + *why);
    return;
  }
  Intent i = std::get<Intent>(std::move(parsed));
  i.client = req.client.empty() ? req.peer : req.client;
  i.callback_host = host_of(i.callback);
  i.callback_domain = registrable_domain(i.callback_host);
  {
    std::lock_guard lock(m_mutex);
    if (m_pending >= m_options.max_pending_verifications) {
      res.set_header("Retry-After", "60");
      answer(res, 503, "too many subscription requests m_waiting for verification; try again later");
      return;
    }
    if (m_pending_by_client[i.client] >= m_options.max_pending_per_client) {
      res.set_header("Retry-After", "60");
      answer(res, 429, "too many of your subscription requests are m_waiting for verification; try again later");
      return;
    }
    if (m_pending_by_host[i.callback_host] >= m_options.max_pending_per_callback_host) {
      res.set_header("Retry-After", "60");
      answer(res, 429, "too many subscription requests for callbacks on that host are m_waiting for "
                       "verification; try again later");
      return;
    }
    ++m_pending;
    ++m_pending_by_client[i.client];
    ++m_pending_by_host[i.callback_host];
    auto& queue = m_waiting[i.callback_host];
    if (queue.empty() && !m_verifying_hosts.count(i.callback_host)) {
      m_turns.push_back(i.callback_host);
    }
    queue.push_back(std::move(i));
  }
  m_wake.notify_all();
  answer(res, 202, "accepted: the callback will be asked to confirm");
}

auto HubSubscriptions::verify(const Intent& i) -> void {
  const std::string challenge = rs::websub::random_hex(16);
  std::map<std::string, std::string> q{{"hub.mode", i.mode}, {"hub.topic", i.topic}, {"hub.challenge", challenge}};
  if (i.mode == "subscribe") {
    q["hub.lease_seconds"] = std::to_string(i.lease.count());
  }
  HubRequest get;
  get.method = "GET";
  get.verification = true;
  get.url = i.callback + (i.callback.find('?') == std::string::npos ? "?" : "&") + rs::websub::encode_form(q);
  auto reply = m_transport(get);
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
    auto r = m_store->remove_hub_subscription(i.topic, i.callback);
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
  (void)m_urls.notification_set(i.topic, &framework);
  if (framework) {
    auto last = m_store->last_framework_seq();
    s.delivered_seq = last ? *last : 0;
  } else {
    // A new subscriber gets the changes from now on.
    s.delivered_seq = m_delivery.shown(i.set).value_or(0);
  }
  std::lock_guard admit(m_admit_mutex);
  auto existing = m_store->hub_subscriptions();
  if (existing && !renews(*existing, i) && on_host(*existing, i.callback_host) >= m_options.max_subscriptions_per_host) {
    log::warn("", "hub: refused, " + who + ": its callback host holds the maximum of " +
                      std::to_string(m_options.max_subscriptions_per_host) + " subscriptions a host may hold");
    return;
  }
  if (existing && !renews(*existing, i) &&
      on_addresses(*existing, i.callback_host) >= m_options.max_subscriptions_per_host) {
    log::warn("", "hub: refused, " + who + ": callbacks on hosts at its callback's address hold the maximum of " +
                      std::to_string(m_options.max_subscriptions_per_host) + " subscriptions a host may hold");
    return;
  }
  if (existing && !renews(*existing, i) &&
      on_domain(*existing, i.callback_domain) >= m_options.max_subscriptions_per_domain) {
    log::warn("", "hub: refused, " + who + ": callbacks under " + i.callback_domain + " hold the maximum of " +
                      std::to_string(m_options.max_subscriptions_per_domain) +
                      " subscriptions a registrable domain may hold");
    return;
  }
  if (existing && existing->size() >= m_options.max_subscriptions &&
      std::none_of(existing->begin(), existing->end(),
                   [&](const auto& e) { return e.topic == i.topic && e.callback == i.callback; })) {
    log::warn("", "hub: refused, " + who + ": the hub holds its maximum of " +
                      std::to_string(m_options.max_subscriptions) + " subscriptions");
    return;
  }
  if (auto r = m_store->put_hub_subscription(s); !r) {
    log::warn("", "hub: " + who + ": " + r.error().message);
    return;
  }
  log::info("", "hub: subscribed", {{"topic", i.topic}, {"callback", rs::websub::callback_label(i.callback)},
                                    {"lease_seconds", std::to_string(i.lease.count())},
                                    {"signed", i.secret.empty() ? "no" : "yes"}});
  m_delivery.wake();
}

auto HubSubscriptions::verifier() -> void {
  std::unique_lock lock(m_mutex);
  while (!m_stopping) {
    if (m_turns.empty()) {
      m_wake.wait(lock);
      continue;
    }
    const std::string host = std::move(m_turns.front());
    m_turns.pop_front();
    auto& queue = m_waiting[host];
    Intent i = std::move(queue.front());
    queue.pop_front();
    if (queue.empty()) {
      m_waiting.erase(host);
    }
    m_verifying_hosts.insert(host);
    lock.unlock();
    try {
      verify(i);
    } catch (const std::exception& e) {
      log::error("", std::string("hub: verification failed: ") + e.what());
    }
    lock.lock();
    m_verifying_hosts.erase(host);
    if (m_waiting.count(host)) {
      m_turns.push_back(host); // its next intent, after the other hosts' m_turns
      m_wake.notify_all();
    }
    --m_pending;
    if (--m_pending_by_client[i.client] == 0) {
      m_pending_by_client.erase(i.client);
    }
    if (--m_pending_by_host[host] == 0) {
      m_pending_by_host.erase(host);
    }
  }
}

} // namespace tributary::pub

#include "tools/simulate/simulated_hub.h"

#include "common/stop_and_join.h"

#include "resourcesync/websub.h"

#include <algorithm>

namespace tributary::agg {

using namespace simulate_detail;

auto SimulatedHub::callback_options() const -> sync::FetchOptions {
  sync::FetchOptions o;
  o.connect_timeout = std::chrono::seconds(5);
  o.read_timeout = std::chrono::seconds(10);
  o.max_redirects = 0;
  o.max_body_bytes = 64 * 1024;
  o.addresses = m_callback_policy;
  return o;
}

auto SimulatedHub::request(const http::Request& req, http::Response& res) -> void {
  auto form = rs::websub::parse_form(req.body);
  auto get = [&](const char* k) {
    auto it = form ? form->find(k) : form->end();
    return form && it != form->end() ? it->second : std::string();
  };
  const std::string mode = get("hub.mode");
  const std::string callback = get("hub.callback");
  if (!form || (mode != "subscribe" && mode != "unsubscribe") || get("hub.topic") != m_source.topic() ||
      (callback.rfind("http://", 0) != 0 && callback.rfind("https://", 0) != 0)) {
    res.status = 400;
    res.set_body("expected hub.mode, hub.topic " + m_source.topic() + " and an http(s) hub.callback\n", "text/plain");
    return;
  }
  {
    std::lock_guard lock(m_mutex);
    if (m_intents.size() >= k_max_intents) {
      res.status = 503;
      res.set_header("Retry-After", "5");
      res.set_body("too many subscription requests waiting to be verified\n", "text/plain");
      return;
    }
    m_intents.push_back(*form);
  }
  m_pushed.notify_all();
  res.status = 202;
}

auto SimulatedHub::push_loop() -> void {
  std::unique_lock lock(m_mutex);
  for (;;) {
    if (m_stopping) {
      return;
    }
    if (!m_intents.empty()) {
      auto form = std::move(m_intents.front());
      m_intents.pop_front();
      lock.unlock();
      verify(form);
      lock.lock();
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    std::string callback;
    Subscriber sub;
    const size_t logged = m_source.changes();
    for (auto it = m_subscribers.begin(); it != m_subscribers.end();) {
      if (it->second.expires < now) {
        it = m_subscribers.erase(it);
        continue;
      }
      if (callback.empty() && it->second.sent < logged && it->second.retry_at <= now) {
        callback = it->first;
        sub = it->second;
      }
      ++it;
    }
    if (callback.empty()) {
      m_pushed.wait_for(lock, std::chrono::milliseconds(200));
      continue;
    }
    lock.unlock();
    auto note = m_source.notification(sub.sent, 1000);
    if (!note) {
      lock.lock();
      continue;
    }
    const size_t upto = note->second;
    const bool ok = post(callback, sub.secret, note->first);
    lock.lock();
    if (auto it = m_subscribers.find(callback); it != m_subscribers.end()) {
      if (ok) {
        it->second.sent = std::max(it->second.sent, upto);
      } else {
        it->second.retry_at = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      }
    }
  }
}

auto SimulatedHub::verify(const std::map<std::string, std::string>& form) -> void {
  auto get = [&](const char* k) {
    auto it = form.find(k);
    return it == form.end() ? std::string() : it->second;
  };
  const std::string callback = get("hub.callback");
  const std::string challenge = rs::websub::random_hex(16);
  const std::string lease = get("hub.lease_seconds").empty() ? "86400" : get("hub.lease_seconds");
  {
    std::lock_guard lock(m_mutex);
    if (get("hub.mode") == "subscribe" && !m_subscribers.count(callback) && m_subscribers.size() >= k_max_subscribers) {
      return; // full: not called, not subscribed
    }
  }
  std::string body;
  const sync::FetchOptions o = callback_options();
  auto r = m_client->fetch(callback + (callback.find('?') == std::string::npos ? "?" : "&") +
                             rs::websub::encode_form({{"hub.mode", get("hub.mode")},
                                                      {"hub.topic", m_source.topic()},
                                                      {"hub.challenge", challenge},
                                                      {"hub.lease_seconds", lease}}),
                         o, [&](const char* d, size_t n) {
                           body.append(d, std::min<size_t>(n, 4096));
                           return body.size() < 4096;
                         });
  if (!r || r->status < 200 || r->status > 299 || body != challenge) {
    return;
  }
  std::lock_guard lock(m_mutex);
  if (get("hub.mode") == "unsubscribe") {
    m_subscribers.erase(callback);
    return;
  }
  if (!m_subscribers.count(callback) && m_subscribers.size() >= k_max_subscribers) {
    return;
  }
  Subscriber& s = m_subscribers[callback];
  const bool renewal = s.expires != std::chrono::steady_clock::time_point{};
  s.secret = get("hub.secret");
  long long seconds = 86400;
  try {
    seconds = std::stoll(lease);
  } catch (const std::exception&) {
  }
  s.expires = std::chrono::steady_clock::now() + std::chrono::seconds(std::clamp(seconds, 1LL, 864000LL));
  if (!renewal) {
    s.sent = m_source.changes(); // changes from now on
  }
}

auto SimulatedHub::post(const std::string& callback, const std::string& secret, const std::string& body) -> bool {
  sync::FetchOptions o = callback_options();
  o.method = "POST";
  o.content_type = "application/xml";
  o.body = body;
  o.headers["Link"] = rs::websub::link_header(m_source.url("/hub"), m_source.topic());
  if (!secret.empty()) {
    o.headers["X-Hub-Signature"] = rs::websub::signature(secret, body);
  }
  auto r = m_client->fetch(callback, o, [](const char*, size_t) { return true; });
  return r && r->status >= 200 && r->status <= 299;
}

SimulatedHub::~SimulatedHub() { stop(); }

void SimulatedHub::start() {
  m_client = sync::make_default_fetcher();
  m_pusher = std::thread([this] { push_loop(); });
}

void SimulatedHub::stop() {
  stop_and_join(m_mutex, m_stopping, m_pushed, m_pusher);
}

void SimulatedHub::wake() { m_pushed.notify_all(); }

} // namespace tributary::agg

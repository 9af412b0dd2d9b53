// The simulated Source's WebSub hub: subscriptions verified, every change
// pushed to the subscribers. A test tool's, bounded all the same.
#include "tools/simulate/simulator_impl.h"

namespace tributary::agg {

using namespace simulate_detail;

auto Simulator::Impl::callback_options() const -> sync::FetchOptions {
  sync::FetchOptions o;
  o.connect_timeout = std::chrono::seconds(5);
  o.read_timeout = std::chrono::seconds(10);
  o.max_redirects = 0;
  o.max_body_bytes = 64 * 1024;
  o.addresses = callback_policy;
  return o;
}

auto Simulator::Impl::hub_request(const http::Request& req, http::Response& res) -> void {
  auto form = rs::websub::parse_form(req.body);
  auto get = [&](const char* k) {
    auto it = form ? form->find(k) : form->end();
    return form && it != form->end() ? it->second : std::string();
  };
  const std::string mode = get("hub.mode");
  const std::string callback = get("hub.callback");
  if (!form || (mode != "subscribe" && mode != "unsubscribe") || get("hub.topic") != topic() ||
      (callback.rfind("http://", 0) != 0 && callback.rfind("https://", 0) != 0)) {
    res.status = 400;
    res.set_body("expected hub.mode, hub.topic " + topic() + " and an http(s) hub.callback\n", "text/plain");
    return;
  }
  {
    std::lock_guard lock(mutex);
    if (intents.size() >= k_max_intents) {
      res.status = 503;
      res.set_header("Retry-After", "5");
      res.set_body("too many subscription requests waiting to be verified\n", "text/plain");
      return;
    }
    intents.push_back(*form);
  }
  pushed.notify_all();
  res.status = 202;
}

auto Simulator::Impl::push_loop() -> void {
  std::unique_lock lock(mutex);
  for (;;) {
    if (push_stop) {
      return;
    }
    if (!intents.empty()) {
      auto form = std::move(intents.front());
      intents.pop_front();
      lock.unlock();
      verify(form);
      lock.lock();
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    std::string callback;
    Subscriber sub;
    for (auto it = subscribers.begin(); it != subscribers.end();) {
      if (it->second.expires < now) {
        it = subscribers.erase(it);
        continue;
      }
      if (callback.empty() && it->second.sent < log.size() && it->second.retry_at <= now) {
        callback = it->first;
        sub = it->second;
      }
      ++it;
    }
    if (callback.empty()) {
      pushed.wait_for(lock, std::chrono::milliseconds(200));
      continue;
    }
    rs::Document d;
    d.header = header("changelist-notification");
    d.header.links.push_back(rs::Link{.rel = "up", .href = url("/capabilitylist.xml")});
    const size_t upto = std::min(log.size(), sub.sent + 1000);
    for (size_t i = sub.sent; i < upto; ++i) {
      d.entries.push_back(change_entry(log[i]));
    }
    lock.unlock();
    const bool ok = post(callback, sub.secret, rs::write_document(d));
    lock.lock();
    if (auto it = subscribers.find(callback); it != subscribers.end()) {
      if (ok) {
        it->second.sent = std::max(it->second.sent, upto);
      } else {
        it->second.retry_at = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      }
    }
  }
}

auto Simulator::Impl::verify(const std::map<std::string, std::string>& form) -> void {
  auto get = [&](const char* k) {
    auto it = form.find(k);
    return it == form.end() ? std::string() : it->second;
  };
  const std::string callback = get("hub.callback");
  const std::string challenge = rs::websub::random_hex(16);
  const std::string lease = get("hub.lease_seconds").empty() ? "86400" : get("hub.lease_seconds");
  {
    std::lock_guard lock(mutex);
    if (get("hub.mode") == "subscribe" && !subscribers.count(callback) && subscribers.size() >= k_max_subscribers) {
      return; // full: not called, not subscribed
    }
  }
  std::string body;
  const sync::FetchOptions o = callback_options();
  auto r = client->fetch(callback + (callback.find('?') == std::string::npos ? "?" : "&") +
                             rs::websub::encode_form({{"hub.mode", get("hub.mode")},
                                                      {"hub.topic", topic()},
                                                      {"hub.challenge", challenge},
                                                      {"hub.lease_seconds", lease}}),
                         o, [&](const char* d, size_t n) {
                           body.append(d, std::min<size_t>(n, 4096));
                           return body.size() < 4096;
                         });
  if (!r || r->status < 200 || r->status > 299 || body != challenge) {
    return;
  }
  std::lock_guard lock(mutex);
  if (get("hub.mode") == "unsubscribe") {
    subscribers.erase(callback);
    return;
  }
  if (!subscribers.count(callback) && subscribers.size() >= k_max_subscribers) {
    return;
  }
  Subscriber& s = subscribers[callback];
  const bool renewal = s.expires != std::chrono::steady_clock::time_point{};
  s.secret = get("hub.secret");
  long long seconds = 86400;
  try {
    seconds = std::stoll(lease);
  } catch (const std::exception&) {
  }
  s.expires = std::chrono::steady_clock::now() + std::chrono::seconds(std::clamp(seconds, 1LL, 864000LL));
  if (!renewal) {
    s.sent = log.size(); // changes from now on
  }
}

auto Simulator::Impl::post(const std::string& callback, const std::string& secret, const std::string& body) -> bool {
  sync::FetchOptions o = callback_options();
  o.method = "POST";
  o.content_type = "application/xml";
  o.body = body;
  o.headers["Link"] = rs::websub::link_header(url("/hub"), topic());
  if (!secret.empty()) {
    o.headers["X-Hub-Signature"] = rs::websub::signature(secret, body);
  }
  auto r = client->fetch(callback, o, [](const char*, size_t) { return true; });
  return r && r->status >= 200 && r->status <= 299;
}

} // namespace tributary::agg

#include "republisher/hub_impl.h"

namespace tributary::pub {

using namespace hub_detail;


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

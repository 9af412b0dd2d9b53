// Room republisher/hub: our WebSub hub's public side. It owns the hub's two
// parts (subscription requests, hub_subscriptions.h; deliveries,
// hub_delivery.h), answers the hub's URL and its topics, and hands what the
// republisher publishes to the deliveries.
#include "republisher/hub.h"

#include "republisher/hub_common.h"
#include "republisher/hub_delivery.h"
#include "republisher/hub_subscriptions.h"

namespace tributary::pub {

using namespace hub_detail;

struct Hub::Impl {
  std::shared_ptr<store::PushStore> store;
  UrlScheme urls;
  HubTransport transport;
  HubOptions options;
  HubDelivery delivery;
  HubSubscriptions subscriptions;
  std::mutex mutex; // guards started
  bool started = false;

  Impl(std::shared_ptr<store::PushStore> s, std::shared_ptr<store::StoreReader> r, UrlScheme u, HubTransport t,
       HubOptions o)
      : store(s), urls(std::move(u)), transport(std::move(t)), options(std::move(o)),
        delivery(s, std::move(r), urls, transport, options), subscriptions(s, urls, transport, options, delivery) {}
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
  m_impl->subscriptions.start();
  m_impl->delivery.start();
}

void Hub::stop() {
  m_impl->subscriptions.stop();
  m_impl->delivery.stop();
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
    m_impl->subscriptions.request(req, res);
    return true;
  }
  // "<base path>/sets/<set>/notification/changelist" (or /framework)
  bool framework = false;
  const std::optional<std::string> set = m_impl->urls.notification_set(m_impl->urls.url_of(req.path), &framework);
  if (!set) {
    return false;
  }
  if (!m_impl->delivery.shown(*set)) {
    return false;
  }
  if (req.method != "GET" && req.method != "HEAD") {
    res.set_header("Allow", "GET, HEAD");
    answer(res, 405, "a topic is read with GET or HEAD; subscribe at " + m_impl->urls.hub());
    return true;
  }
  // WebSub 4: discovery through the topic's Link header.
  const std::string topic =
      framework ? m_impl->urls.framework_notification(*set) : m_impl->urls.change_notification(*set);
  res.set_header("Link", rs::websub::link_header(hub_url(m_impl->urls, m_impl->options), topic));
  answer(res, 200,
         std::string("ResourceSync ") + (framework ? "Framework" : "Change") + " Notification channel of set '" + *set +
             "' (its Capability List: " + m_impl->urls.capability_list(*set) +
             "); subscribe through the WebSub hub " + hub_url(m_impl->urls, m_impl->options));
  return true;
}

void Hub::published(const std::vector<PublishedSet>& sets, int64_t seq) { m_impl->delivery.published(sets, seq); }

void Hub::framework(const std::string& set, const std::string& loc, const std::string& capability,
                    const std::string& change) {
  m_impl->delivery.framework(store::FrameworkEvent{0, set, loc, capability, change, at(Clock::now())});
}

std::string Hub::advertised_hub() const { return hub_url(m_impl->urls, m_impl->options); }

Result<std::vector<store::HubSubscription>> Hub::subscriptions() { return m_impl->store->hub_subscriptions(); }

void notify_framework(const std::shared_ptr<Hub>& hub, const std::string& set, const std::string& loc,
                      const std::string& capability, const std::string& change) {
  if (hub) {
    hub->framework(set, loc, capability, change);
  }
}

} // namespace tributary::pub

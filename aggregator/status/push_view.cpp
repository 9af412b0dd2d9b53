// The status API's push view: our subscriptions at upstream hubs, and our
// hub's subscribers, never with a token or a secret.
#include "aggregator/status/json.h"

#include "resourcesync/datetime.h"
#include "resourcesync/websub.h"

#include <algorithm>
#include <tuple>
#include <vector>

namespace tributary::agg {

using nlohmann::json;

bool read_push(DaemonState& state) {
  if (!state.push_store) {
    return false;
  }
  if (fresh(state.push_read)) {
    return true;
  }
  auto ours = state.push_store->push_subscriptions();
  auto followers = state.push_store->hub_subscriptions();
  if (!ours || !followers) {
    state.push_read.valid = false;
    return false;
  }
  state.push_ours = std::move(*ours);
  state.push_followers = std::move(*followers);
  state.push_read = {std::chrono::steady_clock::now(), true};
  return true;
}

namespace {

std::string opt_iso(const std::optional<rs::Timestamp>& t) {
  return t ? rs::format_w3c_datetime(*t) : std::string();
}

} // namespace

json subscription_json(const store::PushSubscription& s) {
  return {{"source", s.source},
          {"topic", s.topic},
          {"hub", s.hub},
          {"state", s.state},
          {"signed", !s.secret.empty()},
          {"lease_seconds", s.lease_seconds},
          {"expires_at", s.expires_at ? json(opt_iso(s.expires_at)) : json(nullptr)},
          {"verified_at", s.verified_at ? json(opt_iso(s.verified_at)) : json(nullptr)},
          {"last_notification_at",
           s.last_notification_at ? json(opt_iso(s.last_notification_at)) : json(nullptr)},
          {"notifications", s.notifications},
          {"ignored", s.ignored},
          {"last_note", s.last_note.empty() ? json(nullptr) : json(s.last_note)}};
}

json push_json(DaemonState& state, size_t limit) {
  std::lock_guard lock(state.status_mutex);
  if (!read_push(state)) {
    return json(nullptr);
  }
  json ours = json::array();
  for (const auto& s : state.push_ours) {
    ours.push_back(subscription_json(s));
  }
  // The most in need of a look first: failing in a row, then the oldest
  // delivery (never delivered before all), then by callback.
  std::vector<const store::HubSubscription*> order;
  size_t failing = 0;
  for (const auto& s : state.push_followers) {
    order.push_back(&s);
    failing += s.failures > 0 ? 1 : 0;
  }
  const size_t shown = std::min(limit, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(shown), order.end(),
                    [](const store::HubSubscription* a, const store::HubSubscription* b) {
                      if (a->failures != b->failures) {
                        return a->failures > b->failures;
                      }
                      if (a->delivered_at != b->delivered_at) {
                        return !a->delivered_at || (b->delivered_at && *a->delivered_at < *b->delivered_at);
                      }
                      return std::tie(a->callback, a->topic) < std::tie(b->callback, b->topic);
                    });
  order.resize(shown);
  json followers = json::array();
  for (const auto* p : order) {
    const auto& s = *p;
    followers.push_back({{"topic", s.topic},
                         {"callback", rs::websub::callback_label(s.callback)},
                         {"signed", !s.secret.empty()},
                         {"expires_at", rs::format_w3c_datetime(s.expires_at)},
                         {"delivered_seq", s.delivered_seq},
                         {"delivered_at", s.delivered_at ? json(opt_iso(s.delivered_at)) : json(nullptr)},
                         {"deliveries", s.deliveries},
                         {"consecutive_failures", s.failures},
                         {"deliveries_failed", s.failures_total},
                         {"retry_at", s.retry_at ? json(opt_iso(s.retry_at)) : json(nullptr)},
                         {"last_error", s.last_error.empty() ? json(nullptr) : json(s.last_error)}});
  }
  return {{"subscriptions", ours},
          {"subscribers", followers},
          {"subscribers_total", state.push_followers.size()},
          {"subscribers_failing", failing}};
}

} // namespace tributary::agg

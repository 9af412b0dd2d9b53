#pragma once

#include "common/http/server.h"
#include "republisher/documents.h"
#include "republisher/url_scheme.h"
#include "store/push_store.h"
#include "store/store_reader.h"

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

// Our WebSub hub (W3C WebSub, 2018) for ResourceSync Change Notification
// and Framework Notification 1.0.1: each published set has a Change
// Notification channel (its changes) and a Framework Notification channel
// (changes of its documents), whose topics
// its Capability List names with the hub (render_capability_list). A
// subscriber POSTs a subscription to the hub; the hub verifies its intent
// at the callback (the challenge must come back) before it records
// anything, then POSTs each change of the set, as our Change List shows it,
// to the callback: signed with HMAC-SHA256 when the subscriber gave a
// secret, retried with back-off, in order, each change once per subscriber.
//
// Deliveries follow the change log: a subscription is a cursor into it (the
// last seq acknowledged), kept in PostgreSQL, so that neither a restart nor
// a subscriber that is down for a day loses or duplicates a change, and a
// backlog costs no memory (a notification carries up to
// `changes_per_notification` changes). Only changes the set's Change List
// already shows are sent, so that a subscriber that reads the Change List on
// the notification finds them there. One node delivers at a time (a lease
// in the database); any node takes subscriptions.
namespace tributary::pub {

// Outbound HTTP, given by whoever owns the process: the hub knows nothing of
// the network's policy (the daemon refuses callbacks on private addresses
// unless the operator allows their hosts).
struct HubRequest {
  std::string method; // "GET" or "POST"
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string content_type;
  // A verification: short deadlines and a small answer (the challenge).
  bool verification = false;
};
struct HubReply {
  int status = 0;
  std::string body; // at most a few KiB are kept
};
using HubTransport = std::function<Result<HubReply>(const HubRequest&)>;

struct HubOptions {
  // Leases: what a subscriber asks for is kept within [min, max]; none
  // asked: the default.
  std::chrono::seconds default_lease{7 * 86400};
  std::chrono::seconds min_lease{300};
  std::chrono::seconds max_lease{30 * 86400};
  size_t max_subscriptions = 10000;
  // Verifications waiting or under way (a flood of requests is refused
  // with 503), and of those, at most so many from one client address and
  // for one callback host (429 past them: #35, one client's 1,001 requests
  // to callbacks that never answer held every other subscriber off for
  // hours). Each callback host has one verification under way at a time,
  // and hosts take turns, so a host that never answers holds one of the
  // `verification_threads` and delays no other host's intent by more than
  // one verification per host waiting.
  size_t max_pending_verifications = 1000;
  size_t max_pending_per_client = 10;
  size_t max_pending_per_callback_host = 10;
  unsigned verification_threads = 4;
  // Of max_subscriptions, at most so many for callbacks on one host
  // (refused at verification past it: #35, one host took 500 slots in
  // 23.5 s and then 500 POSTs per change).
  size_t max_subscriptions_per_host = 100;
  // ... and at most so many for callbacks under one registrable domain
  // (the Public Suffix List's: a.example.net and b.example.net are one),
  // so that a stranger holding a wildcard DNS name cannot take the whole
  // hub 100 hosts at a time.
  size_t max_subscriptions_per_domain = 300;
  // The addresses a callback host resolves to (the daemon's resolver): the
  // per-host quota also counts by address, so that names pointing at one
  // machine are one host. Unset (unit tests): by name only. Answers are
  // cached for five minutes.
  std::function<std::vector<std::string>(const std::string& host)> resolve;
  size_t changes_per_notification = 1000;
  // A subscriber whose deliveries failed for this long is dropped (it
  // catches up by polling, and may subscribe again).
  std::chrono::seconds give_up{86400};
  // Deliveries: at most `deliveries_per_host` under way to one callback
  // host; a host whose last delivery took longer than `slow_delivery` is
  // served by the `slow_delivery_threads` alone, so slow callbacks never
  // hold the workers a prompt subscriber's notifications need (#35: twenty
  // callbacks answering after 14 s took a genuine subscriber from every 5 s
  // to every 50 s).
  unsigned delivery_threads = 4;
  unsigned slow_delivery_threads = 2;
  size_t deliveries_per_host = 2;
  std::chrono::milliseconds slow_delivery{2000};
  // Publish to this hub instead (an external WebSub hub the operator runs):
  // it is what our Capability Lists and topics name, and every set's
  // notifications are POSTed to it, as to a subscriber of each topic that
  // needs no verification (the operator named it), with the same cursor,
  // retries and signature (`external_hub_secret`, when given).
  std::string external_hub;
  std::string external_hub_secret;
};

class Hub {
public:
  // `store` and `reader` are the hub's own (its threads use them).
  Hub(std::shared_ptr<store::PushStore> store, std::shared_ptr<store::StoreReader> reader, UrlScheme urls,
      HubTransport transport, HubOptions options = {});
  ~Hub();
  Hub(const Hub&) = delete;
  Hub& operator=(const Hub&) = delete;

  // Starts verifying and delivering.
  void start();
  // Stops the threads (stop the server first).
  void stop();

  // Answers POST /hub (subscription requests) and GET/HEAD of a topic (its
  // Link header names the hub and the topic, WebSub 4); false: not a hub
  // URL. May block (the database).
  bool handle(const http::Request& req, http::Response& res);

  // The republisher rendered these sets' Change Lists up to change-log seq
  // `seq`: their subscribers get the changes up to there.
  void published(const std::vector<PublishedSet>& sets, int64_t seq);

  // Framework Notification: one of our documents of `set` changed (a
  // Resource List published again, a Change List part closed, a dump or an
  // archive grown). The delivering node records it for the set's framework
  // channel; other nodes' events are dropped (the same documents change
  // on every node).
  void framework(const std::string& set, const std::string& loc, const std::string& capability,
                 const std::string& change);

  // The hub subscribers are sent to: ours, or the external one.
  std::string advertised_hub() const;

  // For the status API.
  Result<std::vector<store::HubSubscription>> subscriptions();

private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

// Framework Notification through `hub`, when there is one (see
// Hub::framework).
void notify_framework(const std::shared_ptr<Hub>& hub, const std::string& set, const std::string& loc,
                      const std::string& capability, const std::string& change);

} // namespace tributary::pub

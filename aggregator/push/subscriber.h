#pragma once

// Room aggregator/push/: the WebSub subscriber: our subscriptions at upstream
// hubs, kept and renewed, and the notifications that ask for an early run.

#include "common/http/server.h"
#include "resourcesync/datetime.h"
#include "sync_engine/fetcher.h"
#include "sync_engine/source_config.h"
#include "store/push_store.h"
#include "store/store.h"
#include "store/store_reader.h"
#include "sync_engine/sync.h"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

// Our side of ResourceSync Change Notification as a Destination: for each
// channel a source's Capability List offers, a WebSub subscription at its
// hub, with a callback on our public URL (one unguessable token per
// subscription, so that a request to the callback finds the subscription it
// is about, and a forged one finds none).
//
// A notification is a hint, never trusted: it must name the subscription's
// topic (Link rel="self"), carry a valid signature when we gave a secret,
// parse as a Change Notification, and announce a change later than what we
// applied already; then the source runs an incremental sync at once, which
// fetches the Change List and the content and verifies it, in the same
// transactions and watermarks as any run. Anything else is ignored with a
// note. Polling goes on beside it as the safety net, at the longer
// `push.poll_interval` while the subscription is active.
namespace tributary::agg {

struct PushOptions {
  bool subscribe = true;
  // Ask for HMAC-signed notifications (hub.secret): "https" (when the hub
  // is reached over https), "always" or "never".
  std::string sign = "https";
  std::chrono::seconds lease{7 * 86400};
  std::string public_url;
};

class PushSubscriber {
public:
  struct Hooks {
    // The source's configuration, if it is still configured.
    std::function<std::optional<sync::SourceConfig>(const std::string& source)> source;
    // A notification was accepted: sync the source now.
    std::function<void(const std::string& source)> notified;
    // A source's subscription became active (true) or stopped being (false).
    std::function<void(const std::string& source, bool active)> active;
  };
  // `store` and `watermarks` are the subscriber's own store objects.
  PushSubscriber(std::shared_ptr<store::PushStore> store, std::shared_ptr<store::StoreReader> feeds,
                 std::shared_ptr<store::Store> watermarks, std::shared_ptr<sync::Fetcher> fetcher,
                 PushOptions options, Hooks hooks);
  ~PushSubscriber();
  PushSubscriber(const PushSubscriber&) = delete;
  PushSubscriber& operator=(const PushSubscriber&) = delete;

  void start();
  void stop();

  // After a run: the channels its Capability Lists offered now.
  void discovered(const std::string& source, const std::vector<sync::NotificationChannel>& channels);
  // A run of `source` ended; `applied`: it created, updated or deleted
  // something. A notified run that applied nothing widens the gap before
  // the next notification may start one (see push.cpp, Gate).
  void ran(const std::string& source, bool applied);
  // The configured sources changed: subscriptions of the others go.
  void configured(const std::set<std::string>& sources);

  // The path our callbacks live under ("/push/", or below the public URL's
  // path), for mounting.
  std::string callback_path() const;
  // Answers a request to a callback: the hub's verification of intent
  // (GET) or a notification (POST). Blocks (the database).
  http::Disposition handle(const http::Request& req, http::Response& res, bool can_block);

  Result<std::vector<store::PushSubscription>> subscriptions();

private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

} // namespace tributary::agg

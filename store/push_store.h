#pragma once

#include "common/result.h"
#include "resourcesync/datetime.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

// ResourceSync Change Notification over WebSub, kept in the database
// (schema 0012) so that a restart, or another node, loses no subscription:
// those of subscribers to our own hub, and ours to upstream hubs.
namespace tributary::store {

// A subscriber of our hub, for one of our topics. Written once its intent
// was verified.
struct HubSubscription {
  std::string topic;
  std::string callback;
  std::string secret; // empty: deliveries are not signed
  int lease_seconds = 0;
  rs::Timestamp expires_at;
  rs::Timestamp created_at;
  // The change-log seq delivered (acknowledged) up to: deliveries resume
  // after it.
  int64_t delivered_seq = 0;
  std::optional<rs::Timestamp> delivered_at;
  uint64_t deliveries = 0;
  int failures = 0; // consecutive
  uint64_t failures_total = 0;
  std::optional<rs::Timestamp> retry_at;
  std::string last_error;
};

// Our subscription to an upstream hub for one source's topic.
struct PushSubscription {
  std::string source;
  std::string topic;
  std::string hub;
  std::string token;  // in the callback path: finds the subscription
  std::string secret; // empty: none asked for
  std::string state;  // "requested", "active", "unsubscribing"
  int lease_seconds = 0;
  std::optional<rs::Timestamp> expires_at;
  rs::Timestamp requested_at;
  std::optional<rs::Timestamp> verified_at;
  std::optional<rs::Timestamp> last_notification_at;
  uint64_t notifications = 0; // accepted
  uint64_t ignored = 0;       // refused: bad signature, foreign topic, out of order, unreadable
  std::string last_note;
};

// A change of one of our own documents, for Framework Notification.
struct FrameworkEvent {
  int64_t seq = 0;
  std::string set_name;
  std::string loc;
  std::string capability; // of the document: "resourcelist", "changelist", ...
  std::string change;     // "created", "updated", "deleted"
  rs::Timestamp at;
};

class PushStore {
public:
  virtual ~PushStore() = default;

  // ---- our hub --------------------------------------------------------------
  // Adds a verified subscription, or renews one (its lease and secret; its
  // delivery cursor and counters stay): `s.delivered_seq` is used only for
  // a new one.
  virtual Result<void> put_hub_subscription(const HubSubscription& s) = 0;
  // Removes one; false when there was none.
  virtual Result<bool> remove_hub_subscription(const std::string& topic, const std::string& callback) = 0;
  virtual Result<std::vector<HubSubscription>> hub_subscriptions() = 0;
  // A delivery was acknowledged up to `seq` (never moves the cursor back).
  virtual Result<void> hub_delivered(const std::string& topic, const std::string& callback, int64_t seq,
                                     rs::Timestamp at) = 0;
  // A delivery failed: retried from the same cursor at `retry_at`.
  virtual Result<void> hub_delivery_failed(const std::string& topic, const std::string& callback,
                                           rs::Timestamp retry_at, const std::string& error) = 0;
  // Only one node delivers at a time (each change once per subscriber):
  // true while this connection holds the delivery lease. Held until the
  // connection closes.
  virtual Result<bool> lead_hub_delivery() = 0;
  // Framework events: recorded by the delivering node, read per set after
  // a cursor; the newest seq (0: none); those older than `before` go.
  virtual Result<void> add_framework_events(const std::vector<FrameworkEvent>& events) = 0;
  virtual Result<std::vector<FrameworkEvent>> framework_events(const std::string& set, int64_t after_seq,
                                                               size_t limit) = 0;
  virtual Result<int64_t> last_framework_seq() = 0;
  virtual Result<uint64_t> expire_framework_events(rs::Timestamp before) = 0;

  // ---- our subscriptions ----------------------------------------------------
  // Adds or replaces (by source and topic).
  virtual Result<void> put_push_subscription(const PushSubscription& s) = 0;
  virtual Result<bool> remove_push_subscription(const std::string& source, const std::string& topic) = 0;
  virtual Result<std::vector<PushSubscription>> push_subscriptions() = 0;
};

} // namespace tributary::store

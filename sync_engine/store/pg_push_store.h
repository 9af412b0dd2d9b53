#pragma once

#include "sync_engine/store/push_store.h"

#include <memory>
#include <string>

namespace tributary::store {

// PushStore on a PostgreSQL connection of its own (schema 0012); safe to
// share between threads (one statement at a time).
class PgPushStore : public PushStore {
public:
  // Connects and checks the schema version.
  static Result<std::unique_ptr<PgPushStore>> open(const std::string& conninfo);
  ~PgPushStore() override;

  Result<void> put_hub_subscription(const HubSubscription& s) override;
  Result<bool> remove_hub_subscription(const std::string& topic, const std::string& callback) override;
  Result<std::vector<HubSubscription>> hub_subscriptions() override;
  Result<void> hub_delivered(const std::string& topic, const std::string& callback, int64_t seq,
                             rs::Timestamp at) override;
  Result<void> hub_delivery_failed(const std::string& topic, const std::string& callback, rs::Timestamp retry_at,
                                   const std::string& error) override;
  Result<bool> lead_hub_delivery() override;

  Result<void> put_push_subscription(const PushSubscription& s) override;
  Result<bool> remove_push_subscription(const std::string& source, const std::string& topic) override;
  Result<std::vector<PushSubscription>> push_subscriptions() override;

private:
  struct Impl;
  explicit PgPushStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

} // namespace tributary::store

#pragma once

#include "store/archive_store.h"
#include "store/push_store.h"

#include <memory>
#include <string>

namespace tributary::store {

// The tables beside the sync engine's, on a PostgreSQL connection of its
// own: WebSub subscriptions both ways (schema 0012) and archived documents
// (0013). Safe to share between threads (one statement at a time).
class PgAuxStore : public PushStore, public ArchiveStore {
public:
  // Connects and checks the schema version.
  static Result<std::unique_ptr<PgAuxStore>> open(const std::string& conninfo);
  ~PgAuxStore() override;

  Result<void> put_hub_subscription(const HubSubscription& s) override;
  Result<bool> remove_hub_subscription(const std::string& topic, const std::string& callback) override;
  Result<std::vector<HubSubscription>> hub_subscriptions() override;
  Result<void> hub_delivered(const std::string& topic, const std::string& callback, int64_t seq,
                             rs::Timestamp at) override;
  Result<void> hub_delivery_failed(const std::string& topic, const std::string& callback, rs::Timestamp retry_at,
                                   const std::string& error) override;
  Result<bool> lead_hub_delivery() override;
  Result<void> add_framework_events(const std::vector<FrameworkEvent>& events) override;
  Result<std::vector<FrameworkEvent>> framework_events(const std::string& set, int64_t after_seq,
                                                       size_t limit) override;
  Result<int64_t> last_framework_seq() override;
  Result<uint64_t> expire_framework_events(rs::Timestamp before) override;

  Result<void> put_push_subscription(const PushSubscription& s) override;
  Result<bool> remove_push_subscription(const std::string& source, const std::string& topic) override;
  Result<std::vector<PushSubscription>> push_subscriptions() override;

  Result<void> put_archived(const std::vector<ArchivedDocument>& docs) override;
  Result<std::vector<ArchivedDocument>> archived(const std::string& set, const std::string& kind) override;
  Result<std::optional<ArchivedDocument>> archived_document(const std::string& url_path) override;
  Result<uint64_t> expire_archived(rs::Timestamp before) override;

private:
  struct Impl;
  explicit PgAuxStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

} // namespace tributary::store

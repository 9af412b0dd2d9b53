#pragma once

#include "store/archive_store.h"
#include "store/push_store.h"

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace tributary::store {

// The push (WebSub) and archive stores in memory, for unit tests of the hub,
// the push subscriber and the republisher without PostgreSQL. Keeps the
// contract PgAuxStore keeps: a renewed hub subscription keeps its cursor
// and counters, the cursor never moves back, framework events are numbered
// in order, an archived document is recorded once.
class MemoryAuxStore : public PushStore, public ArchiveStore {
public:
  Result<void> put_hub_subscription(const HubSubscription& s) override;
  Result<bool> remove_hub_subscription(const std::string& topic, const std::string& callback) override;
  Result<std::vector<HubSubscription>> hub_subscriptions() override;
  Result<void> hub_delivered(const std::string& topic, const std::string& callback, int64_t seq,
                             rs::Timestamp at) override;
  Result<void> hub_delivery_failed(const std::string& topic, const std::string& callback, rs::Timestamp retry_at,
                                   const std::string& error) override;
  // One process: it always leads.
  Result<bool> lead_hub_delivery() override { return true; }
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
  std::mutex m_mutex;
  std::map<std::pair<std::string, std::string>, HubSubscription> m_hub;   // (topic, callback)
  std::vector<FrameworkEvent> m_events;                                    // by seq
  int64_t m_next_event = 1;
  std::map<std::pair<std::string, std::string>, PushSubscription> m_push; // (source, topic)
  std::map<std::string, ArchivedDocument> m_archived;                     // by url_path
};

} // namespace tributary::store

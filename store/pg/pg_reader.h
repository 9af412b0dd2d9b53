#pragma once

// Room store/pg/pg_reader: PgStore's read side (StoreReader): feeds, resources,
// the change log as the republisher reads it, statistics, the schema version.
// One part of PgStore (pg_store.h), which owns it and forwards to it; works
// through the store's connection (pg_store_internal.h).

#include "store/blob_references.h"
#include "store/shared_dumps.h"
#include "store/store.h"
#include "store/store_reader.h"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace tributary::store {

struct PgStoreConnection;

class PgReadSide {
public:
  explicit PgReadSide(PgStoreConnection& db) : m_db(db) {}

  Result<std::vector<FeedInfo>> feeds();
  Result<std::vector<std::string>> removed_sources();
  Result<std::vector<ResourceRecord>> live_resources(int64_t feed_id, const std::string& after_uri, size_t limit);
  Result<std::optional<ResourceRecord>> resource(int64_t feed_id, const std::string& uri);
  Result<std::vector<LoggedChange>> changes(const std::vector<int64_t>& feed_ids, int64_t after_seq, size_t limit);
  Result<std::vector<ChangedKey>> changed_keys(const std::vector<int64_t>& feed_ids, int64_t after_seq,
                                               int64_t up_to_seq, size_t limit);
  Result<int64_t> last_seq();
  Result<std::vector<SourceStats>> source_stats();
  Result<int> schema_version();

private:
  PgStoreConnection& m_db;
};

} // namespace tributary::store

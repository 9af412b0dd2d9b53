#pragma once

// Room store/pg/pg_history: PgStore's history of each URI as the change log and
// the resources hold it (what the history checker reads). One part of PgStore
// (pg_store.h), which owns it and forwards to it; works through the store's
// connection (pg_store_internal.h).

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

class PgHistory {
public:
  explicit PgHistory(PgStoreConnection& db) : m_db(db) {}

  Result<void> for_each_history(int64_t feed_id, const std::function<void(const UriHistory&)>& fn);

private:
  PgStoreConnection& m_db;
};

} // namespace tributary::store

#pragma once

// Room store/pg/pg_blob_refs: PgStore's blob references (BlobReferences): every
// blob the database names, placed in the bucket or not, for garbage collection
// and migration. One part of PgStore (pg_store.h), which owns it and forwards
// to it; works through the store's connection (pg_store_internal.h).

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

class PgBlobRefs {
public:
  explicit PgBlobRefs(PgStoreConnection& db) : m_db(db) {}

  Result<void> for_each_referenced_blob(const std::function<void(const std::string& sha256)>& fn);
  Result<void> for_each_unplaced_blob(const std::function<void(const std::string& sha256)>& fn);
  Result<void> for_each_placed_blob(const std::function<void(const std::string& sha256)>& fn);
  // The query naming every blob the database refers to (a subquery).
  static const char* referenced_blobs_sql();

private:
  // Streams the one-column result of `query` (blob names) through a cursor.
  Result<void> for_each_blob_of(const std::string& query, const std::function<void(const std::string&)>& fn);
  PgStoreConnection& m_db;
};

} // namespace tributary::store

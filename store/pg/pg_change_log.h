#pragma once

// Room store/pg/pg_change_log: PgStore's change-log retention: what was
// compacted, which feeds moved between two seqs, and the compaction itself. One
// part of PgStore (pg_store.h), which owns it and forwards to it; works through
// the store's connection (pg_store_internal.h).

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

class PgChangeLog {
public:
  explicit PgChangeLog(PgStoreConnection& db) : m_db(db) {}

  Result<std::vector<Compaction>> compactions();
  Result<std::vector<int64_t>> changed_feeds(int64_t after_seq, int64_t up_to_seq);
  Result<uint64_t> compact_change_log(const std::vector<Compaction>& done,
                                      const std::map<std::string, std::vector<int64_t>>& published);

private:
  PgStoreConnection& m_db;
};

} // namespace tributary::store

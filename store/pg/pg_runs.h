#pragma once

// Room store/pg/pg_runs: PgStore's runs and locks: the per-source lease on the
// session connection, the run log (begin, errors, finish, failed runs), its
// pages and its pruning. One part of PgStore (pg_store.h), which owns it and
// forwards to it; works through the store's connection (pg_store_internal.h).

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

class PgRuns {
public:
  explicit PgRuns(PgStoreConnection& db) : m_db(db) {}

  Result<LockAttempt> try_lock_source(int64_t source_id, const std::string& who);
  Result<int64_t> begin_run(int64_t source_id, RunMode mode, RunTrigger trigger);
  Result<void> record_error(int64_t run_id, const std::string& url, const std::string& reason);
  Result<void> finish_run(int64_t run_id, RunStatus status, const std::string& message, RunMode mode);
  Result<int64_t> record_failed_run(int64_t source_id, RunMode mode, Timestamp started, const std::string& message,
                                    RunTrigger trigger);
  Result<RunInfo> run(int64_t run_id);
  Result<std::vector<RunInfo>> recent_runs(const std::string& name, size_t limit);
  Result<std::vector<RunInfo>> runs_page(const std::string& name, int64_t before, size_t limit,
                                         const std::string& status, const std::string& trigger);
  Result<uint64_t> prune_runs(std::chrono::seconds older_than, size_t limit);

private:
  PgStoreConnection& m_db;
};

} // namespace tributary::store

#pragma once

#include "store/blob_references.h"
#include "store/shared_dumps.h"
#include "store/store.h"
#include "store/store_reader.h"
#include "store/pg/migrations.h"
#include "store/pg/pg_budget.h"

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace tributary::store {

struct PgStoreConnection;

// Store over PostgreSQL (libpqxx). Each call borrows a connection of the
// process's pool for its transaction (pg_pool.h); safe to call from several
// threads (calls on one object are serialised). Batches go in through COPY into staging
// tables and one upsert per table.
class PgStore : public Store, public StoreReader, public SharedDumps, public BlobReferences {
public:
  // Connects and checks the schema version (see check_schema).
  static Result<std::unique_ptr<PgStore>> open(const std::string& conninfo);
  ~PgStore() override;

  Result<int64_t> ensure_source(const std::string& name, const std::string& url) override;
  Result<void> set_source_kind(int64_t source_id, const std::string& kind) override;
  Result<void> set_source_clock(int64_t source_id, std::optional<double> ahead_seconds) override;
  Result<int64_t> ensure_feed(int64_t source_id, const std::string& capability_list_url) override;
  Result<Watermark> watermark(int64_t feed_id) override;
  Result<std::unordered_map<std::string, ResourceRecord>>
  resources(int64_t feed_id, const std::vector<std::string>& uris) override;
  Result<bool> holds_any(int64_t feed_id) override;
  Result<void> for_each_history(int64_t feed_id, const std::function<void(const UriHistory&)>& fn) override;
  Result<void> for_each_resource(int64_t feed_id,
                                 const std::function<void(const ResourceRecord&)>& fn) override;
  Result<RunCounters> apply(const Batch& batch) override;
  Result<DeletionOutcome> delete_unseen(int64_t feed_id, int64_t run_id, const std::optional<Watermark>& watermark,
                                        double max_share, bool all_seen = false, const DeferLog& defer = {}) override;
  Result<std::vector<DeletionHold>> confirm_deletions(int64_t source_id) override;
  Result<std::unordered_map<std::string, RetryRecord>> pending_changes(int64_t feed_id,
                                                                       const std::vector<std::string>& uris) override;
  Result<std::vector<RetryRecord>> due_retries(int64_t feed_id, Timestamp now, size_t limit) override;
  Result<std::unique_ptr<Store>> open_session() override;
  Result<LockAttempt> try_lock_source(int64_t source_id, const std::string& who) override;
  Result<int64_t> begin_run(int64_t source_id, RunMode mode, RunTrigger trigger = RunTrigger::cli) override;
  Result<void> record_error(int64_t run_id, const std::string& url, const std::string& reason) override;
  Result<void> finish_run(int64_t run_id, RunStatus status, const std::string& message, RunMode mode) override;
  Result<int64_t> record_failed_run(int64_t source_id, RunMode mode, Timestamp started,
                                    const std::string& message,
                                    RunTrigger trigger = RunTrigger::schedule) override;
  Result<RunInfo> run(int64_t run_id) override;

  Result<std::vector<FeedInfo>> feeds() override;
  Result<std::vector<std::string>> removed_sources() override;
  Result<std::vector<ResourceRecord>> live_resources(int64_t feed_id, const std::string& after_uri,
                                                     size_t limit) override;
  Result<std::optional<ResourceRecord>> resource(int64_t feed_id, const std::string& uri) override;
  Result<std::vector<LoggedChange>> changes(const std::vector<int64_t>& feed_ids, int64_t after_seq,
                                            size_t limit) override;
  Result<std::vector<ChangedKey>> changed_keys(const std::vector<int64_t>& feed_ids, int64_t after_seq,
                                               int64_t up_to_seq, size_t limit) override;
  Result<int64_t> last_seq() override;
  Result<std::vector<SourceStats>> source_stats() override;
  Result<std::vector<RunInfo>> recent_runs(const std::string& name, size_t limit) override;
  // A page of the source's runs, newest first: those before run `before`
  // (0: from the newest), of `status` and `trigger` when not empty.
  Result<std::vector<RunInfo>> runs_page(const std::string& name, int64_t before, size_t limit,
                                         const std::string& status, const std::string& trigger);

  Result<std::optional<ResourceDump>> resource_dump(const std::string& set) override;
  Result<std::vector<std::pair<std::string, ResourceDump>>> resource_dumps() override;
  Result<bool> put_resource_dump(const std::string& set, const ResourceDump& dump,
                                 const std::vector<File>& files) override;
  Result<bool> claim(const std::string& set) override;
  Result<void> release(const std::string& set) override;
  Result<void> put_change_package(const std::string& set, const ChangePackage& p) override;
  Result<std::vector<ChangePackage>> change_packages(const std::string& set) override;
  Result<void> drop_change_packages(const std::string& set, size_t up_to_part) override;
  Result<std::optional<File>> file(const std::string& url_path) override;

  // Retention: removes up to `limit` runs (their errors with them) that
  // finished more than `older_than` ago, except each source's newest
  // succeeded and newest failed run (the status API shows them). Returns
  // how many went; call again while it returns `limit`.
  Result<uint64_t> prune_runs(std::chrono::seconds older_than, size_t limit);
  // Garbage collection: every blob the database names, as of one snapshot:
  // the content of every live resource and of every change the change log
  // still holds (our Change Lists and Change Dump packages are rendered
  // from it), and of every dump package or manifest shared through the
  // bucket (schema 0010). Names may repeat; read through a cursor, in
  // slices.
  Result<void> for_each_referenced_blob(const std::function<void(const std::string& sha256)>& fn) override;
  // Every blob the database names (as above) that content_object (the S3
  // tier, schema 0008) does not place, each once.
  Result<void> for_each_unplaced_blob(const std::function<void(const std::string& sha256)>& fn);
  // The query of every blob the database names (one column, blob_sha256;
  // names may repeat), for collections that join against it.
  static const char* referenced_blobs_sql();
  // Every blob the shared bucket holds (content_object).
  Result<void> for_each_placed_blob(const std::function<void(const std::string& sha256)>& fn) override;
  Result<Timestamp> datestamp_horizon() override;
  Result<std::vector<DatedResource>> dated_resources(const DatedQuery& q) override;
  Result<std::optional<DatedResource>> dated_resource(int64_t feed_id, const std::string& uri) override;
  Result<std::optional<Timestamp>> earliest_datestamp() override;
  Result<std::vector<std::string>> link_targets(const std::vector<int64_t>& feed_ids, const std::string& rel,
                                                size_t limit) override;
  Result<std::vector<Compaction>> compactions() override;
  Result<std::vector<int64_t>> changed_feeds(int64_t after_seq, int64_t up_to_seq) override;
  // Change-log retention (schema/0007): records what each of `done`
  // compacted (a set's row only moves forward), then deletes every
  // change-log row that each set now published over its feed has compacted
  // (a row kept by one set is kept for all). `published`: every set now
  // published, name -> feeds; rows of other sets are dropped. One
  // transaction, with a change notification: replicas drop the parts too.
  // Returns how many change-log rows went.
  Result<uint64_t> compact_change_log(const std::vector<Compaction>& done,
                                      const std::map<std::string, std::vector<int64_t>>& published);
  // The schema version of the database (0: none), on this session's
  // connection.
  Result<int> schema_version();

private:
  // The parts, one room each (pg_runs.h, pg_reader.h, pg_change_log.h,
  // pg_history.h, pg_shared_dumps.h, pg_blob_refs.h); the rows (resources,
  // watermarks, batches, deletions, retries) are pg_store.cpp's own.
  struct Parts;
  explicit PgStore(std::unique_ptr<PgStoreConnection> db);
  // apply()'s batch, under the connection's mutex (apply() then counts its
  // rows for the planner's statistics, pg_planner_stats.h).
  Result<RunCounters> apply_locked(const Batch& b);
  std::unique_ptr<PgStoreConnection> m_db;
  std::unique_ptr<Parts> m_parts;
};

// Reads through store objects of their own, taken in turn: the
// republisher's content lookups, which must not queue behind the sync
// engine's writes on the daemon's main store's lock (a 404 flood once held
// 16 HTTP workers behind batch commits for over 10 s). Their connections
// come from the process's pool, one per call.
class PgReaderPool : public StoreReader {
public:
  static Result<std::shared_ptr<PgReaderPool>> open(const std::string& conninfo, size_t connections);

  // Each call goes to the next connection's store in turn.
  Result<std::vector<FeedInfo>> feeds() override;
  Result<std::vector<std::string>> removed_sources() override;
  Result<std::vector<ResourceRecord>> live_resources(int64_t feed_id, const std::string& after_uri,
                                                     size_t limit) override;
  Result<std::optional<ResourceRecord>> resource(int64_t feed_id, const std::string& uri) override;
  Result<std::vector<LoggedChange>> changes(const std::vector<int64_t>& feed_ids, int64_t after_seq,
                                            size_t limit) override;
  Result<std::vector<ChangedKey>> changed_keys(const std::vector<int64_t>& feed_ids, int64_t after_seq,
                                               int64_t up_to_seq, size_t limit) override;
  Result<int64_t> last_seq() override;
  Result<std::vector<SourceStats>> source_stats() override;
  Result<std::vector<RunInfo>> recent_runs(const std::string& name, size_t limit) override;
  Result<Timestamp> datestamp_horizon() override;
  Result<std::vector<DatedResource>> dated_resources(const DatedQuery& q) override;
  Result<std::optional<DatedResource>> dated_resource(int64_t feed_id, const std::string& uri) override;
  Result<std::optional<Timestamp>> earliest_datestamp() override;
  Result<std::vector<std::string>> link_targets(const std::vector<int64_t>& feed_ids, const std::string& rel,
                                                size_t limit) override;
  Result<std::vector<Compaction>> compactions() override;
  Result<std::vector<int64_t>> changed_feeds(int64_t after_seq, int64_t up_to_seq) override;

private:
  PgStore& next();
  std::vector<std::unique_ptr<PgStore>> m_stores;
  std::atomic<size_t> m_next{0};
};

// The channel every writer of the change log notifies on commit.
inline constexpr const char* k_change_channel = "tributary_changes";

// Calls `on_change`, on a thread of its own, whenever a commit to the change
// log lands, from any process on the database (LISTEN, on the process's
// session connection): serve replicas and daemons beside each other learn of
// changes without polling. Reconnects after a failure (and calls
// `on_change` then, for what it missed).
class PgSession;
class ChangeListener {
public:
  ChangeListener(std::string conninfo, std::function<void()> on_change);
  ~ChangeListener();
  ChangeListener(const ChangeListener&) = delete;
  ChangeListener& operator=(const ChangeListener&) = delete;

private:
  std::shared_ptr<PgSession> m_session;
  uint64_t m_id = 0;
};

} // namespace tributary::store

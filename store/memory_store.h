#pragma once

#include "store/store.h"
#include "store/store_reader.h"

#include <map>
#include <memory>
#include <mutex>

namespace tributary::store {

// The Store contract in memory, for unit tests of code above the store. It
// keeps the same rules as PgStore (a batch applies whole or not at all, one
// upsert per URI per batch) so that the shared contract tests hold for both.
class MemoryStore : public Store, public StoreReader {
public:
  MemoryStore();

  Result<int64_t> ensure_source(const std::string& name, const std::string& url) override;
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
  Result<std::vector<ResourceRecord>> live_resources(int64_t feed_id, const std::string& after_uri,
                                                     size_t limit) override;
  Result<std::optional<ResourceRecord>> resource(int64_t feed_id, const std::string& uri) override;
  Result<std::vector<LoggedChange>> changes(const std::vector<int64_t>& feed_ids, int64_t after_seq,
                                            size_t limit) override;
  Result<std::vector<ChangedKey>> changed_keys(const std::vector<int64_t>& feed_ids, int64_t after_seq,
                                               int64_t up_to_seq, size_t limit) override;
  Result<std::vector<int64_t>> changed_feeds(int64_t after_seq, int64_t up_to_seq) override;
  Result<int64_t> last_seq() override;
  Result<std::vector<SourceStats>> source_stats() override;
  Result<std::vector<RunInfo>> recent_runs(const std::string& name, size_t limit) override;

  // The change log of a feed, in order (for tests).
  std::vector<ChangeRecord> change_log(int64_t feed_id) const;

  struct Data; // shared by sessions

private:
  explicit MemoryStore(std::shared_ptr<Data> data) : m_data(std::move(data)) {}
  std::shared_ptr<Data> m_data; // shared by sessions
};

} // namespace tributary::store

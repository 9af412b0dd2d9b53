#pragma once

#include "common/result.h"
#include "resourcesync/model.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

// The write and read sides of Tributary's state: sources, the feeds (one per
// Capability List followed), resource state, watermarks, the append-only
// change log and sync runs. PgStore implements it over PostgreSQL; callers
// never see database types.
namespace tributary::store {

using rs::Timestamp;

enum class ResourceState { live, deleted };

// What we hold about one resource of a feed.
struct ResourceRecord {
  std::string uri;
  ResourceState state = ResourceState::live;
  std::optional<Timestamp> lastmod;
  std::optional<Timestamp> change_datetime; // upstream change time
  std::optional<uint64_t> length;
  std::vector<rs::HashValue> hashes; // of the bytes we hold (md5, sha-1, sha-256 kept)
  std::optional<std::string> type;
  std::optional<std::string> encoding;
  std::vector<rs::Link> links; // every rs:ln as received
  std::optional<std::string> blob_sha256;
  std::optional<Timestamp> fetched_at;
  // Where the bytes came from: a URL, "blob store", or k_inline_prefix and
  // the document that carried them (an OAI-PMH page: the resource's URI
  // does not serve them, so it is no mirror of them).
  std::optional<std::string> fetched_from;

  bool operator==(const ResourceRecord&) const = default;
};
inline constexpr std::string_view k_inline_prefix = "inline: ";

// One applied change, as it goes into the change log: the change and the
// resource's state after it.
struct ChangeRecord {
  rs::Change change = rs::Change::updated;
  std::optional<Timestamp> upstream_datetime;
  ResourceRecord resource;
};

// How far a feed has been applied. `last_*` identify the last applied change:
// its time, URI and position among entries with that same time in the list.
struct Watermark {
  std::optional<Timestamp> baseline_at;
  std::optional<std::string> change_list_url;
  std::optional<Timestamp> last_time;
  std::string last_uri;
  int64_t last_position = -1;
  // Where a harvest of another kind than ResourceSync goes on (an OAI-PMH
  // list's next page, its token's expiry, the window): the kind's own
  // record, opaque to the store; empty when nothing is under way.
  std::string resume;

  bool operator==(const Watermark&) const = default;
};

struct RunCounters {
  uint64_t created = 0;
  uint64_t updated = 0;
  uint64_t deleted = 0;
  uint64_t unchanged = 0;
  uint64_t failed = 0;
  uint64_t bytes = 0;

  RunCounters& operator+=(const RunCounters& o);
  bool operator==(const RunCounters&) const = default;
};

enum class RunMode { baseline, incremental, audit };
// interrupted: stopped by its process shutting down (SIGTERM): no failure
// of the source's, and not shown as one.
enum class RunStatus { running, succeeded, partial, failed, interrupted };
// Why a run ran: its schedule, a push notification, an operator (the API
// or the status page), the daemon's start (a source's first run after it),
// or `tributary sync` (the command line).
enum class RunTrigger { schedule, push, operator_, startup, cli };
std::string_view to_string(RunMode m);
std::string_view to_string(RunStatus s);
std::string_view to_string(RunTrigger t);
std::optional<RunTrigger> parse_trigger(std::string_view s);

struct RunInfo {
  int64_t id = 0;
  int64_t source_id = 0;
  RunMode mode = RunMode::baseline;
  RunStatus status = RunStatus::running;
  Timestamp started_at;
  std::optional<Timestamp> finished_at;
  RunCounters counters;
  std::string message;
  std::string node; // the process that ran it (node_name()); empty for runs before schema 0009
  std::optional<RunTrigger> trigger; // none for runs before schema 0021
};

// What this process calls itself in the runs it records: the config's
// node_name when set (set_node_name), else "<host> pid <pid>".
std::string node_name();
void set_node_name(std::string name);

// A resource whose content could not be fetched for a lasting reason (every
// location failed, or the bytes did not verify). Later runs retry it until
// one succeeds, an upsert of the URI stores it, or a full listing no longer
// names it (see delete_unseen).
struct RetryRecord {
  std::string uri;
  rs::Entry entry;                          // the upstream's entry (the store keeps it as XML)
  std::optional<rs::Change> change;         // created/updated; none: listed by a baseline/audit
  std::optional<Timestamp> change_datetime; // the upstream change time
  std::string reason;
  int attempts = 1;
  Timestamp next_attempt_at;

  bool operator==(const RetryRecord&) const = default;
};

// What delete_unseen did.
struct DeletionOutcome {
  uint64_t deleted = 0;
  uint64_t logged = 0; // of them, logged now (not taken by `defer`, admitted by the rule)
  uint64_t unseen = 0; // live resources the run did not see
  uint64_t live = 0;   // live resources held before
  bool held = false;   // over the share and not confirmed: nothing deleted
};

// Deletions a baseline did not apply (see Store::delete_unseen).
struct DeletionHold {
  int64_t feed_id = 0;
  std::string capability_list_url;
  uint64_t unseen = 0; // how many the list lacked
  uint64_t live = 0;   // of how many held live
  Timestamp since;     // the first run that held them
  int64_t run_id = 0;  // the newest run that held them
  bool confirmed = false;
};

// Everything one batch changes. Applied in one transaction: resource state,
// change log, the URIs seen by a baseline, the watermark and the run's
// counters commit together or not at all.
struct Batch {
  int64_t feed_id = 0;
  int64_t run_id = 0;
  std::vector<ResourceRecord> upserts; // at most one per URI
  std::vector<ChangeRecord> changes;   // appended to the change log in this order
  std::vector<std::string> seen;       // URIs listed by this run (baseline/audit)
  // Failed resources to retry, added or updated (an upsert of a URI clears
  // its retry: the resource is stored).
  std::vector<RetryRecord> retries;
  std::optional<Watermark> watermark;
  RunCounters counters;
  // Blobs this batch stored that a remote tier (BlobStore::set_remote) is
  // still to receive: uploaded by the committer before the database names
  // them, while the next batch is fetched.
  std::vector<std::string> new_blobs;
  // The engine found none of `upserts` in the store (a first baseline): a
  // store may then write them without asking about each (PgStore: COPY
  // straight into the table). A hint only: the store must still be right
  // when one exists after all.
  bool upserts_new = false;
  // The engine knows that the change log holds no entry for any URI of
  // `changes` (a feed that held nothing, logged nothing, when the run began,
  // and URIs this run has not logged): the store need not look up their
  // last entries for the change log's rule. A promise, unlike upserts_new.
  bool logs_new = false;
};

struct UriHistory; // store/history_check.h

// Offered a change before it is logged: true takes it (the store does not
// log it), false leaves it to the store.
using DeferLog = std::function<bool(const ChangeRecord&)>;

// One source taken for one run (see Store::try_lock_source); released when
// destroyed.
class SourceLease {
public:
  virtual ~SourceLease() = default;
};

struct LockAttempt {
  std::unique_ptr<SourceLease> lease; // null: another run holds the source
  std::string holder;                 // then: who ("tributary run (pid 7 on host), since ...")
};

// The write side (also readable, for the sync engine's own decisions).
class Store {
public:
  virtual ~Store() = default;

  // Id of the source named `name`, created if new (its URL updated if it
  // changed).
  virtual Result<int64_t> ensure_source(const std::string& name, const std::string& url) = 0;
  // Records what the source publishes (SourceStats::kind).
  virtual Result<void> set_source_kind(int64_t source_id, const std::string& kind) {
    (void)source_id;
    (void)kind;
    return {};
  }
  // Records how far ahead of our clock the source dated its changes (none:
  // not beyond its tolerance).
  virtual Result<void> set_source_clock(int64_t source_id, std::optional<double> ahead_seconds) {
    (void)source_id;
    (void)ahead_seconds;
    return {};
  }
  // Id of the feed for this source and Capability List, created if new.
  virtual Result<int64_t> ensure_feed(int64_t source_id, const std::string& capability_list_url) = 0;

  // The feed's watermark; an empty one if it never synced.
  virtual Result<Watermark> watermark(int64_t feed_id) = 0;
  // What we hold for these URIs of the feed (absent URIs are not in the map).
  virtual Result<std::unordered_map<std::string, ResourceRecord>>
  resources(int64_t feed_id, const std::vector<std::string>& uris) = 0;
  // Whether the feed holds any resource, live or deleted, or any change-log
  // entry (true when a store cannot tell cheaply). A run that finds its feed empty holds, from then
  // on, only what it applied: it need not ask the store for the rest.
  virtual Result<bool> holds_any(int64_t feed_id) {
    (void)feed_id;
    return true;
  }
  // Calls `fn` for every resource of the feed (live and deleted), ordered by
  // URI (in the store's collation).
  virtual Result<void> for_each_resource(int64_t feed_id,
                                         const std::function<void(const ResourceRecord&)>& fn) = 0;

  // Applies a batch atomically (see Batch). Its changes are proposals: the
  // store logs those that the change log's rule admits (store/history_rule.h).
  // Returns the counters recorded for the run: created, updated and deleted
  // count the changes logged, by kind; the rest are the batch's.
  virtual Result<RunCounters> apply(const Batch& batch) = 0;
  // Calls `fn` for every URI of the feed that its change log names or that
  // we hold, ordered by URI (in the store's collation): its log entries in
  // order, its state, whether a retry of it waits. The invariant checker's
  // input (store/history_check.h).
  virtual Result<void> for_each_history(int64_t feed_id, const std::function<void(const UriHistory&)>& fn) = 0;
  // Marks every live resource of the feed that `run_id` did not see as
  // deleted, logging each deletion, in one transaction with `watermark`;
  // retries of URIs the run did not see are dropped. The deletions are
  // dated by `watermark->baseline_at` (the list that no longer named them;
  // else now); a resource whose change is later than that is not unseen
  // (the list is older than it) and stays.
  //
  // The mass-deletion guard: when the run did not see more than
  // `max_share` of the live resources (and an operator has not confirmed,
  // see confirm_deletions), nothing is deleted and the feed records the
  // hold instead; the watermark still moves. A run under the share, or a
  // confirmed one, clears the hold. `max_share` >= 1 never holds.
  //
  // `all_seen`: the caller knows the run saw every resource the feed holds
  // (it found the feed empty, and its lease kept other writers out since),
  // so there is none to look for: a baseline of 10,000 spent 3 ms counting
  // them, a million-resource one reads the whole feed.
  //
  // `defer`, when given, is offered each deletion's change first: one it
  // takes is not logged here (a baseline's LogWindow logs it later).
  virtual Result<DeletionOutcome> delete_unseen(int64_t feed_id, int64_t run_id,
                                                const std::optional<Watermark>& watermark, double max_share,
                                                bool all_seen = false, const DeferLog& defer = {}) = 0;
  // An operator's confirmation: the next baseline of each feed of the
  // source that holds deletions applies them whatever their share. Returns
  // the feeds that held deletions (none: nothing to confirm).
  virtual Result<std::vector<DeletionHold>> confirm_deletions(int64_t source_id) = 0;

  // The retries of these URIs of the feed that wait to apply a change
  // (created/updated; not those of a listing), by URI.
  virtual Result<std::unordered_map<std::string, RetryRecord>> pending_changes(int64_t feed_id,
                                                                               const std::vector<std::string>& uris) = 0;
  // Retries of the feed due at `now`, the earliest due first.
  virtual Result<std::vector<RetryRecord>> due_retries(int64_t feed_id, Timestamp now, size_t limit) = 0;

  // An independent session on the same store (PgStore: another database
  // connection), so that one thread can commit a batch while another
  // prepares the next.
  virtual Result<std::unique_ptr<Store>> open_session() = 0;

  // One run per source, across every process on the store: takes the
  // source unless another run holds it (then `lease` is null and `holder`
  // says who). `who` describes this run to others. A lease ends when
  // destroyed or when its process dies. Taking it marks runs of the source
  // still "running" (their process died) as failed.
  virtual Result<LockAttempt> try_lock_source(int64_t source_id, const std::string& who) = 0;

  virtual Result<int64_t> begin_run(int64_t source_id, RunMode mode, RunTrigger trigger = RunTrigger::cli) = 0;
  virtual Result<void> record_error(int64_t run_id, const std::string& url, const std::string& reason) = 0;
  // `mode` is what the run turned out to be (an incremental run of a source
  // never synced baselines first, and is recorded as a baseline).
  virtual Result<void> finish_run(int64_t run_id, RunStatus status, const std::string& message, RunMode mode) = 0;
  // A run that failed before begin_run() could record it (the database
  // could not be reached), recorded failed: started then, finished now.
  virtual Result<int64_t> record_failed_run(int64_t source_id, RunMode mode, Timestamp started,
                                            const std::string& message,
                                            RunTrigger trigger = RunTrigger::schedule) = 0;
  virtual Result<RunInfo> run(int64_t run_id) = 0;
};

} // namespace tributary::store

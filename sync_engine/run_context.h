#pragma once

// Internal to the sync engine: what one run over one source shares between
// its ways of syncing (baseline.cpp, incremental.cpp, change_dump.cpp,
// audit.cpp, refetch.cpp). sync.cpp starts the run and picks the ways.

#include "sync_engine/content_fetch.h"
#include "sync_engine/document_fetch.h"
#include "sync_engine/dump_package.h"
#include "sync_engine/endpoint_fetcher.h"
#include "sync_engine/log_window.h"
#include "sync_engine/pipelined_http.h"
#include "sync_engine/spool.h"
#include "sync_engine/sync.h"
#include "sync_engine/uri_bloom.h"

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace tributary::sync {

class SliceFetch;
class RunContext;
// fetch_all.cpp: the content of a slice of entries, fetched by the run's
// workers (pipelined where the origin allows); RunContext::fetch_all.
std::vector<Result<FetchedContent>> fetch_slice(RunContext& ctx, const std::vector<const rs::Entry*>& entries);

using store::ChangeRecord;
using store::ResourceRecord;
using store::ResourceState;
using store::Watermark;

// ---- entries and what we hold -------------------------------------------------

const std::vector<rs::HashValue>& offered_hashes(const rs::Entry& e);
// Whether what we hold already is what the entry describes: the strongest
// hash offered when we hold that digest, else lastmod (and length).
bool same_content(const ResourceRecord& held, const rs::Entry& e);
// The length and hashes an entry promises, to verify its bytes against.
Expected expected_of(const rs::Entry& e);
// The record for an entry whose bytes we now hold.
ResourceRecord record_for(const rs::Entry& e, const store::BlobInfo& blob, const std::string& served_from,
                          const std::optional<std::string>& response_type);
// The record a change describes without its bytes (an intermediate change
// of a resource changed again later in the same batch, or a deletion).
ResourceRecord record_from_entry(const rs::Entry& e, ResourceState state);

// Reads a spooled document's entries into memory in chunks, handing each
// chunk on; `flush` returns false to stop.
class ChunkHandler : public rs::DocumentHandler {
public:
  ChunkHandler(size_t chunk, std::function<bool(std::vector<rs::Entry>&)> flush)
      : m_chunk(chunk), m_flush(std::move(flush)) {}
  void on_entry(rs::Entry&& e, uint64_t) override;
  // Rejected entries (a bad value) go here, never to `flush`.
  void on_rejected_entry(rs::Entry&& e, uint64_t line, const std::string& reason) override;
  void set_on_rejected(std::function<void(const rs::Entry&, uint64_t, const std::string&)> f) {
    m_on_rejected = std::move(f);
  }
  // The first chunk holds this many entries instead (fewer: the first
  // batch starts sooner).
  void set_first_chunk(size_t n) { m_first = n; }
  // Hands on what is left; false when a flush stopped the reading.
  bool finish();

private:
  void drain();
  size_t m_chunk;
  size_t m_first = 0; // 0: m_chunk
  bool m_flushed = false;
  std::function<bool(std::vector<rs::Entry>&)> m_flush;
  std::vector<rs::Entry> m_pending;
  std::function<void(const rs::Entry&, uint64_t, const std::string&)> m_on_rejected;
  bool m_stopped = false;
};

// Commits batches on a store session of its own in background threads, so
// that the next batch is read, compared and fetched while earlier ones
// commit (measured: the client and PostgreSQL otherwise take turns and
// leave a core idle). A commit has two stages: the batch's blobs made
// durable and named (publish), then the batch applied to the store. Two
// batches may be in flight: one publishing while the one before it
// applies (publish was a quarter of a commit, and the fetch path waited
// for whole commits: bench/RESULTS.md, session 40). Batches are applied
// in the order submitted, each after its own blobs are durable, and none
// after a failure.
class Committer {
public:
  static constexpr size_t k_in_flight = 2;

  Committer(std::unique_ptr<store::Store> session, store::BlobStore& blobs)
      : m_session(std::move(session)), m_blobs(blobs) {}
  ~Committer() { (void)wait(); }
  Committer(const Committer&) = delete;
  Committer& operator=(const Committer&) = delete;

  // Waits until fewer than k_in_flight batches are in flight (returning the
  // first failure, if any, without submitting), then hands this one over;
  // `on_committed` runs after it commits, with the counters the store
  // recorded (the changes it logged).
  // `sealed` are the blobs the batch names that are not yet durable: they
  // are published (BlobStore::publish) before the batch is applied.
  Result<void> submit(std::shared_ptr<const store::Batch> batch, std::vector<store::BlobStore::Writer> sealed,
                      std::function<void(const store::RunCounters&)> on_committed);
  // Waits for every batch in flight; the first failure, or success.
  Result<void> wait();

private:
  // Waits for the oldest batch in flight.
  void wait_oldest();
  // One batch's commit: publish, then apply once `before` (the batch
  // submitted before it, if still in flight) has.
  Result<void> commit(const store::Batch& b, std::vector<store::BlobStore::Writer>& blobs,
                      const std::function<void(const store::RunCounters&)>& done,
                      const std::shared_future<Result<void>>& before);
  // Makes `sealed` durable and names them; what a remote tier is still to
  // receive is appended to `deferred`.
  Result<void> publish(std::vector<store::BlobStore::Writer>& sealed, std::vector<std::string>& deferred,
                       const store::Batch& batch);
  std::unique_ptr<store::Store> m_session;
  store::BlobStore& m_blobs;
  std::deque<std::shared_future<Result<void>>> m_in_flight; // oldest first
  Result<void> m_last;
};

// Where a batch's content comes from: the network (fetch_all) by default,
// or a dump package.
using ContentSource = std::function<std::vector<Result<FetchedContent>>(const std::vector<const rs::Entry*>&)>;

// ---- the run --------------------------------------------------------------------

// One run over one source: its report, the store and blob store, the
// source's fetchers and host policy, the commit pipeline and progress.
class RunContext {
public:
  RunContext(store::Store& st, store::BlobStore& bl, std::shared_ptr<Fetcher> transport,
             std::shared_ptr<HostThrottle> throttle, const std::filesystem::path& tmp_dir, const SourceConfig& source,
             const RunOptions& run_options, SourceReport& rep, ValidatorCache& cache)
      : m_store(st), m_blobs(bl), m_tmp(tmp_dir), m_src(source), m_opt(run_options), m_report(rep),
        m_validators(cache), m_transport(std::move(transport)), m_throttle(std::move(throttle)) {}

  // The source's fetchers and the commit session; false (with an error) when
  // they cannot be had.
  bool setup();

  // An error of the run, naming its URL (the first few are reported, more
  // are stored).
  void error(const std::string& url, const std::string& reason);
  // The same, for an Error: one of ErrorKind::database marks the run as
  // failed for the database (SourceReport::database_unreachable).
  void error(const std::string& url, const Error& e);
  // While alive, what the run applies counts as a baseline's too
  // (SourceReport::baseline).
  struct BaselineScope {
    // An incremental run that baselines (a source never synced, a Change
    // List gone) is recorded as a baseline: what it stored is what the
    // Source holds, not changes it made.
    explicit BaselineScope(RunContext& c) : ctx(c), at(c.report().counters) {
      if (ctx.report().mode == store::RunMode::incremental) {
        ctx.report().mode = store::RunMode::baseline;
      }
    }
    ~BaselineScope() {
      const store::RunCounters& now = ctx.report().counters;
      store::RunCounters d;
      d.created = now.created - at.created;
      d.updated = now.updated - at.updated;
      d.deleted = now.deleted - at.deleted;
      d.unchanged = now.unchanged - at.unchanged;
      d.failed = now.failed - at.failed;
      d.bytes = now.bytes - at.bytes;
      ctx.report().baseline += d;
    }
    BaselineScope(const BaselineScope&) = delete;
    BaselineScope& operator=(const BaselineScope&) = delete;
    RunContext& ctx;
    store::RunCounters at;
  };
  // What the run decided ("re-baselined: ..."), for the report.
  void note(std::string n) { m_report.notes.push_back(std::move(n)); }
  // Reports `h`'s rejected entries as errors of the run (naming the entry's
  // URI or, without one, the document's URL, the line and the reason), and
  // keeps the URIs they name: a baseline counts them as listed, so that one
  // bad value never deletes what we hold.
  void watch_rejections(ChunkHandler& h, const std::string& doc_url);
  // Whether `url` is on one of the source's configured endpoints.
  bool is_source_host(const std::string& url) const;
  // The URIs of rejected entries since the last call.
  std::vector<std::string> take_rejected_uris() { return std::exchange(m_rejected_uris, {}); }
  bool cancelled() const { return m_opt.cancel && m_opt.cancel->load(); }
  void progress(const std::string& doc);

  // Fetches and validates a document of the capability `want`. With
  // `conditional`, a document applied to its end before is asked for with
  // If-None-Match / If-Modified-Since, and may come back not_modified().
  // With `defer_validation`, the document's validation pass runs while it
  // is read (see SpooledDocument): the caller must check_spooled() it
  // before it applies anything of it (hold_commits_until).
  Result<std::unique_ptr<SpooledDocument>> spool(const std::string& url, rs::Capability want,
                                                 bool conditional = false, bool defer_validation = false);
  // What spool() checks once a document's validation pass ended: a usable
  // document of the capability `want` (its diagnostics logged).
  Result<void> check_spooled(const SpooledDocument& doc, rs::Capability want);
  // The next commit() first runs `check` (once), and fails without
  // committing if it fails: a batch read from a document still being
  // validated waits for the verdict.
  void hold_commits_until(std::function<Result<void>()> check);
  // Runs the held check now, if any (before anything is applied other than
  // by commit()).
  Result<void> pass_commit_gate();
  // Logs what reading a document found (deviations read, values dropped,
  // entries rejected), naming the source, the document and the line.
  void log_diagnostics(const SpooledDocument& d);
  // Records a document's validators once it was applied to its end.
  void remember_validators(const SpooledDocument& d, std::vector<std::string> parts = {});

  // Fetches the content of several entries in parallel (the source's
  // concurrency), each from its mirrors in `pri` order then its loc, within
  // the host policy; every blob is published (durable) before this returns.
  std::vector<Result<FetchedContent>> fetch_all(const std::vector<const rs::Entry*>& entries);
  // Takes the sealed blobs of `results` for the next commit(), whose
  // committer makes them durable with one sync and names them before it
  // applies the batch (off this thread: the syncs overlap the next fetch).
  void stage_sealed(std::vector<Result<FetchedContent>>& results);
  // A stored blob the next commit() names without publishing it (a
  // deduplicated fetch): a remote tier receives it first.
  void will_name(const std::string& sha256);

  // Hands the batch to the committer. Until it commits, lookups of the next
  // batch may not see it, so its resource states are kept as an overlay.
  Result<void> commit(store::Batch& batch);
  // Waits until every submitted batch is committed.
  Result<void> drain();
  // The feed's watermark once every submitted batch has committed.
  Result<Watermark> settled_watermark(int64_t feed);
  // What the store holds for these URIs, as it will be once the batch in
  // flight commits.
  Result<std::unordered_map<std::string, ResourceRecord>> held_for(int64_t feed,
                                                                   const std::vector<std::string>& uris);
  // Whether this run found the feed empty (held_for) and so saw every
  // resource it now holds (Store::delete_unseen's all_seen).
  bool all_seen(int64_t feed) const;
  // Whether the change log holds nothing for `changes`' URIs: this run
  // found the feed empty (no resource, no log entry) and has committed none
  // of them since (Batch::logs_new).
  bool never_logged(int64_t feed, const std::vector<ChangeRecord>& changes) const;
  // The window a baseline's log entries are deferred to while a Change
  // List is followed (null: none; see log_window.h and sync.cpp).
  LogWindow* log_window() const { return m_log_window; }
  void set_log_window(LogWindow* w) { m_log_window = w; }
  // The changes of these URIs waiting as retries (Store::pending_changes),
  // as they will be once the batch in flight commits.
  Result<std::unordered_map<std::string, store::RetryRecord>> pending_for(int64_t feed,
                                                                          const std::vector<std::string>& uris);

  // A resource whose content failed, to retry later (see store::RetryRecord):
  // after refetch_backoff, doubling per attempt up to a day.
  store::RetryRecord retry_for(const rs::Entry& e, std::optional<rs::Change> change,
                               std::optional<rs::Timestamp> time, const std::string& reason,
                               int attempts = 1) const;

  // What the run works with.
  store::Store& store() const { return m_store; }
  store::BlobStore& blobs() const { return m_blobs; }
  const std::filesystem::path& tmp() const { return m_tmp; }
  const SourceConfig& src() const { return m_src; }
  const RunOptions& opt() const { return m_opt; }
  // What the run reports (its status, counters, findings), filled as it goes.
  SourceReport& report() const { return m_report; }
  ValidatorCache& validators() const { return m_validators; }
  // Documents: retried with backoff, rate-limited (after setup()).
  const std::shared_ptr<Fetcher>& fetcher() const { return m_fetcher; }
  // The source's headers and credentials (after setup()).
  const FetchOptions& fetch_options() const { return m_fetch_options; }
  int64_t source_id() const { return m_source_id; }
  void set_source_id(int64_t id) { m_source_id = id; }
  int64_t run_id() const { return m_run_id; }
  void set_run_id(int64_t id) { m_run_id = id; }

  // Progress: entries in the documents known so far, and applied; the
  // rate counts from the last restart (a phase of the run begins).
  void add_total(uint64_t n) { m_total += n; }
  void add_done(uint64_t n) { m_done += n; }
  void restart_progress() { m_progress_start = std::chrono::steady_clock::now(); }

private:
  store::Store& m_store;
  store::BlobStore& m_blobs;
  std::filesystem::path m_tmp;
  const SourceConfig& m_src;
  const RunOptions& m_opt;
  SourceReport& m_report;
  ValidatorCache& m_validators;
  std::shared_ptr<Fetcher> m_fetcher;
  FetchOptions m_fetch_options;
  int64_t m_source_id = 0;
  int64_t m_run_id = 0;
  uint64_t m_done = 0;
  uint64_t m_total = 0;
  std::chrono::steady_clock::time_point m_progress_start = std::chrono::steady_clock::now();
  friend class SliceFetch; // fetch_all.cpp: a slice's workers use the host policy and the fetchers
  std::vector<std::string> m_rejected_uris;
  LogWindow* m_log_window = nullptr;
  bool host_allowed(const std::string& url, const rs::Entry& e, std::string& why) const;
  // The same for `url` parsed already as `u`.
  bool host_allowed(const Url& u, const std::string& url, const rs::Entry& e, std::string& why) const;
  // The pipelined path for `e`'s content (and its request target), or null
  // when it goes the ordinary way (fetch_all.cpp).
  PipelinedOrigin* pipeline_for(const rs::Entry& e, std::string& target);

  std::shared_ptr<Fetcher> m_transport;
  std::shared_ptr<HostThrottle> m_throttle;
  std::shared_ptr<EndpointFetcher> m_endpoint;
  std::shared_ptr<Fetcher> m_content_fetcher; // one try per location per round
  std::unique_ptr<Committer> m_committer;
  std::function<Result<void>()> m_commit_gate; // hold_commits_until
  // The batches in flight (oldest first; the committer holds at most
  // Committer::k_in_flight), with their records and retries by URI: what
  // the store may not show yet.
  struct InFlight {
    std::shared_ptr<const store::Batch> batch;
    std::unordered_map<std::string_view, const ResourceRecord*> overlay;
    // Its retries: a change waiting, or none (null: cleared).
    std::unordered_map<std::string_view, const store::RetryRecord*> retry_overlay;
  };
  std::deque<InFlight> m_in_flight;
  // By feed, once held_for first asked: for a feed that then held nothing,
  // the URIs this run has committed to it since (nullopt: it held some).
  // The source's lease keeps every other writer out of its feeds, so the
  // store holds none of the rest: a first baseline asked the store about
  // each batch's 1,000 URIs for nothing, 1-6 ms a batch.
  std::map<int64_t, std::optional<UriBloom>> m_fresh_feeds;
  std::mutex m_counters_mutex;
  // Blobs published for the next commit() that a remote tier is still to
  // receive (Batch::new_blobs).
  std::mutex m_uploads_mutex;
  std::vector<std::string> m_pending_uploads;
  // Sealed blobs for the next commit() to publish (stage_sealed).
  std::vector<store::BlobStore::Writer> m_sealed;
  std::mutex m_pipelines_mutex;
  std::map<std::string, std::unique_ptr<PipelinedOrigin>> m_pipelines; // by origin
  std::set<std::string> m_pipeline_warned;
};

// A document of a kind that is not ResourceSync (an OAI-PMH page, a Change
// Discovery page), fetched whole into memory (at most `max_bytes`) through
// the source's fetcher: retried with back-off, Retry-After honoured, the
// host policy applied. A non-2xx status is an error.
Result<std::string> fetch_body(RunContext& ctx, const std::string& url, uint64_t max_bytes);

// ---- the ways of syncing a feed, one file each -------------------------------------

// baseline.cpp: from the Resource List (or index), or from the Resource Dump
// (or index); both end by deleting what was not listed and starting the
// watermark at the list's `at`.
Result<void> baseline_from_list(RunContext& ctx, int64_t feed, const std::string& rl_url);
// The same from a Resource List (or index) spooled already; with
// `remember`, its validators (and its parts') are kept for the next poll.
Result<void> baseline_from_spooled(RunContext& ctx, int64_t feed, std::unique_ptr<SpooledDocument> doc,
                                   bool remember);
// How far before a Resource List's `at` the Change List is applied after a
// baseline (see close_baseline): 15 minutes, which covers a Source that
// stamps `at` when it has finished writing a list of about a million
// entries; `completed` stretches it when the list says it took longer.
inline constexpr std::chrono::minutes k_list_overlap{15};
// The time up to which a feed's changes are known to be held: the
// watermark's, or, when no change was applied since a baseline, the list's
// `at` (the watermark then starts the overlap before it). A Change List
// that starts after it is a gap in the history; one that starts within the
// overlap is not.
std::optional<rs::Timestamp> applied_through(const Watermark& w);

// list_poll.cpp: a Source that offers no Change List (a Resource List alone,
// or a plain sitemap) followed at every run. The list is asked for with
// If-None-Match / If-Modified-Since: unchanged, it costs one request;
// changed, it is compared with what we hold (lastmod, hash, length), what
// was created or updated is fetched, what it no longer lists is deleted
// through the mass-deletion guard, and each change is logged as if a
// Change List had said it.
Result<void> poll_list(RunContext& ctx, int64_t feed, const std::string& rl_url);
Result<void> baseline_from_dump(RunContext& ctx, int64_t feed, const std::string& rd_url);

// incremental.cpp: the Change List (or index), strictly after the watermark;
// a gap in the history is bridged by the Change List Archive `cla_url`
// when it still holds the lists in between, else re-baselines from
// `rl_url`.
Result<void> incremental_from_list(RunContext& ctx, int64_t feed, const std::string& cl_url,
                                   const std::string& rl_url, const std::string& cla_url = {});


// change_dump.cpp: catch-up from the Change Dump (or index).
// `cda_url`: the Source's Change Dump Archive, read when the Change Dump
// starts after the last change applied.
Result<void> incremental_from_dump(RunContext& ctx, int64_t feed, const std::string& cd_url,
                                   const std::string& cda_url = {});

// A list or dump an archive names, with its span.
struct ArchivedSpan {
  std::string url;
  rs::Timestamp from;
  rs::Timestamp until;
};
// incremental.cpp: the documents of the archive at `archive_url` (of
// capability `kind`) that end at or after `since`, ordered by `from`.
Result<std::vector<ArchivedSpan>> archived_spans(RunContext& ctx, const std::string& archive_url,
                                                 rs::Capability kind, rs::Timestamp since);
// Whether `archived` (ordered) reaches from `since` to `to` without a gap.
bool bridges(const std::vector<ArchivedSpan>& archived, rs::Timestamp since, rs::Timestamp to);

// dump_source.cpp: what the two dump ways share.
// The package entries of a Resource or Change Dump (or of every part of its
// index), locs made absolute; parts of an index that end before
// `skip_before` are not fetched.
Result<std::vector<rs::Entry>> dump_packages(RunContext& ctx, const std::string& url, rs::Capability kind,
                                             std::optional<rs::Timestamp>& at,
                                             std::optional<rs::Timestamp> skip_before = std::nullopt);
// A package downloaded (verified against the dump's rs:md) and opened
// (checked whole); the file goes when this does.
struct OpenedPackage {
  std::filesystem::path file;
  std::unique_ptr<DumpPackage> package;
  OpenedPackage() = default;
  OpenedPackage(OpenedPackage&&) = default;
  ~OpenedPackage();
};
Result<OpenedPackage> open_package(RunContext& ctx, const rs::Entry& pkg, rs::Capability manifest_kind);
// The same without the notes (its warnings stay in the package): reads
// only the context's fetcher, fetch options and temporary folder, so it
// may run on another thread while the run goes on.
Result<OpenedPackage> fetch_package(const RunContext& ctx, const rs::Entry& pkg, rs::Capability manifest_kind);
// Notes the warnings opening the package met (open_package does).
void note_warnings(RunContext& ctx, const OpenedPackage& opened);
// Extracts the entries `wanted` from a package and publishes their blobs: a
// ContentSource for the batch functions.
std::vector<Result<FetchedContent>> extract_entries(RunContext& ctx, const DumpPackage& package,
                                                    const std::vector<const rs::Entry*>& wanted,
                                                    const std::function<size_t(const rs::Entry*)>& index_of);

// audit.cpp: counts against the Resource List; with repair, a baseline.
Result<void> audit(RunContext& ctx, int64_t feed, const std::string& rl_url);

// refetch.cpp: the feed's resources whose content failed before, when due.
Result<void> retry_failed(RunContext& ctx, int64_t feed);

} // namespace tributary::sync

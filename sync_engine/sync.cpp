#include "sync_engine/sync.h"

#include "common/text.h"
#include "resourcesync/writer.h"
#include "sync_engine/content_fetch.h"
#include "sync_engine/discovery.h"
#include "sync_engine/document_fetch.h"
#include "sync_engine/dump_package.h"
#include "sync_engine/endpoint_fetcher.h"
#include "sync_engine/spool.h"
#include "sync_engine/url_resolve.h"

#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <iomanip>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <unordered_set>

namespace tributary::sync {

namespace {

using store::ChangeRecord;
using store::ResourceRecord;
using store::ResourceState;
using store::Watermark;

constexpr size_t k_max_reported_errors = 20;
constexpr size_t k_max_stored_errors = 1000;

std::string origin_of(const std::string& url) {
  auto u = parse_url(url);
  return u ? u->origin() : std::string();
}

const std::vector<rs::HashValue>& offered_hashes(const rs::Entry& e) {
  static const std::vector<rs::HashValue> k_none;
  return e.md ? e.md->hash : k_none;
}

// Whether what we hold already is what the entry describes: the strongest
// hash offered when we hold that digest, else lastmod (and length).
bool same_content(const ResourceRecord& held, const rs::Entry& e) {
  if (held.state != ResourceState::live || !held.blob_sha256) {
    return false;
  }
  const std::optional<uint64_t> length = e.md ? e.md->length : std::nullopt;
  if (length && held.length && *length != *held.length) {
    return false;
  }
  if (const rs::HashValue* want = rs::strongest_hash(offered_hashes(e))) {
    for (const auto& h : held.hashes) {
      if (h.algorithm == want->algorithm) {
        return h.hex == want->hex;
      }
    }
  }
  if (e.lastmod && held.lastmod) {
    return *e.lastmod == *held.lastmod;
  }
  return false;
}

Expected expected_of(const rs::Entry& e) {
  Expected x;
  if (e.md) {
    x.length = e.md->length;
    x.hashes = e.md->hash;
  }
  return x;
}

// The record for an entry whose bytes we now hold.
ResourceRecord record_for(const rs::Entry& e, const BlobInfo& blob, const std::string& served_from,
                          const std::optional<std::string>& response_type) {
  ResourceRecord r;
  r.uri = e.loc;
  r.state = ResourceState::live;
  r.lastmod = e.lastmod;
  r.change_datetime = e.change_time();
  r.length = blob.length;
  r.hashes = blob.hashes;
  r.type = e.md && e.md->type ? e.md->type : response_type;
  r.encoding = e.md ? e.md->encoding : std::nullopt;
  r.links = e.links;
  r.blob_sha256 = blob.sha256;
  r.fetched_at = std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
  r.fetched_from = served_from;
  return r;
}

// The record a change describes without its bytes (an intermediate change
// of a resource changed again later in the same batch, or a deletion).
ResourceRecord record_from_entry(const rs::Entry& e, ResourceState state) {
  ResourceRecord r;
  r.uri = e.loc;
  r.state = state;
  r.lastmod = e.lastmod;
  r.change_datetime = e.change_time();
  if (e.md) {
    r.length = e.md->length;
    r.hashes = e.md->hash;
    r.type = e.md->type;
    r.encoding = e.md->encoding;
  }
  r.links = e.links;
  return r;
}

// Reads a spooled document's entries into memory in chunks, handing each
// chunk on; used for index children and change lists.
class ChunkHandler : public rs::DocumentHandler {
public:
  ChunkHandler(size_t chunk, std::function<bool(std::vector<rs::Entry>&)> flush)
      : m_chunk(chunk), m_flush(std::move(flush)) {}
  void on_entry(rs::Entry&& e, uint64_t) override {
    if (m_stopped) {
      return;
    }
    m_pending.push_back(std::move(e));
    if (m_pending.size() >= m_chunk) {
      drain();
    }
  }
  bool finish() {
    if (!m_stopped && !m_pending.empty()) {
      drain();
    }
    return !m_stopped;
  }

private:
  void drain() {
    if (!m_flush(m_pending)) {
      m_stopped = true;
    }
    m_pending.clear();
  }
  size_t m_chunk;
  std::function<bool(std::vector<rs::Entry>&)> m_flush;
  std::vector<rs::Entry> m_pending;
  bool m_stopped = false;
};

// Commits batches on a store session of its own in a background thread, one
// batch in flight at a time, so that the next batch is read, compared and
// fetched while the previous one commits (measured: the client and
// PostgreSQL otherwise take turns and leave a core idle).
class Committer {
public:
  Committer(std::unique_ptr<store::Store> session, BlobStore& blobs) : m_session(std::move(session)), m_blobs(blobs) {}
  ~Committer() { (void)wait(); }
  Committer(const Committer&) = delete;
  Committer& operator=(const Committer&) = delete;

  // Waits for the batch in flight (returning its failure, if any, without
  // submitting), then hands this one over; `on_committed` runs after it
  // commits.
  Result<void> submit(store::Batch batch, std::function<void(const store::Batch&)> on_committed) {
    if (auto prev = wait(); !prev) {
      return prev;
    }
    m_future = std::async(std::launch::async, [this, b = std::move(batch), done = std::move(on_committed)]() {
      if (auto r = m_blobs.sync_directories(); !r) {
        return r;
      }
      auto r = m_session->apply(b);
      if (r && done) {
        done(b);
      }
      return r;
    });
    return {};
  }

  // Waits for the batch in flight; its result (or the last one's).
  Result<void> wait() {
    if (m_future.valid()) {
      m_last = m_future.get();
    }
    return m_last;
  }

private:
  std::unique_ptr<store::Store> m_session;
  BlobStore& m_blobs;
  std::future<Result<void>> m_future;
  Result<void> m_last;
};

struct ListRef {
  std::string url;
  std::optional<rs::Timestamp> from;
  std::optional<rs::Timestamp> until;
};

// One run over one source.
class SourceRun {
public:
  SourceRun(store::Store& st, BlobStore& blobs, std::shared_ptr<Fetcher> transport,
            std::shared_ptr<HostRateLimiter> limiter, const std::filesystem::path& tmp, const SourceConfig& src,
            const RunOptions& opt, SourceReport& report, ValidatorCache& validators)
      : m_store(st), m_blobs(blobs), m_transport(std::move(transport)), m_limiter(std::move(limiter)), m_tmp(tmp),
        m_src(src), m_opt(opt), m_report(report), m_validators(validators) {}

  void execute() {
    const auto started = std::chrono::steady_clock::now();
    m_report.source = m_src.name;
    m_report.mode = m_opt.mode;
    auto sid = m_store.ensure_source(m_src.name, m_src.url);
    if (!sid) {
      error(m_src.url, sid.error().message);
      m_report.status = store::RunStatus::failed;
      return;
    }
    m_source_id = *sid;
    auto rid = m_store.begin_run(m_source_id, m_opt.mode);
    if (!rid) {
      error(m_src.url, rid.error().message);
      m_report.status = store::RunStatus::failed;
      return;
    }
    m_report.run_id = m_run_id = *rid;
    bool ok = setup() && run_feeds();
    m_report.status = !ok                         ? store::RunStatus::failed
                      : m_report.counters.failed ? store::RunStatus::partial
                                                  : store::RunStatus::succeeded;
    m_report.duration =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
    std::string message = format_counters(m_report.counters);
    for (const auto& n : m_report.notes) {
      message += "; " + n;
    }
    if (!m_report.errors.empty()) {
      message += "; first error: " + m_report.errors.front();
    }
    (void)m_store.finish_run(m_run_id, m_report.status, message);
  }

private:
  // ---- plumbing -------------------------------------------------------------

  void error(const std::string& url, const std::string& reason) {
    ++m_report.error_count;
    const std::string line = url.empty() || reason.find(url) != std::string::npos ? reason : url + ": " + reason;
    if (m_report.errors.size() < k_max_reported_errors) {
      m_report.errors.push_back(line);
    }
    if (m_run_id != 0 && m_report.error_count <= k_max_stored_errors) {
      (void)m_store.record_error(m_run_id, url, reason);
    }
  }

  void note(std::string n) { m_report.notes.push_back(std::move(n)); }

  bool setup() {
    auto ep = EndpointFetcher::create(m_transport, m_src);
    if (!ep) {
      error(m_src.url, ep.error().message);
      return false;
    }
    m_endpoint = *ep;
    auto session = m_store.open_session();
    if (!session) {
      error(m_src.url, session.error().message);
      return false;
    }
    m_committer = std::make_unique<Committer>(std::move(*session), m_blobs);
    m_fetcher = std::make_shared<RetryingFetcher>(m_endpoint, m_opt.retry, m_limiter);
    // Content: each location once per round (a failing mirror must not cost
    // a full backoff before the next one is tried); rounds are retried below.
    RetryPolicy once = m_opt.retry;
    once.max_attempts = 1;
    m_content_fetcher = std::make_shared<RetryingFetcher>(m_endpoint, once, m_limiter);
    m_options = m_endpoint->base_options();
    m_source_is_file = m_src.url.rfind("file:", 0) == 0;
    for (const auto& h : m_src.allow_hosts) {
      m_allowed_hosts.insert(to_lower(h));
    }
    return true;
  }

  bool host_allowed(const std::string& url, const rs::Entry& e, std::string& why) const {
    auto u = parse_url(url);
    if (!u) {
      why = "not a URL";
      return false;
    }
    if (u->scheme == "file") {
      if (m_source_is_file) {
        return true;
      }
      why = "file URLs are only fetched for file sources";
      return false;
    }
    if (m_endpoint->is_own_host(url) || m_allowed_hosts.count(u->host) > 0) {
      return true;
    }
    // Hosts the source's own document names as mirrors of this resource.
    for (const auto& l : e.links) {
      if (l.rel == "duplicate" && origin_of(l.href) == u->origin()) {
        return true;
      }
    }
    why = "host " + u->host + " is not the source's and not in allow_hosts";
    return false;
  }

  bool cancelled() const { return m_opt.cancel && m_opt.cancel->load(); }

  void progress(const std::string& doc) {
    if (!m_opt.on_progress) {
      return;
    }
    Progress p;
    p.source = m_src.name;
    p.document = doc;
    p.done = m_done;
    p.total = std::max(m_total, m_done);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - m_progress_start).count();
    p.per_second = secs > 0 ? static_cast<double>(m_done) / secs : 0;
    m_opt.on_progress(p);
  }

  // Fetches and validates a document. With `conditional`, a document
  // applied to its end before is asked for with If-None-Match /
  // If-Modified-Since, and may come back not_modified().
  Result<std::unique_ptr<SpooledDocument>> spool(const std::string& url, rs::Capability want,
                                                 bool conditional = false) {
    FetchOptions o = m_options;
    const std::string key = m_src.name + " " + url;
    if (conditional) {
      if (auto v = m_validators.get(key)) {
        if (!v->etag.empty()) {
          o.headers["If-None-Match"] = v->etag;
        }
        if (!v->last_modified.empty()) {
          o.headers["If-Modified-Since"] = v->last_modified;
        }
      }
    }
    auto doc = spool_document(*m_fetcher, url, o, m_tmp);
    if (!doc || (*doc)->not_modified()) {
      return doc;
    }
    const auto& s = (*doc)->summary();
    if (!s.valid()) {
      return make_error(ErrorKind::invalid_document,
                        url + ": invalid document, nothing applied from it: " + (*doc)->error_text());
    }
    if ((*doc)->header().capability() != want) {
      return make_error(ErrorKind::invalid_document,
                        url + ": expected a " + std::string(rs::to_string(want)) + ", got capability '" +
                            (*doc)->header().md->capability.value_or("") + "'");
    }
    return doc;
  }

  // Fetches the content of several entries in parallel (the source's
  // concurrency), each through fetch_content.
  std::vector<Result<FetchedContent>> fetch_all(const std::vector<const rs::Entry*>& entries) {
    std::vector<Result<FetchedContent>> results;
    results.reserve(entries.size());
    for (size_t i = 0; i < entries.size(); ++i) {
      results.emplace_back(make_error(ErrorKind::transient, "not fetched"));
    }
    std::atomic<size_t> next{0};
    // `concurrency` requests in flight; more workers, so that fsyncing and
    // linking blobs overlaps with the next transfers.
    std::counting_semaphore<> slots(static_cast<std::ptrdiff_t>(m_src.concurrency));
    auto work = [&] {
      for (size_t i = next++; i < entries.size(); i = next++) {
        if (cancelled()) {
          break; // the batch will not be committed
        }
        const rs::Entry& e = *entries[i];
        auto policy = [&](const std::string& url, std::string& why) { return host_allowed(url, e, why); };
        for (int round = 1;; ++round) {
          results[i] = fetch_content(*m_content_fetcher, m_blobs, m_options, e.loc, e.links, expected_of(e), policy,
                                     &slots, /*defer_publish=*/true);
          if (results[i] || results[i].error().kind != ErrorKind::transient || round >= m_opt.retry.max_attempts) {
            break;
          }
          std::this_thread::sleep_for(backoff_delay(m_opt.retry, round));
        }
      }
    };
    const size_t n = std::min<size_t>(std::min<size_t>(4 * m_src.concurrency, 64), entries.size());
    std::vector<std::thread> threads;
    for (size_t t = 1; t < n; ++t) {
      threads.emplace_back(work);
    }
    work();
    for (auto& t : threads) {
      t.join();
    }
    publish_sealed(results);
    return results;
  }

  // One file-system sync for the whole batch, then every blob is named.
  void publish_sealed(std::vector<Result<FetchedContent>>& results) {
    std::vector<BlobStore::Writer*> sealed;
    std::vector<size_t> index;
    for (size_t i = 0; i < results.size(); ++i) {
      if (results[i] && results[i]->sealed) {
        sealed.push_back(&*results[i]->sealed);
        index.push_back(i);
      }
    }
    auto published = m_blobs.publish(sealed);
    for (size_t k = 0; k < published.size(); ++k) {
      Result<FetchedContent>& r = results[index[k]];
      if (!published[k]) {
        r = tl::unexpected(published[k].error());
      } else {
        r->sealed.reset();
      }
    }
  }

  // Hands the batch to the committer. Until it commits, lookups of the next
  // batch may not see it, so its resource states are kept as an overlay.
  Result<void> commit(store::Batch& batch) {
    if (cancelled()) {
      return make_error(ErrorKind::transient, "stopped (shutting down); the next run resumes from the watermark");
    }
    std::unordered_map<std::string, ResourceRecord> overlay;
    for (const auto& r : batch.upserts) {
      overlay[r.uri] = r;
    }
    auto r = m_committer->submit(std::move(batch), [this](const store::Batch& b) {
      std::lock_guard lock(m_counters_mutex);
      m_report.counters += b.counters;
    });
    if (r) {
      m_overlay = std::move(overlay);
    }
    return r;
  }

  // Waits until every submitted batch is committed.
  Result<void> drain() {
    auto r = m_committer->wait();
    m_overlay.clear();
    return r;
  }

  // The feed's watermark once every submitted batch has committed.
  Result<Watermark> settled_watermark(int64_t feed) {
    if (auto r = drain(); !r) {
      return tl::unexpected(r.error());
    }
    return m_store.watermark(feed);
  }

  // What the store holds for these URIs, as it will be once the batch in
  // flight commits.
  Result<std::unordered_map<std::string, ResourceRecord>> held_for(int64_t feed, const std::vector<std::string>& uris) {
    auto held = m_store.resources(feed, uris);
    if (held && !m_overlay.empty()) {
      for (const auto& u : uris) {
        if (auto it = m_overlay.find(u); it != m_overlay.end()) {
          (*held)[u] = it->second;
        }
      }
    }
    return held;
  }

  void remember_validators(const SpooledDocument& d) {
    ValidatorCache::Validators v{d.response().header("etag"), d.response().header("last-modified")};
    const std::string key = m_src.name + " " + d.url();
    if (v.etag.empty() && v.last_modified.empty()) {
      m_validators.forget(key);
    } else {
      m_validators.put(key, std::move(v));
    }
  }

  // ---- feeds ----------------------------------------------------------------

  bool run_feeds() {
    std::vector<std::string> caplists = m_src.capability_lists;
    if (caplists.empty()) {
      auto found = discover(*m_fetcher, m_src.url, m_options);
      if (!found) {
        error(m_src.url, found.error().message);
        return false;
      }
      caplists = found->capability_lists;
    }
    bool ok = true;
    for (const auto& caplist : caplists) {
      auto feed = m_store.ensure_feed(m_source_id, caplist);
      if (!feed) {
        error(caplist, feed.error().message);
        ok = false;
        continue;
      }
      auto r = sync_feed(*feed, caplist);
      auto drained = drain(); // a batch still in flight commits (or fails) before we judge the feed
      if (!r) {
        error(caplist, r.error().message);
        ok = false;
      } else if (!drained) {
        error(caplist, drained.error().message);
        ok = false;
      }
    }
    return ok;
  }

  Result<void> sync_feed(int64_t feed, const std::string& caplist_url) {
    CollectingHandler h;
    auto got = fetch_document(*m_fetcher, caplist_url, m_options, h, [&] { h.reset(); });
    if (!got) {
      return tl::unexpected(got.error());
    }
    if (!got->summary.valid() || h.document.header.capability() != rs::Capability::capabilitylist) {
      return make_error(ErrorKind::invalid_document, caplist_url + ": not a valid Capability List");
    }
    std::string rl;
    std::string cl;
    std::string rd;
    std::string cd;
    for (const auto& e : h.document.entries) {
      if (!e.md || !e.md->capability) {
        continue;
      }
      const std::string& cap = *e.md->capability;
      auto abs = resolve_reference(caplist_url, e.loc);
      if (!abs) {
        continue;
      }
      if (cap == "resourcelist" && rl.empty()) {
        rl = *abs;
      } else if (cap == "changelist" && cl.empty()) {
        cl = *abs;
      } else if (cap == "resourcedump" && rd.empty()) {
        rd = *abs;
      } else if (cap == "changedump" && cd.empty()) {
        cd = *abs;
      }
    }
    auto need_rl = [&]() -> Result<void> {
      if (rl.empty()) {
        return make_error(ErrorKind::invalid_document, caplist_url + ": the Capability List offers no Resource List");
      }
      return {};
    };
    // A baseline comes from the Resource Dump when the strategy allows and
    // the Capability List offers one; a broken dump falls back to the
    // Resource List ("auto"), saying so in the run.
    auto do_baseline = [&]() -> Result<void> {
      if (m_src.strategy != "lists" && !rd.empty()) {
        auto r = baseline_from_dump(feed, rd);
        if (r || m_src.strategy == "dumps" || rl.empty()) {
          return r;
        }
        note("Resource Dump unusable, baselined from the Resource List instead: " + r.error().message);
      } else if (m_src.strategy == "dumps" && rd.empty()) {
        note("strategy \"dumps\", but the Capability List offers no Resource Dump: baselined from the Resource List");
      }
      if (auto r = need_rl(); !r) {
        return r;
      }
      return baseline(feed, rl);
    };
    switch (m_opt.mode) {
    case store::RunMode::baseline:
      return do_baseline();
    case store::RunMode::audit:
      if (auto r = need_rl(); !r) {
        return r;
      }
      return audit(feed, rl);
    case store::RunMode::incremental: {
      auto wm = settled_watermark(feed);
      if (!wm) {
        return tl::unexpected(wm.error());
      }
      if (!wm->baseline_at && !wm->last_time) {
        note("never synced: baseline first");
        if (auto r = do_baseline(); !r) {
          return r;
        }
      }
      if (m_src.strategy != "lists" && !cd.empty()) {
        if (auto r = incremental_from_dump(feed, cd); !r) {
          if (m_src.strategy == "dumps" || cl.empty()) {
            return r;
          }
          note("Change Dump unusable, following the Change List instead: " + r.error().message);
        }
      }
      if (cl.empty()) {
        note(cd.empty() ? "no Change List offered: nothing incremental to do" : "no Change List offered");
      } else if (auto r = incremental(feed, cl, rl); !r) {
        return r;
      }
      return retry_failed(feed);
    }
    }
    return {};
  }

  // ---- retrying failed resources ------------------------------------------------

  // A resource whose content failed, to retry (see store::RetryRecord).
  store::RetryRecord retry_for(const rs::Entry& e, std::optional<rs::Change> change,
                               std::optional<rs::Timestamp> time, const std::string& reason, int attempts = 1) const {
    store::RetryRecord r;
    r.uri = e.loc;
    rs::Document doc;
    doc.header.md = rs::Metadata{};
    doc.header.md->capability = "resourcelist";
    doc.entries.push_back(e);
    r.entry = rs::write_document(doc);
    r.change = change;
    r.change_datetime = time;
    r.reason = reason;
    r.attempts = attempts;
    const auto delay = std::min<std::chrono::seconds>(m_opt.refetch_backoff * (int64_t{1} << std::min(attempts - 1, 20)),
                                                      std::chrono::hours(24));
    r.next_attempt_at =
        std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now() + delay);
    return r;
  }

  // Fetches the feed's failed resources that are due again (up to a
  // thousand a run): each one stored now is logged as the change it was (a
  // resource a listing named is created, or updated if we held it); each
  // failure waits twice as long.
  Result<void> retry_failed(int64_t feed) {
    if (auto r = drain(); !r) {
      return r;
    }
    auto due = m_store.due_retries(
        feed, std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now()), 1000);
    if (!due) {
      return tl::unexpected(due.error());
    }
    if (due->empty()) {
      return {};
    }
    store::Batch batch;
    batch.feed_id = feed;
    batch.run_id = m_run_id;
    std::vector<rs::Entry> entries;
    std::vector<const store::RetryRecord*> records;
    for (const auto& r : *due) {
      auto parsed = rs::parse_document(r.entry);
      if (parsed.document.entries.size() == 1 && parsed.document.entries[0].loc == r.uri) {
        entries.push_back(std::move(parsed.document.entries[0]));
        records.push_back(&r);
        continue;
      }
      // Cannot happen (we wrote it); say so once a day, not every run.
      error(r.uri, "the entry kept to retry it is unreadable; an audit with repair will fetch the resource");
      store::RetryRecord later = r;
      ++later.attempts;
      later.next_attempt_at = std::chrono::time_point_cast<std::chrono::microseconds>(
          std::chrono::system_clock::now() + std::chrono::hours(24));
      batch.retries.push_back(std::move(later));
    }
    std::vector<const rs::Entry*> to_fetch;
    std::vector<std::string> uris;
    for (const auto& e : entries) {
      to_fetch.push_back(&e);
      uris.push_back(e.loc);
    }
    auto held = held_for(feed, uris);
    if (!held) {
      return tl::unexpected(held.error());
    }
    auto results = fetch_all(to_fetch);
    if (cancelled()) {
      return commit(batch); // refused: nothing is applied
    }
    size_t stored = 0;
    for (size_t i = 0; i < entries.size(); ++i) {
      const rs::Entry& e = entries[i];
      const store::RetryRecord& was = *records[i];
      if (!results[i]) {
        ++batch.counters.failed;
        error(e.loc,
              results[i].error().message + " (failed before: attempt " + std::to_string(was.attempts + 1) + ")");
        batch.retries.push_back(retry_for(e, was.change, was.change_datetime, results[i].error().message,
                                          was.attempts + 1));
        continue;
      }
      ++stored;
      ResourceRecord rec = record_for(e, results[i]->blob, results[i]->served_from, results[i]->type);
      batch.counters.bytes += results[i]->blob.length;
      auto it = held->find(e.loc);
      const bool had = it != held->end() && it->second.state == ResourceState::live;
      if (had && it->second.blob_sha256 == rec.blob_sha256) {
        ++batch.counters.unchanged;
      } else {
        const rs::Change change = had ? rs::Change::updated : was.change.value_or(rs::Change::created);
        ++(change == rs::Change::created ? batch.counters.created : batch.counters.updated);
        batch.changes.push_back(ChangeRecord{change, was.change_datetime ? was.change_datetime : e.change_time(), rec});
      }
      batch.upserts.push_back(std::move(rec));
    }
    note("retried " + std::to_string(entries.size()) + " resource" + (entries.size() == 1 ? "" : "s") +
         " whose content failed before: " + std::to_string(stored) + " stored, " +
         std::to_string(entries.size() - stored) + " still failing");
    if (auto r = commit(batch); !r) {
      return r;
    }
    return drain();
  }

  // ---- baseline ---------------------------------------------------------------

  Result<void> baseline(int64_t feed, const std::string& rl_url) {
    m_validators.forget_prefix(m_src.name + " "); // the watermark moves: ask for everything again
    auto doc = spool(rl_url, rs::Capability::resourcelist);
    if (!doc) {
      return tl::unexpected(doc.error());
    }
    const auto at = (*doc)->header().md->at;
    std::vector<std::string> parts;
    if ((*doc)->header().root == rs::RootElement::sitemapindex) {
      CollectingHandler h;
      if (auto r = (*doc)->read(h); !r) {
        return tl::unexpected(r.error());
      }
      for (const auto& e : h.document.entries) {
        parts.push_back(e.loc);
      }
    }
    m_progress_start = std::chrono::steady_clock::now();
    if (parts.empty()) {
      m_total += (*doc)->summary().entries;
      if (auto r = baseline_document(feed, **doc); !r) {
        return r;
      }
    } else {
      for (const auto& part : parts) {
        auto p = spool(part, rs::Capability::resourcelist);
        if (!p) {
          return tl::unexpected(p.error());
        }
        m_total += (*p)->summary().entries;
        if (auto r = baseline_document(feed, **p); !r) {
          return r;
        }
      }
    }
    // Everything listed was seen: what we hold beyond it is gone upstream.
    auto wm = settled_watermark(feed);
    if (!wm) {
      return tl::unexpected(wm.error());
    }
    Watermark w = *wm;
    w.baseline_at = at;
    w.last_time = at;
    w.last_uri.clear();
    w.last_position = -1;
    auto deleted = m_store.delete_unseen(feed, m_run_id, w);
    if (!deleted) {
      return tl::unexpected(deleted.error());
    }
    m_report.counters.deleted += *deleted;
    return {};
  }

  // The package entries of a Resource or Change Dump (or of every part of
  // its index), with their locs made absolute. Parts of an index that end
  // before `skip_before` are not fetched.
  Result<std::vector<rs::Entry>> dump_packages(const std::string& url, rs::Capability kind,
                                               std::optional<rs::Timestamp>& at,
                                               std::optional<rs::Timestamp> skip_before = std::nullopt) {
    auto doc = spool(url, kind);
    if (!doc) {
      return tl::unexpected(doc.error());
    }
    at = (*doc)->header().md->at;
    CollectingHandler h;
    if (auto r = (*doc)->read(h); !r) {
      return tl::unexpected(r.error());
    }
    std::vector<rs::Entry> packages;
    auto take = [&](std::vector<rs::Entry>& entries, const std::string& base) {
      for (auto& e : entries) {
        e.loc = resolve_reference(base, e.loc).value_or(e.loc);
        packages.push_back(std::move(e));
      }
    };
    if ((*doc)->header().root != rs::RootElement::sitemapindex) {
      take(h.document.entries, url);
      return packages;
    }
    for (const auto& part : h.document.entries) {
      if (part.md && part.md->until && skip_before && *part.md->until < *skip_before) {
        continue; // a part of packages entirely before the watermark
      }
      const std::string part_url = resolve_reference(url, part.loc).value_or(part.loc);
      auto p = spool(part_url, kind);
      if (!p) {
        return tl::unexpected(p.error());
      }
      CollectingHandler ph;
      if (auto r = (*p)->read(ph); !r) {
        return tl::unexpected(r.error());
      }
      take(ph.document.entries, part_url);
    }
    return packages;
  }

  // A package downloaded (verified against the dump's rs:md) and opened
  // (checked whole); the file goes when this does.
  struct OpenedPackage {
    std::filesystem::path file;
    std::unique_ptr<DumpPackage> package;
    OpenedPackage() = default;
    OpenedPackage(OpenedPackage&&) = default;
    ~OpenedPackage() {
      std::error_code ec;
      if (!file.empty()) {
        std::filesystem::remove(file, ec);
      }
    }
  };
  Result<OpenedPackage> open_package(const rs::Entry& pkg, rs::Capability manifest_kind) {
    Expected expected;
    if (pkg.md) {
      expected.length = pkg.md->length;
      expected.hashes = pkg.md->hash;
    }
    OpenedPackage out;
    auto file = download_package(*m_fetcher, pkg.loc, pkg.links, m_options, expected, m_tmp);
    if (!file) {
      return tl::unexpected(file.error());
    }
    out.file = *file;
    auto opened = DumpPackage::open(out.file, pkg.loc, manifest_kind);
    if (!opened) {
      return tl::unexpected(opened.error());
    }
    out.package = std::move(*opened);
    for (const auto& w : out.package->warnings()) {
      note(w);
    }
    return out;
  }

  // Extracts the entries `wanted` (pointers into `entries`) from a package
  // and publishes their blobs: a content source for the batch functions.
  std::vector<Result<FetchedContent>> extract_entries(const DumpPackage& package,
                                                      const std::vector<const rs::Entry*>& wanted,
                                                      const std::function<size_t(const rs::Entry*)>& index_of) {
    std::vector<size_t> indices;
    indices.reserve(wanted.size());
    for (const rs::Entry* e : wanted) {
      indices.push_back(index_of(e));
    }
    auto results = package.extract_many(indices, m_blobs);
    publish_sealed(results);
    return results;
  }

  // A baseline from a Resource Dump (or its index): each package is
  // downloaded to a file, verified against its rs:md, checked whole, and
  // applied in one transaction; the manifests' earliest `at` is where
  // incremental sync continues.
  Result<void> baseline_from_dump(int64_t feed, const std::string& rd_url) {
    m_validators.forget_prefix(m_src.name + " ");
    std::optional<rs::Timestamp> at;
    auto packages = dump_packages(rd_url, rs::Capability::resourcedump, at);
    if (!packages) {
      return tl::unexpected(packages.error());
    }
    if (packages->empty()) {
      return make_error(ErrorKind::invalid_document, rd_url + ": the Resource Dump lists no package");
    }
    m_progress_start = std::chrono::steady_clock::now();
    std::optional<rs::Timestamp> manifest_at;
    for (const auto& pkg : *packages) {
      auto opened = open_package(pkg, rs::Capability::resourcedump_manifest);
      if (!opened) {
        return tl::unexpected(opened.error());
      }
      const DumpPackage& package = *opened->package;
      if (auto a = package.manifest().header.md->at; a && (!manifest_at || *a < *manifest_at)) {
        manifest_at = a;
      }
      std::vector<rs::Entry> entries = package.manifest().entries;
      m_total += entries.size();
      const rs::Entry* first = entries.data();
      auto r = baseline_batch(feed, entries, [&](const std::vector<const rs::Entry*>& wanted) {
        return extract_entries(package, wanted, [first](const rs::Entry* e) { return static_cast<size_t>(e - first); });
      });
      if (!r) {
        return tl::unexpected(r.error());
      }
      m_done += entries.size();
      progress(pkg.loc);
    }
    auto wm = settled_watermark(feed);
    if (!wm) {
      return tl::unexpected(wm.error());
    }
    Watermark w = *wm;
    w.baseline_at = manifest_at ? manifest_at : at;
    w.last_time = w.baseline_at;
    w.last_uri.clear();
    w.last_position = -1;
    auto deleted = m_store.delete_unseen(feed, m_run_id, w);
    if (!deleted) {
      return tl::unexpected(deleted.error());
    }
    m_report.counters.deleted += *deleted;
    note("baselined from the Resource Dump " + rd_url + " (" + std::to_string(packages->size()) + " package" +
         (packages->size() == 1 ? "" : "s") + ")");
    return {};
  }

  Result<void> baseline_document(int64_t feed, const SpooledDocument& doc) {
    Result<void> status;
    ChunkHandler h(m_opt.batch_size, [&](std::vector<rs::Entry>& entries) {
      status = baseline_batch(feed, entries);
      m_done += entries.size();
      progress(doc.url());
      return static_cast<bool>(status);
    });
    auto r = doc.read(h);
    if (!r) {
      return tl::unexpected(r.error());
    }
    h.finish();
    return status;
  }

  using ContentSource = std::function<std::vector<Result<FetchedContent>>(const std::vector<const rs::Entry*>&)>;

  // Applies one batch of a baseline: what is held unchanged is skipped, the
  // rest comes from `source` (the network by default, or a dump package).
  Result<void> baseline_batch(int64_t feed, std::vector<rs::Entry>& all, const ContentSource& source = {}) {
    // A list may name a URI twice (the validator warns): the last one counts,
    // and a batch must not upsert one row twice.
    std::unordered_map<std::string, size_t> last;
    for (size_t i = 0; i < all.size(); ++i) {
      last[all[i].loc] = i;
    }
    std::vector<const rs::Entry*> entries;
    std::vector<std::string> uris;
    for (size_t i = 0; i < all.size(); ++i) {
      const rs::Entry& e = all[i];
      if (last[e.loc] == i && m_src.selects(e.loc, e.md ? e.md->type : std::nullopt)) {
        entries.push_back(&e);
        uris.push_back(e.loc);
      }
    }
    store::Batch batch;
    batch.feed_id = feed;
    batch.run_id = m_run_id;
    batch.seen = uris;
    auto held = held_for(feed, uris);
    if (!held) {
      return tl::unexpected(held.error());
    }
    std::vector<const rs::Entry*> to_fetch;
    for (const auto* e : entries) {
      auto it = held->find(e->loc);
      if (it != held->end() && same_content(it->second, *e)) {
        ++batch.counters.unchanged;
        continue;
      }
      to_fetch.push_back(e);
    }
    auto results = source ? source(to_fetch) : fetch_all(to_fetch);
    if (cancelled()) {
      return commit(batch); // refused: nothing of this batch is applied
    }
    for (size_t i = 0; i < to_fetch.size(); ++i) {
      const rs::Entry& e = *to_fetch[i];
      if (!results[i]) {
        if (source) {
          return tl::unexpected(results[i].error()); // a package is applied whole or not at all
        }
        ++batch.counters.failed;
        error(e.loc, results[i].error().message);
        batch.retries.push_back(retry_for(e, std::nullopt, std::nullopt, results[i].error().message));
        continue;
      }
      ResourceRecord rec = record_for(e, results[i]->blob, results[i]->served_from, results[i]->type);
      batch.counters.bytes += results[i]->blob.length;
      auto it = held->find(e.loc);
      const bool had = it != held->end() && it->second.state == ResourceState::live;
      if (had && it->second.blob_sha256 == rec.blob_sha256) {
        ++batch.counters.unchanged; // same bytes: refresh metadata, log nothing
        batch.upserts.push_back(std::move(rec));
        continue;
      }
      if (had) {
        ++batch.counters.updated;
      } else {
        ++batch.counters.created;
      }
      batch.changes.push_back(ChangeRecord{had ? rs::Change::updated : rs::Change::created, e.change_time(), rec});
      batch.upserts.push_back(std::move(rec));
    }
    return commit(batch);
  }

  // ---- incremental --------------------------------------------------------------

  Result<void> incremental(int64_t feed, const std::string& cl_url, const std::string& rl_url) {
    auto wm = settled_watermark(feed);
    if (!wm) {
      return tl::unexpected(wm.error());
    }
    Watermark w = *wm;
    auto doc = spool(cl_url, rs::Capability::changelist, true);
    if (!doc) {
      return tl::unexpected(doc.error());
    }
    if ((*doc)->not_modified()) {
      note("Change List not modified since it was last applied");
      return {};
    }
    std::vector<ListRef> lists;
    if ((*doc)->header().root == rs::RootElement::sitemapindex) {
      CollectingHandler h;
      if (auto r = (*doc)->read(h); !r) {
        return tl::unexpected(r.error());
      }
      for (const auto& e : h.document.entries) {
        lists.push_back(ListRef{e.loc, e.md ? e.md->from : std::nullopt, e.md ? e.md->until : std::nullopt});
      }
    } else {
      lists.push_back(ListRef{cl_url, (*doc)->header().md->from, (*doc)->header().md->until});
    }
    if (lists.empty()) {
      return {};
    }
    // Gap detection: the earliest change still published is later than what
    // we have applied, so changes in between are lost upstream.
    std::optional<rs::Timestamp> earliest = lists.front().from;
    if (!earliest) {
      earliest = (*doc)->header().md->from;
    }
    if (earliest && w.last_time && *earliest > *w.last_time) {
      note("re-baselined: the Change List starts at " + rs::format_w3c_datetime(*earliest) +
           ", after the last change applied (" + rs::format_w3c_datetime(*w.last_time) + ")");
      if (rl_url.empty()) {
        return make_error(ErrorKind::invalid_document, "gap in the change history and no Resource List to re-baseline from");
      }
      if (auto r = baseline(feed, rl_url); !r) {
        return r;
      }
      auto again = settled_watermark(feed);
      if (!again) {
        return tl::unexpected(again.error());
      }
      w = *again;
    }
    m_progress_start = std::chrono::steady_clock::now();
    for (const auto& l : lists) {
      if (l.until && w.last_time && *l.until < *w.last_time) {
        continue; // closed and entirely before the watermark
      }
      std::unique_ptr<SpooledDocument> part;
      const SpooledDocument* d = doc->get();
      if (l.url != cl_url) {
        auto p = spool(l.url, rs::Capability::changelist, true);
        if (!p) {
          return tl::unexpected(p.error());
        }
        part = std::move(*p);
        if (part->not_modified()) {
          continue;
        }
        d = part.get();
      }
      m_total += d->summary().entries;
      if (auto r = apply_change_list(feed, *d, w); !r) {
        return r;
      }
      if (auto r = drain(); !r) {
        return r;
      }
      remember_validators(*d);
    }
    if ((*doc)->header().root == rs::RootElement::urlset) {
      // Only leaf lists: an index stays the same while its open list grows.
      remember_validators(**doc);
    }
    return {};
  }

  struct PendingChange {
    rs::Entry entry;
    rs::Timestamp time;
    int64_t position = 0;
    bool selected = true;
  };

  // The changes of a manifest (of the package at `loc`) strictly after the
  // watermark, in order: (index in the manifest, time, position among
  // changes of the same time).
  struct ChangeAt {
    size_t index;
    rs::Timestamp time;
    int64_t position;
  };
  static Result<std::vector<ChangeAt>> changes_after(const std::vector<rs::Entry>& entries, const std::string& loc,
                                                     const Watermark& w) {
    std::vector<ChangeAt> out;
    std::optional<rs::Timestamp> prev_time;
    int64_t position = -1;
    for (size_t i = 0; i < entries.size(); ++i) {
      const rs::Entry& e = entries[i];
      const auto t = e.change_time();
      if (!t || !e.change()) {
        return make_error(ErrorKind::invalid_document, loc + ": manifest entry " + e.loc + " has no change time");
      }
      if (prev_time && *t < *prev_time) {
        return make_error(ErrorKind::invalid_document, loc + ": manifest not in forward chronological order");
      }
      position = prev_time && *prev_time == *t ? position + 1 : 0;
      prev_time = t;
      const bool after = !w.last_time || *t > *w.last_time ||
                         (*t == *w.last_time && (w.change_list_url && *w.change_list_url == loc
                                                     ? position > w.last_position
                                                     : e.loc != w.last_uri));
      if (after) {
        out.push_back(ChangeAt{i, *t, position});
      }
    }
    return out;
  }

  // What the manifest copy a Change Dump package links (rel="contents")
  // says of it: its first and last change, how many changes it holds and
  // how many are after the watermark. Nothing when there is no copy or it
  // is unusable (the package is then downloaded, which is always correct).
  struct ManifestSpan {
    std::optional<rs::Timestamp> first, last;
    size_t entries = 0;
    size_t after = 0;
  };
  std::optional<ManifestSpan> manifest_copy_span(const rs::Entry& pkg, const Watermark& w) {
    const rs::Link* contents = nullptr;
    for (const auto& l : pkg.links) {
      if (l.rel == "contents") {
        contents = &l;
      }
    }
    if (!contents) {
      return std::nullopt;
    }
    const std::string url = resolve_reference(pkg.loc, contents->href).value_or(contents->href);
    CollectingHandler h;
    auto after = [&]() -> Result<std::vector<ChangeAt>> {
      auto doc = spool(url, rs::Capability::changedump_manifest);
      if (!doc) {
        return tl::unexpected(doc.error());
      }
      if (auto r = (*doc)->read(h); !r) {
        return tl::unexpected(r.error());
      }
      return changes_after(h.document.entries, pkg.loc, w);
    }();
    if (!after) {
      note("the manifest copy of " + pkg.loc + " is unusable, so the package is downloaded: " + after.error().message);
      return std::nullopt;
    }
    ManifestSpan span;
    span.entries = h.document.entries.size();
    span.after = after->size();
    // The manifest's own period when it states one; else its first and
    // last change (which cannot show that no change fell before the first).
    const auto& md = h.document.header.md;
    span.first = md && md->from ? md->from : std::nullopt;
    span.last = md && md->until ? md->until : std::nullopt;
    if (!h.document.entries.empty()) {
      span.first = span.first ? span.first : h.document.entries.front().change_time();
      span.last = span.last ? span.last : h.document.entries.back().change_time();
    }
    return span;
  }

  // Catch-up from a Change Dump (or index): its packages in forward
  // chronological order, each manifest's changes strictly after the
  // watermark applied in one transaction with the watermark. Packages that
  // end before the watermark are not downloaded. "auto" takes the dump only
  // when it covers the watermark and at least one whole package of changes
  // is waiting; "dumps" whenever it covers the watermark. Otherwise the
  // Change List does the work.
  Result<void> incremental_from_dump(int64_t feed, const std::string& cd_url) {
    auto wm = settled_watermark(feed);
    if (!wm) {
      return tl::unexpected(wm.error());
    }
    Watermark w = *wm;
    std::optional<rs::Timestamp> unused_at;
    auto listed = dump_packages(cd_url, rs::Capability::changedump, unused_at, w.last_time);
    if (!listed) {
      return tl::unexpected(listed.error());
    }
    std::vector<rs::Entry> packages = std::move(*listed);
    // An undated package (no from/until, a deviation real Sources make) is
    // dated by its manifest copy (rel="contents"), which also says whether
    // anything in it is new, so that an applied package is not downloaded
    // again.
    std::vector<std::pair<rs::Entry, std::optional<ManifestSpan>>> dated;
    size_t dated_by_manifest = 0;
    for (auto& p : packages) {
      std::optional<ManifestSpan> span;
      if ((!p.md || !p.md->from || !p.md->until) && w.last_time) {
        span = manifest_copy_span(p, w);
      }
      if (span) {
        ++dated_by_manifest;
        if (!p.md) {
          p.md = rs::Metadata{};
        }
        p.md->from = p.md->from ? p.md->from : span->first;
      }
      dated.emplace_back(std::move(p), span);
    }
    // Forward chronological order, by each package's `from`.
    std::stable_sort(dated.begin(), dated.end(), [](const auto& a, const auto& b) {
      const auto fa = a.first.md ? a.first.md->from : std::nullopt;
      const auto fb = b.first.md ? b.first.md->from : std::nullopt;
      return fa && fb && *fa < *fb;
    });
    std::vector<const rs::Entry*> todo;
    bool covers = !w.last_time;
    size_t whole = 0;
    for (const auto& [p, span] : dated) {
      // Plain values, not optionals: GCC 12 warns of optional<time_point>
      // read uninitialised here (it is not).
      const bool has_from = p.md && p.md->from && w.last_time;
      const bool has_until = p.md && p.md->until && w.last_time;
      const rs::Timestamp last = w.last_time.value_or(rs::Timestamp{});
      const rs::Timestamp from = has_from ? *p.md->from : rs::Timestamp{};
      const rs::Timestamp until = has_until ? *p.md->until : rs::Timestamp{};
      if (span ? span->after == 0 : (has_until && until < last)) {
        continue; // already applied
      }
      if (todo.empty() && has_from && from <= last) {
        covers = true;
      }
      if (span ? span->after == span->entries : (has_from && has_until && from >= last)) {
        ++whole;
      }
      todo.push_back(&p);
    }
    if (dated_by_manifest > 0) {
      note(std::to_string(dated_by_manifest) + " Change Dump package" + (dated_by_manifest == 1 ? "" : "s") +
           " without from/until dated by the manifest copy they link (rel=\"contents\")");
    }
    if (todo.empty()) {
      return {};
    }
    if (!covers) {
      return make_error(ErrorKind::invalid_document, cd_url + ": the Change Dump starts after the last change applied");
    }
    if (m_src.strategy == "auto" && whole == 0) {
      return {}; // a small backlog: the Change List is cheaper
    }
    m_progress_start = std::chrono::steady_clock::now();
    for (const rs::Entry* pkg : todo) {
      const std::string& loc = pkg->loc;
      auto opened = open_package(*pkg, rs::Capability::changedump_manifest);
      if (!opened) {
        return tl::unexpected(opened.error());
      }
      const DumpPackage& package = *opened->package;
      // The manifest's changes after the watermark, in order, each
      // remembering its place in the manifest (for its bitstream).
      const auto& entries = package.manifest().entries;
      std::vector<PendingChange> pending;
      std::vector<size_t> manifest_index;
      auto after = changes_after(entries, loc, w);
      if (!after) {
        return tl::unexpected(after.error());
      }
      for (const auto& [i, t, position] : *after) {
        const rs::Entry& e = entries[i];
        pending.push_back(PendingChange{e, t, position, m_src.selects(e.loc, e.md ? e.md->type : std::nullopt)});
        manifest_index.push_back(i);
      }
      m_total += entries.size();
      if (!pending.empty()) {
        std::unordered_map<const rs::Entry*, size_t> index_of;
        for (size_t k = 0; k < pending.size(); ++k) {
          index_of[&pending[k].entry] = manifest_index[k];
        }
        auto r = change_batch(feed, loc, pending, w, [&](const std::vector<const rs::Entry*>& wanted) {
          return extract_entries(package, wanted, [&index_of](const rs::Entry* e) { return index_of.at(e); });
        });
        if (!r) {
          return r;
        }
        if (auto d = drain(); !d) {
          return d;
        }
      }
      m_done += entries.size();
      progress(loc);
    }
    note("caught up from the Change Dump " + cd_url + " (" + std::to_string(todo.size()) + " package" +
         (todo.size() == 1 ? "" : "s") + ")");
    return {};
  }

  Result<void> apply_change_list(int64_t feed, const SpooledDocument& doc, Watermark& w) {
    std::vector<PendingChange> pending;
    std::optional<rs::Timestamp> prev_time;
    int64_t position = -1;
    Result<void> status;
    auto after_watermark = [&](const rs::Entry& e, rs::Timestamp t, int64_t pos) {
      if (!w.last_time || t > *w.last_time) {
        return true;
      }
      if (t < *w.last_time) {
        return false;
      }
      if (w.change_list_url && *w.change_list_url == doc.url()) {
        return pos > w.last_position;
      }
      return e.loc != w.last_uri;
    };
    ChunkHandler h(m_opt.batch_size, [&](std::vector<rs::Entry>& entries) {
      for (auto& e : entries) {
        const rs::Timestamp t = *e.change_time(); // validated: every change has a time
        position = prev_time && *prev_time == t ? position + 1 : 0;
        prev_time = t;
        m_done += 1;
        if (!after_watermark(e, t, position)) {
          continue;
        }
        const bool selected = m_src.selects(e.loc, e.md ? e.md->type : std::nullopt);
        pending.push_back(PendingChange{std::move(e), t, position, selected});
        if (pending.size() >= m_opt.batch_size) {
          status = change_batch(feed, doc.url(), pending, w);
          pending.clear();
          progress(doc.url());
          if (!status) {
            return false;
          }
        }
      }
      return true;
    });
    auto r = doc.read(h);
    if (!r) {
      return tl::unexpected(r.error());
    }
    if (!h.finish() || !status) {
      return status;
    }
    if (!pending.empty()) {
      status = change_batch(feed, doc.url(), pending, w);
      progress(doc.url());
    }
    return status;
  }

  Result<void> change_batch(int64_t feed, const std::string& list_url, std::vector<PendingChange>& changes,
                            Watermark& w, const ContentSource& source = {}) {
    // The last change of each resource decides its final state; each change
    // is logged, but a resource is fetched at most once.
    std::unordered_map<std::string, size_t> last;
    std::vector<std::string> uris;
    for (size_t i = 0; i < changes.size(); ++i) {
      if (!changes[i].selected) {
        continue;
      }
      auto [it, inserted] = last.try_emplace(changes[i].entry.loc, i);
      if (inserted) {
        uris.push_back(changes[i].entry.loc);
      } else {
        it->second = i;
      }
    }
    auto held = held_for(feed, uris);
    if (!held) {
      return tl::unexpected(held.error());
    }
    store::Batch batch;
    batch.feed_id = feed;
    batch.run_id = m_run_id;

    std::unordered_map<std::string, ResourceRecord> final_state;
    std::unordered_set<std::string> failed;
    std::unordered_set<std::string> unchanged;
    std::vector<const rs::Entry*> to_fetch;
    for (const auto& uri : uris) {
      const PendingChange& c = changes[last[uri]];
      const rs::Entry& e = c.entry;
      auto it = held->find(uri);
      if (c.entry.change() == rs::Change::deleted) {
        ResourceRecord r = it != held->end() ? it->second : record_from_entry(e, ResourceState::deleted);
        r.state = ResourceState::deleted;
        r.lastmod = e.lastmod ? e.lastmod : r.lastmod;
        r.change_datetime = c.time;
        final_state[uri] = std::move(r);
        continue;
      }
      if (it != held->end() && same_content(it->second, e)) {
        unchanged.insert(uri); // already in this state (a re-applied or re-baselined change)
        continue;
      }
      const rs::HashValue* want = rs::strongest_hash(offered_hashes(e));
      if (want && want->known() == rs::HashAlgorithm::sha256 && m_blobs.contains(want->hex)) {
        // Content already present (another source, or an earlier copy).
        BlobInfo blob;
        blob.sha256 = want->hex;
        blob.length = e.md && e.md->length ? *e.md->length : 0;
        blob.hashes = offered_hashes(e);
        final_state[uri] = record_for(e, blob, "blob store", std::nullopt);
        continue;
      }
      to_fetch.push_back(&e);
    }
    auto results = source ? source(to_fetch) : fetch_all(to_fetch);
    if (cancelled()) {
      return commit(batch); // refused: nothing of this batch is applied
    }
    std::vector<std::string> transient;
    for (size_t i = 0; i < to_fetch.size(); ++i) {
      const rs::Entry& e = *to_fetch[i];
      if (!results[i] && source) {
        return tl::unexpected(results[i].error()); // a package is applied whole or not at all
      }
      if (!results[i]) {
        if (results[i].error().kind == ErrorKind::transient) {
          transient.push_back(results[i].error().message);
        } else {
          failed.insert(e.loc);
          ++batch.counters.failed;
          error(e.loc, results[i].error().message);
          const PendingChange& c = changes[last[e.loc]];
          batch.retries.push_back(retry_for(e, c.entry.change(), c.time, results[i].error().message));
        }
        continue;
      }
      batch.counters.bytes += results[i]->blob.length;
      final_state[e.loc] = record_for(e, results[i]->blob, results[i]->served_from, results[i]->type);
    }
    if (!transient.empty()) {
      // Do not move past changes we could not apply for a passing reason:
      // the next run resumes at the watermark and tries again.
      return make_error(ErrorKind::transient,
                        std::to_string(transient.size()) + " resource(s) could not be fetched (first: " +
                            transient.front() + "); this batch was not applied and the next run resumes at " +
                            (w.last_time ? rs::format_w3c_datetime(*w.last_time) : std::string("the start")));
    }
    for (size_t i = 0; i < changes.size(); ++i) {
      const PendingChange& c = changes[i];
      const std::string& uri = c.entry.loc;
      if (!c.selected || failed.count(uri) || unchanged.count(uri)) {
        if (unchanged.count(uri) && last[uri] == i) {
          ++batch.counters.unchanged;
        }
        continue;
      }
      const rs::Change change = c.entry.change().value_or(rs::Change::updated);
      ResourceRecord state = last[uri] == i ? final_state[uri]
                                            : record_from_entry(c.entry, change == rs::Change::deleted
                                                                             ? ResourceState::deleted
                                                                             : ResourceState::live);
      switch (change) {
      case rs::Change::created:
        ++batch.counters.created;
        break;
      case rs::Change::updated:
        ++batch.counters.updated;
        break;
      case rs::Change::deleted:
        ++batch.counters.deleted;
        break;
      }
      batch.changes.push_back(ChangeRecord{change, c.time, std::move(state)});
    }
    for (auto& [uri, rec] : final_state) {
      batch.upserts.push_back(std::move(rec));
    }
    const PendingChange& tail = changes.back();
    Watermark next = w;
    next.change_list_url = list_url;
    next.last_time = tail.time;
    next.last_uri = tail.entry.loc;
    next.last_position = tail.position;
    batch.watermark = next;
    if (auto r = commit(batch); !r) {
      return r;
    }
    w = next;
    return {};
  }

  // ---- audit ---------------------------------------------------------------------

  Result<void> audit(int64_t feed, const std::string& rl_url) {
    if (auto r = drain(); !r) {
      return r;
    }
    auto doc = spool(rl_url, rs::Capability::resourcelist);
    if (!doc) {
      return tl::unexpected(doc.error());
    }
    std::vector<std::unique_ptr<SpooledDocument>> parts;
    if ((*doc)->header().root == rs::RootElement::sitemapindex) {
      CollectingHandler h;
      if (auto r = (*doc)->read(h); !r) {
        return tl::unexpected(r.error());
      }
      for (const auto& e : h.document.entries) {
        auto p = spool(e.loc, rs::Capability::resourcelist);
        if (!p) {
          return tl::unexpected(p.error());
        }
        parts.push_back(std::move(*p));
      }
    } else {
      parts.push_back(std::move(*doc));
    }
    std::unordered_set<std::string> listed;
    AuditCounts& a = m_report.audit;
    Result<void> status;
    for (const auto& p : parts) {
      ChunkHandler h(m_opt.batch_size, [&](std::vector<rs::Entry>& entries) {
        std::vector<std::string> uris;
        for (const auto& e : entries) {
          if (m_src.selects(e.loc, e.md ? e.md->type : std::nullopt)) {
            uris.push_back(e.loc);
          }
        }
        auto held = m_store.resources(feed, uris);
        if (!held) {
          status = tl::unexpected(held.error());
          return false;
        }
        for (const auto& e : entries) {
          if (!m_src.selects(e.loc, e.md ? e.md->type : std::nullopt)) {
            continue;
          }
          listed.insert(e.loc);
          auto it = held->find(e.loc);
          if (it == held->end() || it->second.state == ResourceState::deleted) {
            ++a.missing;
          } else if (same_content(it->second, e) ||
                     (!rs::strongest_hash(offered_hashes(e)) && !e.lastmod &&
                      (!e.md || !e.md->length || e.md->length == it->second.length))) {
            ++a.in_sync;
          } else {
            ++a.changed;
          }
        }
        return true;
      });
      if (auto r = p->read(h); !r) {
        return tl::unexpected(r.error());
      }
      h.finish();
      if (!status) {
        return status;
      }
    }
    auto each = m_store.for_each_resource(feed, [&](const ResourceRecord& r) {
      if (r.state == ResourceState::live && !listed.count(r.uri)) {
        ++a.extra;
      }
    });
    if (!each) {
      return each;
    }
    note("audit: in sync " + std::to_string(a.in_sync) + ", missing " + std::to_string(a.missing) + ", extra " +
         std::to_string(a.extra) + ", changed " + std::to_string(a.changed));
    if (m_opt.repair && (a.missing || a.extra || a.changed)) {
      note("repair: baseline from the Resource List");
      return baseline(feed, rl_url);
    }
    return {};
  }

  store::Store& m_store;
  BlobStore& m_blobs;
  std::shared_ptr<Fetcher> m_transport;
  std::shared_ptr<HostRateLimiter> m_limiter;
  std::filesystem::path m_tmp;
  const SourceConfig& m_src;
  const RunOptions& m_opt;
  SourceReport& m_report;
  ValidatorCache& m_validators;

  std::shared_ptr<EndpointFetcher> m_endpoint;
  std::unique_ptr<Committer> m_committer;
  std::unordered_map<std::string, ResourceRecord> m_overlay;
  std::mutex m_counters_mutex;
  std::shared_ptr<Fetcher> m_fetcher;
  std::shared_ptr<Fetcher> m_content_fetcher;
  FetchOptions m_options;
  bool m_source_is_file = false;
  std::unordered_set<std::string> m_allowed_hosts;
  int64_t m_source_id = 0;
  int64_t m_run_id = 0;
  uint64_t m_done = 0;
  uint64_t m_total = 0;
  std::chrono::steady_clock::time_point m_progress_start = std::chrono::steady_clock::now();
};

} // namespace

std::optional<ValidatorCache::Validators> ValidatorCache::get(const std::string& key) const {
  std::lock_guard lock(m_mutex);
  auto it = m_map.find(key);
  return it == m_map.end() ? std::nullopt : std::optional<Validators>(it->second);
}

void ValidatorCache::put(const std::string& key, Validators v) {
  std::lock_guard lock(m_mutex);
  m_map[key] = std::move(v);
}

void ValidatorCache::forget(const std::string& key) {
  std::lock_guard lock(m_mutex);
  m_map.erase(key);
}

void ValidatorCache::forget_prefix(const std::string& prefix) {
  std::lock_guard lock(m_mutex);
  for (auto it = m_map.lower_bound(prefix); it != m_map.end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
    it = m_map.erase(it);
  }
}

std::string format_counters(const store::RunCounters& c) {
  return "created " + std::to_string(c.created) + ", updated " + std::to_string(c.updated) + ", deleted " +
         std::to_string(c.deleted) + ", unchanged " + std::to_string(c.unchanged) + ", failed " +
         std::to_string(c.failed) + ", " + human_bytes(c.bytes);
}

SyncEngine::SyncEngine(std::shared_ptr<store::Store> store, std::shared_ptr<BlobStore> blobs,
                       std::shared_ptr<Fetcher> transport, std::shared_ptr<HostRateLimiter> limiter,
                       std::filesystem::path tmp_dir, std::shared_ptr<ValidatorCache> validators)
    : m_store(std::move(store)), m_blobs(std::move(blobs)), m_transport(std::move(transport)),
      m_limiter(std::move(limiter)), m_tmp(std::move(tmp_dir)) {
  if (validators) {
    m_validators = std::move(validators);
  }
}

SourceReport SyncEngine::run(const SourceConfig& source, const RunOptions& options) {
  SourceReport report;
  try {
    SourceRun run(*m_store, *m_blobs, m_transport, m_limiter, m_tmp, source, options, report, *m_validators);
    run.execute();
  } catch (const std::exception& e) {
    report.status = store::RunStatus::failed;
    report.errors.push_back(std::string("internal error: ") + e.what());
    ++report.error_count;
  }
  return report;
}

} // namespace tributary::sync

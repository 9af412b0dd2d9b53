#include "sync_engine/run_context.h"

#include "sync_engine/pipelining_verdicts.h"

#include "sync_engine/fetch_error_text.h"

#include "common/log.h"
#include "common/text.h"
#include "common/url_resolve.h"

#include <algorithm>
#include <map>
#include <atomic>
#include "common/blocking_semaphore.h"
#include <thread>

namespace tributary::sync {

namespace {

constexpr size_t k_max_reported_errors = 20;
constexpr size_t k_max_stored_errors = 1000;

std::string origin_of(const std::string& url) {
  auto u = parse_url(url);
  return u ? u->origin() : std::string();
}

} // namespace

const std::vector<rs::HashValue>& offered_hashes(const rs::Entry& e) {
  static const std::vector<rs::HashValue> k_none;
  return e.md ? e.md->hash : k_none;
}

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
    if (*e.lastmod != *held.lastmod) {
      return false;
    }
    if (e.lastmod_date_only) {
      // A date (plain sitemaps): a change later that day keeps it. Bytes
      // fetched after the day ended, in any time zone (UTC+14 ends it 14 h
      // after UTC), are current; bytes fetched during it may not be, and
      // are fetched again (the same bytes then log nothing).
      return held.fetched_at && *held.fetched_at >= *e.lastmod + std::chrono::hours(24 + 14);
    }
    return true;
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

std::optional<rs::Timestamp> applied_through(const Watermark& w) {
  if (w.baseline_at && w.last_uri.empty() && w.last_position < 0 && (!w.last_time || *w.last_time < *w.baseline_at)) {
    return w.last_time ? std::optional<rs::Timestamp>(*w.baseline_at) : std::nullopt;
  }
  return w.last_time;
}

ResourceRecord record_for(const rs::Entry& e, const store::BlobInfo& blob, const std::string& served_from,
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

void ChunkHandler::on_entry(rs::Entry&& e, uint64_t) {
  if (m_stopped) {
    return;
  }
  m_pending.push_back(std::move(e));
  if (m_pending.size() >= (m_flushed || m_first == 0 ? m_chunk : m_first)) {
    drain();
  }
}

void ChunkHandler::on_rejected_entry(rs::Entry&& e, uint64_t line, const std::string& reason) {
  if (!m_stopped && m_on_rejected) {
    m_on_rejected(e, line, reason);
  }
}

bool ChunkHandler::finish() {
  if (!m_stopped && !m_pending.empty()) {
    drain();
  }
  return !m_stopped;
}

void ChunkHandler::drain() {
  m_flushed = true;
  if (!m_flush(m_pending)) {
    m_stopped = true;
  }
  m_pending.clear();
}

void RunContext::error(const std::string& url, const std::string& reason) {
  ++m_report.error_count;
  // The cause first; the URL once, after it, unless the reason names it
  // (or, for a connection's failure, its host and port) already.
  std::string line = reason;
  if (!url.empty() && reason.find(url) == std::string::npos) {
    auto u = parse_url(url);
    if (!u || reason.find(authority_of(u->host, u->port)) == std::string::npos) {
      line += " (" + url + ")";
    }
  }
  if (m_report.errors.size() < k_max_reported_errors) {
    m_report.errors.push_back(line);
  }
  if (m_run_id != 0 && m_report.error_count <= k_max_stored_errors) {
    (void)m_store.record_error(m_run_id, url, reason);
  }
}

bool RunContext::setup() {
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
  m_fetcher = std::make_shared<RetryingFetcher>(m_endpoint, m_opt.retry, m_throttle);
  // Content: each location once per round (a failing mirror must not cost
  // a full backoff before the next one is tried); rounds are retried below.
  RetryPolicy once = m_opt.retry;
  once.max_attempts = 1;
  m_content_fetcher = std::make_shared<RetryingFetcher>(m_endpoint, once, m_throttle);
  m_fetch_options = m_endpoint->base_options();
  m_fetch_options.cancel = m_opt.cancel;
  return true;
}

bool RunContext::host_allowed(const std::string& url, const rs::Entry& e, std::string& why) const {
  auto u = parse_url(url);
  if (!u) {
    why = "not a URL";
    return false;
  }
  return host_allowed(*u, url, e, why);
}

bool RunContext::host_allowed(const Url& u, const std::string& url, const rs::Entry& e, std::string& why) const {
  const HostRules& rules = m_endpoint->host_rules();
  if (!rules.scheme_allowed(u, why)) {
    return false;
  }
  if (u.scheme == "file" || m_endpoint->is_own_host(url) || rules.allowed.count(u.host) > 0) {
    return true;
  }
  // Hosts the source's own document names as mirrors of this resource.
  for (const auto& l : e.links) {
    if (l.rel == "duplicate" && origin_of(l.href) == u.origin()) {
      return true;
    }
  }
  why = "host " + u.host + " is not the source's and not in allow_hosts";
  return false;
}

bool RunContext::is_source_host(const std::string& url) const { return m_endpoint && m_endpoint->is_own_host(url); }

void RunContext::watch_rejections(ChunkHandler& h, const std::string& doc_url) {
  h.set_on_rejected([this, doc_url](const rs::Entry& e, uint64_t line, const std::string& reason) {
    {
      std::lock_guard lock(m_counters_mutex); // the committer adds a batch's counters meanwhile
      ++m_report.counters.failed;              // the run is partial
    }
    error(e.loc.empty() ? doc_url : e.loc,
          "entry rejected (" + doc_url + " line " + std::to_string(line) + "): " + reason);
    if (!e.loc.empty()) {
      m_rejected_uris.push_back(e.loc);
    }
  });
}

void RunContext::progress(const std::string& doc) {
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

Result<std::unique_ptr<SpooledDocument>> RunContext::spool(const std::string& url, rs::Capability want,
                                                           bool conditional, bool defer_validation) {
  FetchOptions o = m_fetch_options;
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
  auto doc = spool_document(*m_fetcher, url, o, m_tmp, defer_validation);
  if (!doc || (*doc)->not_modified()) {
    return doc;
  }
  if ((*doc)->deferred()) {
    // What the header says is checked now; the rest once the pass ends
    // (check_spooled, before anything of the document is applied).
    const rs::DocumentHeader* h = (*doc)->early_header();
    if (h->md && h->capability() == want) {
      return doc;
    }
  }
  if (auto r = check_spooled(**doc, want); !r) {
    return tl::unexpected(r.error());
  }
  return doc;
}

Result<void> RunContext::check_spooled(const SpooledDocument& doc, rs::Capability want) {
  const std::string& url = doc.url();
  if (auto v = doc.validated(); !v) {
    return v;
  }
  const auto& s = doc.summary();
  log_diagnostics(doc);
  if (!s.usable()) {
    return make_error(ErrorKind::invalid_document,
                      url + ": invalid document, nothing applied from it: " + doc.error_text());
  }
  if (doc.header().capability() != want) {
    return make_error(ErrorKind::invalid_document,
                      url + ": expected a " + std::string(rs::to_string(want)) + ", got capability '" +
                          doc.header().md->capability.value_or("") + "'");
  }
  return {};
}

void RunContext::hold_commits_until(std::function<Result<void>()> check) { m_commit_gate = std::move(check); }

Result<void> RunContext::pass_commit_gate() {
  if (!m_commit_gate) {
    return {};
  }
  auto check = std::exchange(m_commit_gate, {});
  return check();
}

void RunContext::log_diagnostics(const SpooledDocument& doc) {
  const auto& s = doc.summary();
  if (s.diagnostics.empty()) {
    return;
  }
  if (s.dropped_values > 0 || s.rejected_entries > 0) {
    note(doc.url() + ": " + std::to_string(s.dropped_values) + " unusable value(s) dropped, " +
         std::to_string(s.rejected_entries) + " entr" + (s.rejected_entries == 1 ? "y" : "ies") +
         " rejected (the rest kept; each is in the log)");
  }
  {
    // A list polled every minute with the same deviations says them once,
    // until they change (a new document, or a restart).
    static std::mutex mutex;
    static std::map<std::string, std::string> said;
    std::string fingerprint = std::to_string(s.errors) + " " + std::to_string(s.warnings);
    for (const auto& d : s.diagnostics) {
      fingerprint += "\n" + d.message;
    }
    std::lock_guard lock(mutex);
    if (said.size() > 100000) {
      said.clear();
    }
    auto& last = said[m_src.name + " " + doc.url()];
    if (last == fingerprint) {
      return;
    }
    last = std::move(fingerprint);
  }
  // Each value read off the letter of the spec, dropped, or an entry
  // rejected: the operator sees which Source, document, line and why. At
  // most 20 lines a document, so a list of a million odd values cannot
  // flood the log.
  constexpr size_t k_max_lines = 20;
  size_t n = 0;
  for (const auto& d : s.diagnostics) {
    if (n++ == k_max_lines) {
      break;
    }
    log::warn(m_src.name, std::string(d.severity == rs::Severity::error ? "document error: " : "document warning: ") +
                            d.message,
              {{"url", doc.url()}, {"line", std::to_string(d.line)}});
  }
  const uint64_t found = s.errors + s.warnings;
  if (found > k_max_lines) {
    log::warn(m_src.name, "document: " + std::to_string(found - k_max_lines) + " more diagnostics not logged",
              {{"url", doc.url()}});
  }
}

void RunContext::will_name(const std::string& sha256) {
  if (!m_blobs.has_remote()) {
    return;
  }
  std::lock_guard lock(m_uploads_mutex);
  m_pending_uploads.push_back(sha256);
}

Result<void> RunContext::commit(store::Batch& batch) {
  if (cancelled()) {
    return make_error(ErrorKind::transient, "stopped (shutting down); the next run resumes from the watermark");
  }
  if (auto r = pass_commit_gate(); !r) {
    return r;
  }
  if (auto fresh = m_fresh_feeds.find(batch.feed_id); fresh != m_fresh_feeds.end() && fresh->second) {
    for (const auto& r : batch.upserts) {
      fresh->second->insert(r.uri);
    }
    for (const auto& c : batch.changes) {
      fresh->second->insert(c.resource.uri);
    }
  }
  std::vector<store::BlobStore::Writer> sealed;
  {
    std::lock_guard lock(m_uploads_mutex);
    batch.new_blobs.insert(batch.new_blobs.end(), m_pending_uploads.begin(), m_pending_uploads.end());
    m_pending_uploads.clear();
    sealed = std::exchange(m_sealed, {});
  }
  // The committer and the overlays share the batch (read only): the
  // overlays point into it rather than copy its 1,000 records.
  auto shared = std::make_shared<const store::Batch>(std::move(batch));
  std::unordered_map<std::string_view, const ResourceRecord*> overlay;
  std::unordered_map<std::string_view, const store::RetryRecord*> retry_overlay;
  overlay.reserve(shared->upserts.size());
  retry_overlay.reserve(shared->upserts.size() + shared->retries.size());
  for (const auto& r : shared->upserts) {
    overlay[r.uri] = &r;
    retry_overlay[r.uri] = nullptr; // stored: its retry is cleared
  }
  for (const auto& r : shared->retries) {
    retry_overlay[r.uri] = r.change ? &r : nullptr;
  }
  auto r = m_committer->submit(shared, std::move(sealed), [this](const store::RunCounters& recorded) {
    std::lock_guard lock(m_counters_mutex);
    m_report.counters += recorded;
  });
  if (r) {
    m_in_flight.push_back(InFlight{std::move(shared), std::move(overlay), std::move(retry_overlay)});
    while (m_in_flight.size() > Committer::k_in_flight) {
      m_in_flight.pop_front(); // committed: submit() waited for it
    }
  }
  return r;
}

Result<void> RunContext::drain() {
  auto r = m_committer->wait();
  m_in_flight.clear();
  return r;
}

Result<Watermark> RunContext::settled_watermark(int64_t feed) {
  if (auto r = drain(); !r) {
    return tl::unexpected(r.error());
  }
  return m_store.watermark(feed);
}

Result<std::unordered_map<std::string, ResourceRecord>> RunContext::held_for(int64_t feed, const std::vector<std::string>& uris) {
  auto fresh = m_fresh_feeds.find(feed);
  if (fresh == m_fresh_feeds.end()) {
    auto any = m_store.holds_any(feed);
    if (!any) {
      return tl::unexpected(any.error());
    }
    fresh = m_fresh_feeds.emplace(feed, *any ? std::nullopt : std::optional<UriBloom>(UriBloom{})).first;
  }
  Result<std::unordered_map<std::string, ResourceRecord>> held;
  if (fresh->second) {
    std::vector<std::string> perhaps; // committed by this run, or a false positive
    for (const auto& u : uris) {
      if (fresh->second->maybe_contains(u)) {
        perhaps.push_back(u);
      }
    }
    if (!perhaps.empty()) {
      held = m_store.resources(feed, perhaps);
    }
  } else {
    held = m_store.resources(feed, uris);
  }
  if (held) {
    for (const InFlight& f : m_in_flight) { // the newest last: its state wins
      for (const auto& u : uris) {
        if (auto it = f.overlay.find(u); it != f.overlay.end()) {
          (*held)[u] = *it->second;
        }
      }
    }
  }
  return held;
}

Result<std::unordered_map<std::string, store::RetryRecord>> RunContext::pending_for(int64_t feed,
                                                                                   const std::vector<std::string>& uris) {
  auto pending = m_store.pending_changes(feed, uris);
  if (pending) {
    for (const InFlight& f : m_in_flight) { // the newest last
      for (const auto& u : uris) {
        if (auto it = f.retry_overlay.find(u); it != f.retry_overlay.end()) {
          if (it->second) {
            (*pending)[u] = *it->second;
          } else {
            pending->erase(u);
          }
        }
      }
    }
  }
  return pending;
}

void RunContext::remember_validators(const SpooledDocument& d, std::vector<std::string> parts) {
  ValidatorCache::Validators v{d.response().header("etag"), d.response().header("last-modified"), std::move(parts)};
  const std::string key = m_src.name + " " + d.url();
  if (v.etag.empty() && v.last_modified.empty()) {
    m_validators.forget(key);
  } else {
    m_validators.put(key, std::move(v));
  }
}

store::RetryRecord RunContext::retry_for(const rs::Entry& e, std::optional<rs::Change> change,
                             std::optional<rs::Timestamp> time, const std::string& reason, int attempts) const {
  store::RetryRecord r;
  r.uri = e.loc;
  r.entry = e;
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

Result<std::string> fetch_body(RunContext& ctx, const std::string& url, uint64_t max_bytes) {
  std::string body;
  FetchOptions o = ctx.fetch_options();
  o.max_body_bytes = max_bytes;
  o.restart = [&body] {
    body.clear();
    return true;
  };
  auto r = ctx.fetcher()->fetch(url, o, [&body](const char* d, size_t n) {
    body.append(d, n);
    return true;
  });
  if (!r) {
    return tl::unexpected(r.error());
  }
  if (r->status < 200 || r->status > 299) {
    return tl::unexpected(status_error(url, r->status));
  }
  return body;
}

namespace {

// Answers larger than this are not for the pipelined path: they are read
// whole into memory there.
constexpr uint64_t k_pipelined_max_body = 256 * 1024;

bool has_duplicates(const rs::Entry& e) {
  for (const auto& l : e.links) {
    if (l.rel == "duplicate" && !l.href.empty()) {
      return true;
    }
  }
  return false;
}

} // namespace

PipelinedOrigin* RunContext::pipeline_for(const rs::Entry& e, std::string& target) {
  if (!m_src.pipelining || has_duplicates(e)) {
    return nullptr;
  }
  if (const auto& x = expected_of(e); x.length && *x.length > k_pipelined_max_body) {
    return nullptr;
  }
  auto u = parse_url(e.loc);
  if (!u || u->scheme != "http") {
    return nullptr; // https goes the ordinary way (cpp-httplib's TLS)
  }
  std::string origin = u->origin();
  std::lock_guard lock(m_pipelines_mutex);
  auto it = m_pipelines.find(origin);
  if (it == m_pipelines.end()) {
    auto headers = m_endpoint->direct_headers(e.loc, m_fetch_options);
    if (!headers || !m_throttle || !m_throttle->robots_known(origin)) {
      return nullptr; // robots.txt is read by the first ordinary request
    }
    PipelineSettings s;
    s.connect_timeout = m_fetch_options.connect_timeout;
    s.read_timeout = m_fetch_options.read_timeout;
    s.max_body_bytes = std::min(k_pipelined_max_body, m_fetch_options.max_body_bytes);
    s.headers.assign(headers->begin(), headers->end());
    s.addresses = m_fetch_options.addresses;
    s.cancel = m_opt.cancel;
    s.max_connections = m_fetch_options.max_connections;
    s.requests_per_second = m_fetch_options.requests_per_second;
    it = m_pipelines.emplace(origin, std::make_unique<PipelinedOrigin>(*u, std::move(s), m_throttle)).first;
  }
  PipelinedOrigin* p = it->second.get();
  if (!p->usable()) {
    // A verdict for a day is told once a day, whichever run meets it; one
    // for this run only, once in the run.
    const std::string why = p->broken_reason();
    if (why.ends_with("(for this run)") ? m_pipeline_warned.insert(origin).second
                                        : pipelining::first_telling(origin)) {
      log::warn(m_src.name, "pipelining turned off for " + origin + ": " + why + "; its requests go one at a time",
                {});
    }
    return nullptr;
  }
  std::string why;
  if (!host_allowed(*u, e.loc, e, why)) {
    return nullptr;
  }
  target = std::move(u->target);
  return p;
}

std::vector<Result<FetchedContent>> RunContext::fetch_all(const std::vector<const rs::Entry*>& entries) {
  auto results = fetch_slice(*this, entries);
  stage_sealed(results);
  return results;
}

void RunContext::stage_sealed(std::vector<Result<FetchedContent>>& results) {
  std::lock_guard lock(m_uploads_mutex);
  for (auto& r : results) {
    if (r && r->sealed) {
      m_sealed.push_back(std::move(*r->sealed));
      r->sealed.reset();
    }
  }
}

void RunContext::error(const std::string& url, const Error& e) {
  m_report.database_unreachable = m_report.database_unreachable || e.kind == ErrorKind::database;
  m_report.disk_full = m_report.disk_full || is_disk_full(e);
  error(url, e.message);
}

bool RunContext::all_seen(int64_t feed) const {
  auto it = m_fresh_feeds.find(feed);
  return it != m_fresh_feeds.end() && it->second.has_value();
}

bool RunContext::never_logged(int64_t feed, const std::vector<ChangeRecord>& changes) const {
  auto it = m_fresh_feeds.find(feed);
  if (it == m_fresh_feeds.end() || !it->second) {
    return false;
  }
  for (const auto& c : changes) {
    if (it->second->maybe_contains(c.resource.uri)) {
      return false;
    }
  }
  return true;
}

} // namespace tributary::sync

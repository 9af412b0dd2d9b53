#include "store/memory_store.h"

#include "store/history_check.h"
#include "store/history_rule.h"

#include <chrono>
#include <algorithm>
#include <set>
#include <tuple>

namespace tributary::store {

struct MemoryStore::Data {
  std::mutex mutex;
  std::map<std::string, std::pair<int64_t, std::string>> sources; // name -> (id, url)
  std::map<std::pair<int64_t, std::string>, int64_t> feeds;       // (source, caplist) -> id
  int64_t next_id = 1;
  std::map<int64_t, std::map<std::string, ResourceRecord>> resources; // feed -> uri -> record
  std::map<int64_t, std::map<std::string, int64_t>> seen;             // feed -> uri -> run
  // feed -> uri -> (retry, the listing run that last named it or 0)
  std::map<int64_t, std::map<std::string, std::pair<RetryRecord, int64_t>>> retries;
  std::map<int64_t, Watermark> watermarks;
  std::map<int64_t, std::vector<ChangeRecord>> log;
  std::map<int64_t, std::unordered_map<std::string, LogHead>> heads; // feed -> uri -> its last log entry
  std::vector<std::pair<int64_t, LoggedChange>> global_log; // (feed, change), in seq order
  std::map<int64_t, RunInfo> runs;
  std::map<int64_t, std::vector<std::pair<std::string, std::string>>> errors;
  std::map<int64_t, std::string> leased; // source -> who holds it
  std::map<int64_t, DeletionHold> holds;  // feed -> its held deletions
};

namespace {

void append_global(MemoryStore::Data& d, int64_t feed, const ChangeRecord& c) {
  LoggedChange l;
  l.seq = static_cast<int64_t>(d.global_log.size()) + 1;
  l.feed_id = feed;
  l.change = c.change;
  l.recorded_at = std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
  l.upstream_datetime = c.upstream_datetime;
  l.resource = c.resource;
  d.global_log.emplace_back(feed, std::move(l));
}

Timestamp now_us() {
  return std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
}

// The change log's rule (history_rule.h): logs what it admits of `proposed`.
RunCounters log_admitted(MemoryStore::Data& d, int64_t feed, const std::vector<ChangeRecord>& proposed,
                         const std::vector<ResourceRecord>& stored) {
  RunCounters logged;
  std::unordered_map<std::string, const ResourceRecord*> held_after;
  for (const auto& r : stored) {
    held_after.emplace(r.uri, &r);
  }
  auto& log = d.log[feed];
  for (auto& c : admit_all(d.heads[feed], proposed, held_after)) {
    ++(c.change == rs::Change::created ? logged.created
       : c.change == rs::Change::deleted ? logged.deleted
                                          : logged.updated);
    log.push_back(std::move(c));
    append_global(d, feed, log.back());
  }
  return logged;
}

} // namespace

MemoryStore::MemoryStore() : m_data(std::make_shared<Data>()) {}

Result<std::vector<FeedInfo>> MemoryStore::feeds() {
  std::lock_guard lock(m_data->mutex);
  std::vector<FeedInfo> out;
  for (const auto& [key, id] : m_data->feeds) {
    FeedInfo f;
    f.feed_id = id;
    f.source_id = key.first;
    f.capability_list_url = key.second;
    for (const auto& [name, src] : m_data->sources) {
      if (src.first == key.first) {
        f.source_name = name;
      }
    }
    out.push_back(std::move(f));
  }
  std::sort(out.begin(), out.end(), [](const FeedInfo& a, const FeedInfo& b) {
    return std::tie(a.source_name, a.feed_id) < std::tie(b.source_name, b.feed_id);
  });
  return out;
}

Result<std::vector<ResourceRecord>> MemoryStore::live_resources(int64_t feed_id, const std::string& after_uri,
                                                                size_t limit) {
  std::lock_guard lock(m_data->mutex);
  std::vector<ResourceRecord> out;
  const auto& feed = m_data->resources[feed_id];
  for (auto it = after_uri.empty() ? feed.begin() : feed.upper_bound(after_uri); it != feed.end() && out.size() < limit;
       ++it) {
    if (it->second.state == ResourceState::live) {
      out.push_back(it->second);
    }
  }
  return out;
}

Result<std::optional<ResourceRecord>> MemoryStore::resource(int64_t feed_id, const std::string& uri) {
  std::lock_guard lock(m_data->mutex);
  const auto& feed = m_data->resources[feed_id];
  auto it = feed.find(uri);
  return it == feed.end() ? std::nullopt : std::optional<ResourceRecord>(it->second);
}

Result<std::vector<LoggedChange>> MemoryStore::changes(const std::vector<int64_t>& feed_ids, int64_t after_seq,
                                                       size_t limit) {
  std::lock_guard lock(m_data->mutex);
  std::vector<LoggedChange> out;
  for (const auto& [feed, change] : m_data->global_log) {
    if (change.seq > after_seq && std::find(feed_ids.begin(), feed_ids.end(), feed) != feed_ids.end()) {
      out.push_back(change);
      if (out.size() >= limit) {
        break;
      }
    }
  }
  return out;
}

Result<std::vector<ChangedKey>> MemoryStore::changed_keys(const std::vector<int64_t>& feed_ids, int64_t after_seq,
                                                          int64_t up_to_seq, size_t limit) {
  std::lock_guard lock(m_data->mutex);
  std::vector<ChangedKey> out;
  for (const auto& [feed, change] : m_data->global_log) {
    if (change.seq > after_seq && change.seq <= up_to_seq &&
        std::find(feed_ids.begin(), feed_ids.end(), feed) != feed_ids.end()) {
      out.push_back(ChangedKey{change.seq, feed, change.resource.uri});
      if (out.size() >= limit) {
        break;
      }
    }
  }
  return out;
}

Result<std::vector<int64_t>> MemoryStore::changed_feeds(int64_t after_seq, int64_t up_to_seq) {
  std::lock_guard lock(m_data->mutex);
  std::set<int64_t> feeds;
  for (const auto& [feed, change] : m_data->global_log) {
    if (change.seq > after_seq && change.seq <= up_to_seq) {
      feeds.insert(feed);
    }
  }
  return std::vector<int64_t>(feeds.begin(), feeds.end());
}

Result<int64_t> MemoryStore::last_seq() {
  std::lock_guard lock(m_data->mutex);
  return static_cast<int64_t>(m_data->global_log.size());
}

Result<int64_t> MemoryStore::ensure_source(const std::string& name, const std::string& url) {
  std::lock_guard lock(m_data->mutex);
  auto it = m_data->sources.find(name);
  if (it != m_data->sources.end()) {
    it->second.second = url;
    return it->second.first;
  }
  const int64_t id = m_data->next_id++;
  m_data->sources[name] = {id, url};
  return id;
}

Result<int64_t> MemoryStore::ensure_feed(int64_t source_id, const std::string& capability_list_url) {
  std::lock_guard lock(m_data->mutex);
  auto key = std::make_pair(source_id, capability_list_url);
  auto it = m_data->feeds.find(key);
  if (it != m_data->feeds.end()) {
    return it->second;
  }
  const int64_t id = m_data->next_id++;
  m_data->feeds[key] = id;
  return id;
}

Result<Watermark> MemoryStore::watermark(int64_t feed_id) {
  std::lock_guard lock(m_data->mutex);
  auto it = m_data->watermarks.find(feed_id);
  return it == m_data->watermarks.end() ? Watermark{} : it->second;
}

Result<bool> MemoryStore::holds_any(int64_t feed_id) {
  std::lock_guard lock(m_data->mutex);
  auto it = m_data->resources.find(feed_id);
  auto log = m_data->log.find(feed_id);
  return (it != m_data->resources.end() && !it->second.empty()) || (log != m_data->log.end() && !log->second.empty());
}

Result<std::unordered_map<std::string, ResourceRecord>> MemoryStore::resources(int64_t feed_id,
                                                                             const std::vector<std::string>& uris) {
  std::lock_guard lock(m_data->mutex);
  std::unordered_map<std::string, ResourceRecord> out;
  const auto& feed = m_data->resources[feed_id];
  for (const auto& u : uris) {
    if (auto it = feed.find(u); it != feed.end()) {
      out[u] = it->second;
    }
  }
  return out;
}

Result<void> MemoryStore::for_each_resource(int64_t feed_id, const std::function<void(const ResourceRecord&)>& fn) {
  std::vector<ResourceRecord> copy;
  {
    std::lock_guard lock(m_data->mutex);
    for (const auto& [uri, r] : m_data->resources[feed_id]) {
      copy.push_back(r);
    }
  }
  for (const auto& r : copy) {
    fn(r);
  }
  return {};
}

Result<RunCounters> MemoryStore::apply(const Batch& b) {
  std::lock_guard lock(m_data->mutex);
  // Check everything first: a batch applies whole or not at all.
  std::set<std::string> uris;
  for (const auto& r : b.upserts) {
    if (!uris.insert(r.uri).second) {
      return make_error(ErrorKind::conflict, "apply batch: " + r.uri + " appears twice in one batch");
    }
  }
  if (b.watermark && b.watermark->last_position > 0x7fffffff) {
    return make_error(ErrorKind::permanent, "apply batch: last_position out of range");
  }
  auto& feed = m_data->resources[b.feed_id];
  auto& retries = m_data->retries[b.feed_id];
  for (const auto& r : b.upserts) {
    feed[r.uri] = r;
    retries.erase(r.uri);
  }
  for (const auto& r : b.retries) {
    retries[r.uri].first = r;
  }
  if (!b.seen.empty() && b.run_id != 0) {
    for (const auto& u : b.seen) {
      if (auto it = retries.find(u); it != retries.end()) {
        it->second.second = b.run_id;
      }
    }
  }
  const RunCounters logged = log_admitted(*m_data, b.feed_id, b.changes, b.upserts);
  RunCounters recorded = b.counters;
  recorded.created = logged.created;
  recorded.updated = logged.updated;
  recorded.deleted = logged.deleted;
  if (b.run_id != 0) {
    for (const auto& u : b.seen) {
      if (feed.count(u)) {
        m_data->seen[b.feed_id][u] = b.run_id;
      }
    }
    auto& run = m_data->runs[b.run_id];
    run.counters += recorded;
  }
  if (b.watermark) {
    m_data->watermarks[b.feed_id] = *b.watermark;
  }
  return recorded;
}

Result<DeletionOutcome> MemoryStore::delete_unseen(int64_t feed_id, int64_t run_id, const std::optional<Watermark>& w,
                                                   double max_share, bool /*all_seen: it looks anyway*/,
                                                   const DeferLog& defer) {
  std::lock_guard lock(m_data->mutex);
  DeletionOutcome out;
  auto& seen = m_data->seen[feed_id];
  const Timestamp at = w && w->baseline_at ? *w->baseline_at : now_us();
  auto unseen = [&](const std::string& uri, const ResourceRecord& r) {
    auto it = seen.find(uri);
    return r.state == ResourceState::live && (it == seen.end() || it->second != run_id) &&
           (!r.change_datetime || *r.change_datetime <= at);
  };
  for (const auto& [uri, r] : m_data->resources[feed_id]) {
    out.live += r.state == ResourceState::live;
    out.unseen += unseen(uri, r);
  }
  if (w) {
    m_data->watermarks[feed_id] = *w;
  }
  auto hold = m_data->holds.find(feed_id);
  const bool confirmed = hold != m_data->holds.end() && hold->second.confirmed;
  if (!confirmed && max_share < 1.0 && static_cast<double>(out.unseen) > max_share * static_cast<double>(out.live)) {
    out.held = true;
    DeletionHold& h = m_data->holds[feed_id];
    if (h.feed_id == 0) {
      h.feed_id = feed_id;
      h.since = std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
      for (const auto& [key, id] : m_data->feeds) {
        if (id == feed_id) {
          h.capability_list_url = key.second;
        }
      }
    }
    h.unseen = out.unseen;
    h.live = out.live;
    h.run_id = run_id;
    return out;
  }
  m_data->holds.erase(feed_id);
  std::vector<ChangeRecord> deletions;
  std::vector<ResourceRecord> stored;
  for (auto& [uri, r] : m_data->resources[feed_id]) {
    if (unseen(uri, r)) {
      r.state = ResourceState::deleted;
      r.change_datetime = at;
      ChangeRecord c{rs::Change::deleted, at, r};
      if (!defer || !defer(c)) {
        deletions.push_back(std::move(c));
      }
      stored.push_back(r);
      ++out.deleted;
    }
  }
  out.logged = log_admitted(*m_data, feed_id, deletions, stored).deleted;
  std::erase_if(m_data->retries[feed_id], [run_id](const auto& kv) { return kv.second.second != run_id; });
  m_data->runs[run_id].counters.deleted += out.logged;
  return out;
}

Result<std::vector<DeletionHold>> MemoryStore::confirm_deletions(int64_t source_id) {
  std::lock_guard lock(m_data->mutex);
  std::vector<DeletionHold> out;
  for (const auto& [key, id] : m_data->feeds) {
    if (auto it = m_data->holds.find(id); key.first == source_id && it != m_data->holds.end()) {
      it->second.confirmed = true;
      out.push_back(it->second);
    }
  }
  return out;
}

Result<std::unordered_map<std::string, RetryRecord>> MemoryStore::pending_changes(int64_t feed_id,
                                                                                 const std::vector<std::string>& uris) {
  std::lock_guard lock(m_data->mutex);
  std::unordered_map<std::string, RetryRecord> out;
  auto& feed = m_data->retries[feed_id];
  for (const auto& uri : uris) {
    if (auto it = feed.find(uri); it != feed.end() && it->second.first.change) {
      out.emplace(uri, it->second.first);
    }
  }
  return out;
}

Result<std::vector<RetryRecord>> MemoryStore::due_retries(int64_t feed_id, Timestamp now, size_t limit) {
  std::lock_guard lock(m_data->mutex);
  std::vector<RetryRecord> out;
  for (const auto& [uri, r] : m_data->retries[feed_id]) {
    if (r.first.next_attempt_at <= now) {
      out.push_back(r.first);
    }
  }
  std::sort(out.begin(), out.end(), [](const RetryRecord& a, const RetryRecord& b) {
    return std::tie(a.next_attempt_at, a.uri) < std::tie(b.next_attempt_at, b.uri);
  });
  if (out.size() > limit) {
    out.resize(limit);
  }
  return out;
}

Result<std::unique_ptr<Store>> MemoryStore::open_session() {
  return std::unique_ptr<Store>(new MemoryStore(m_data));
}

Result<LockAttempt> MemoryStore::try_lock_source(int64_t source_id, const std::string& who) {
  struct Lease : SourceLease {
    std::shared_ptr<Data> data;
    int64_t source = 0;
    ~Lease() override {
      std::lock_guard lock(data->mutex);
      data->leased.erase(source);
    }
  };
  std::lock_guard lock(m_data->mutex);
  LockAttempt out;
  if (auto it = m_data->leased.find(source_id); it != m_data->leased.end()) {
    out.holder = it->second;
    return out;
  }
  m_data->leased[source_id] = who;
  auto lease = std::make_unique<Lease>();
  lease->data = m_data;
  lease->source = source_id;
  out.lease = std::move(lease);
  return out;
}

Result<int64_t> MemoryStore::begin_run(int64_t source_id, RunMode mode, RunTrigger trigger) {
  std::lock_guard lock(m_data->mutex);
  const int64_t id = m_data->next_id++;
  RunInfo info;
  info.id = id;
  info.source_id = source_id;
  info.mode = mode;
  info.status = RunStatus::running;
  info.node = node_name();
  info.trigger = trigger;
  info.started_at = std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
  m_data->runs[id] = info;
  return id;
}

Result<void> MemoryStore::record_error(int64_t run_id, const std::string& url, const std::string& reason) {
  std::lock_guard lock(m_data->mutex);
  m_data->errors[run_id].emplace_back(url, reason);
  return {};
}

Result<int64_t> MemoryStore::record_failed_run(int64_t source_id, RunMode mode, Timestamp started,
                                               const std::string& message, RunTrigger trigger) {
  auto id = begin_run(source_id, mode, trigger);
  (void)finish_run(*id, RunStatus::failed, message, mode);
  std::lock_guard lock(m_data->mutex);
  m_data->runs[*id].started_at = started;
  return id;
}

Result<void> MemoryStore::finish_run(int64_t run_id, RunStatus status, const std::string& message, RunMode mode) {
  std::lock_guard lock(m_data->mutex);
  auto& run = m_data->runs[run_id];
  run.status = status;
  run.mode = mode;
  run.message = message;
  run.finished_at = std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
  return {};
}

Result<RunInfo> MemoryStore::run(int64_t run_id) {
  std::lock_guard lock(m_data->mutex);
  auto it = m_data->runs.find(run_id);
  if (it == m_data->runs.end()) {
    return make_error(ErrorKind::not_found, "no sync run " + std::to_string(run_id));
  }
  return it->second;
}

Result<std::vector<SourceStats>> MemoryStore::source_stats() {
  std::lock_guard lock(m_data->mutex);
  std::vector<SourceStats> out;
  for (const auto& [name, idurl] : m_data->sources) {
    SourceStats st;
    st.source_id = idurl.first;
    st.name = name;
    st.url = idurl.second;
    for (const auto& [key, feed] : m_data->feeds) {
      if (key.first != st.source_id) {
        continue;
      }
      if (auto it = m_data->resources.find(feed); it != m_data->resources.end()) {
        for (const auto& [uri, r] : it->second) {
          if (r.state == ResourceState::live) {
            ++st.live;
            st.bytes += r.length.value_or(0);
          } else {
            ++st.deleted;
          }
        }
      }
      if (auto it = m_data->retries.find(feed); it != m_data->retries.end()) {
        st.retrying += it->second.size();
      }
      if (auto it = m_data->watermarks.find(feed); it != m_data->watermarks.end()) {
        if (it->second.last_time && (!st.newest_change || *st.newest_change < *it->second.last_time)) {
          st.newest_change = it->second.last_time;
        }
        if (it->second.baseline_at && (!st.baseline_at || *st.baseline_at < *it->second.baseline_at)) {
          st.baseline_at = it->second.baseline_at;
        }
      }
    }
    for (const auto& [key, feed] : m_data->feeds) {
      if (auto it = m_data->holds.find(feed); key.first == st.source_id && it != m_data->holds.end()) {
        st.deletion_holds.push_back(it->second);
      }
    }
    for (const auto& [id, run] : m_data->runs) {
      if (run.source_id != st.source_id) {
        continue;
      }
      st.last_run = run;
      if (run.status == RunStatus::succeeded) {
        st.last_success = run;
      } else if (run.status == RunStatus::failed) {
        st.last_failure = run;
      }
    }
    out.push_back(std::move(st));
  }
  return out;
}

Result<std::vector<RunInfo>> MemoryStore::recent_runs(const std::string& name, size_t limit) {
  std::lock_guard lock(m_data->mutex);
  std::vector<RunInfo> out;
  auto src = m_data->sources.find(name);
  if (src == m_data->sources.end()) {
    return out;
  }
  for (auto it = m_data->runs.rbegin(); it != m_data->runs.rend() && out.size() < limit; ++it) {
    if (it->second.source_id == src->second.first) {
      out.push_back(it->second);
    }
  }
  return out;
}

std::vector<ChangeRecord> MemoryStore::change_log(int64_t feed_id) const {
  std::lock_guard lock(m_data->mutex);
  auto it = m_data->log.find(feed_id);
  return it == m_data->log.end() ? std::vector<ChangeRecord>{} : it->second;
}

} // namespace tributary::store

namespace tributary::store {

Result<void> MemoryStore::for_each_history(int64_t feed_id, const std::function<void(const UriHistory&)>& fn) {
  std::map<std::string, UriHistory> all;
  {
    std::lock_guard lock(m_data->mutex);
    int64_t seq = 0;
    for (const auto& [feed, c] : m_data->global_log) {
      ++seq;
      if (feed != feed_id) {
        continue;
      }
      UriHistory& h = all[c.resource.uri];
      h.log.push_back(HistoryEntry{c.seq, c.change, c.upstream_datetime, c.resource.hashes, c.resource.blob_sha256});
    }
    for (const auto& [uri, r] : m_data->resources[feed_id]) {
      all[uri].held = r;
    }
    for (const auto& [uri, retry] : m_data->retries[feed_id]) {
      all[uri].retrying = true;
    }
  }
  for (auto& [uri, h] : all) {
    h.feed_id = feed_id;
    h.uri = uri;
    fn(h);
  }
  return {};
}

} // namespace tributary::store

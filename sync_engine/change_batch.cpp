// Room sync_engine/feed_writer (feed_writer.h): a batch of changes of one
// list, applied in one transaction with the watermark it reaches.
#include "sync_engine/feed_writer.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace tributary::sync {

namespace {

// One batch of changes of one list (change_batch), in its steps: what the
// store holds of its URIs, what each URI's last change asks (nothing, a
// deletion, a record we can make from bytes held, or a fetch), the fetch,
// then every change proposed to the log in upstream order with the state
// it left, and the watermark the batch reaches.
class ChangeBatch {
public:
  ChangeBatch(RunContext& ctx, int64_t feed, std::vector<PendingChange>& changes, const ContentSource& source)
      : m_ctx(ctx), m_feed(feed), m_changes(changes), m_source(source) {
    m_batch.feed_id = feed;
    m_batch.run_id = ctx.run_id();
  }

  Result<void> apply(const std::string& list_url, Watermark& w, const std::function<void(Watermark&)>& settle) {
    if (auto r = look_up(); !r) {
      return r;
    }
    decide_open_kinds();
    plan();
    Result<void> ended;
    auto fetched = fetch_for_batch(m_ctx, m_source, m_to_fetch, m_batch, ended);
    if (!fetched) {
      return ended;
    }
    auto& results = *fetched;
    std::vector<std::string> transient;
    if (auto r = take_results(results, transient); !r) {
      return r;
    }
    apply_earlier_deletions();
    if (!transient.empty()) {
      // Do not move past changes we could not apply for a passing reason:
      // the next run resumes at the watermark and tries again.
      return make_error(ErrorKind::transient,
                        std::to_string(transient.size()) + " resource(s) could not be fetched (first: " +
                            transient.front() + "); this batch was not applied and the next run resumes at " +
                            (w.last_time ? rs::format_w3c_datetime(*w.last_time) : std::string("the start")));
    }
    propose_changes();
    for (auto& [uri, rec] : m_final) {
      m_batch.upserts.push_back(std::move(rec));
    }
    Watermark next = reached(list_url, w);
    if (settle) {
      settle(next);
    }
    m_batch.watermark = next;
    if (auto r = m_ctx.commit(m_batch); !r) {
      return r;
    }
    w = next;
    return {};
  }

private:
  // The last change of each resource decides its final state; each change
  // is logged, but a resource is fetched at most once.
  Result<void> look_up() {
    for (size_t i = 0; i < m_changes.size(); ++i) {
      if (!m_changes[i].selected) {
        continue;
      }
      auto [it, inserted] = m_last.try_emplace(m_changes[i].entry.loc, i);
      if (inserted) {
        m_uris.push_back(m_changes[i].entry.loc);
      } else {
        it->second = i;
      }
    }
    auto held = m_ctx.held_for(m_feed, m_uris);
    if (!held) {
      return tl::unexpected(held.error());
    }
    m_held = std::move(*held);
    // Changes of these URIs that failed earlier and wait to be retried: one
    // that a later change supersedes now is logged before it (as a change
    // between others in one batch is), else the Source's change would never
    // reach our log (the crash matrix found them: a 'created' whose bytes
    // had already been updated when fetched, then the update applied).
    auto superseded = m_ctx.pending_for(m_feed, m_uris);
    if (!superseded) {
      return tl::unexpected(superseded.error());
    }
    m_superseded = std::move(*superseded);
    return {};
  }

  // A change whose kind was left open is an update of what we hold live,
  // else a creation.
  void decide_open_kinds() {
    for (auto& c : m_changes) {
      if (!c.kind_open || !c.entry.md || c.entry.change() == rs::Change::deleted) {
        continue;
      }
      auto it = m_held.find(c.entry.loc);
      c.entry.md->change =
          it != m_held.end() && it->second.state == ResourceState::live ? rs::Change::updated : rs::Change::created;
    }
  }

  // What each URI's last change asks for.
  void plan() {
    for (const auto& uri : m_uris) {
      const PendingChange& c = m_changes[m_last[uri]];
      const rs::Entry& e = c.entry;
      auto it = m_held.find(uri);
      if (it != m_held.end() && it->second.change_datetime && c.time < *it->second.change_datetime) {
        // Older than the state we hold (a change read again: an overlap, a
        // repair that moved the watermark back): nothing to fetch or retry,
        // and nothing the log does not say already.
        m_unchanged.insert(uri);
        continue;
      }
      if (auto p = m_superseded.find(uri);
          p != m_superseded.end() && p->second.change_datetime && c.time <= *p->second.change_datetime) {
        // A change as old as one waiting to be retried: that one stands.
        m_unchanged.insert(uri);
        continue;
      }
      if (c.entry.change() == rs::Change::deleted) {
        plan_deletion(uri, c, it);
        continue;
      }
      if (it != m_held.end() && same_content(it->second, e)) {
        const ResourceRecord& h = it->second;
        if (h.change_datetime && c.time > *h.change_datetime) {
          // A later change upstream to the bytes we hold already: we fetched
          // them for an earlier change, after the Source had changed again
          // (at 1,000 changes/s, 0.5% of updates were so superseded within a
          // second). It happened upstream, so it is logged, and not fetched.
          ResourceRecord r = h;
          r.change_datetime = c.time;
          r.lastmod = e.lastmod ? e.lastmod : r.lastmod;
          m_final[uri] = std::move(r);
          continue;
        }
        m_unchanged.insert(uri); // already in this state (a re-applied or re-baselined change)
        continue;
      }
      if (!from_blob_held(uri, e)) {
        m_to_fetch.push_back(&e);
      }
    }
  }

  void plan_deletion(const std::string& uri, const PendingChange& c,
                     std::unordered_map<std::string, ResourceRecord>::const_iterator it) {
    if (it != m_held.end() && it->second.state == ResourceState::deleted) {
      // Deleted already (a baseline that no longer found it, or the same
      // change read again in the overlap before a list's `at`): logged
      // once, when it was applied.
      m_unchanged.insert(uri);
      return;
    }
    ResourceRecord r = it != m_held.end() ? it->second : record_from_entry(c.entry, ResourceState::deleted);
    r.state = ResourceState::deleted;
    r.lastmod = c.entry.lastmod ? c.entry.lastmod : r.lastmod;
    r.change_datetime = c.time;
    m_final[uri] = std::move(r);
  }

  // Content already present (another source, or an earlier copy): the
  // record made from the blob, and true; false when it must be fetched.
  bool from_blob_held(const std::string& uri, const rs::Entry& e) {
    const rs::HashValue* want = rs::strongest_hash(offered_hashes(e));
    if (!want || want->known() != rs::HashAlgorithm::sha256) {
      return false;
    }
    auto held_blob = m_ctx.blobs().retain(want->hex);
    if (!held_blob) {
      return false;
    }
    // Stored here, yet perhaps never uploaded (a batch whose upload failed
    // left it): the remote tier gets it before this batch names it (it
    // skips what it has).
    m_ctx.will_name(want->hex);
    // Its length is the blob's own, never the document's (which may be
    // absent or wrong: republished as length="0", a downstream capped its
    // fetch at 0 bytes); its one verified digest is the sha-256.
    store::BlobInfo blob;
    blob.sha256 = want->hex;
    blob.length = held_blob->length;
    blob.hashes = {*want};
    m_final[uri] = record_for(e, blob, "blob store", std::nullopt);
    return true;
  }

  // Transient failures (each already tried opt.retry.max_attempts times)
  // hold the batch back only when the source itself looks down: every
  // fetch failed that way, and from the source's own hosts. Otherwise they
  // are one location's trouble (a mirror that is blackholed, a resource
  // that always times out): that change goes to the retry table and the
  // feed moves on.
  bool source_down(const std::vector<Result<FetchedContent>>& results) const {
    bool down = !m_to_fetch.empty() && !m_source;
    for (size_t i = 0; i < m_to_fetch.size() && down; ++i) {
      down = !results[i] && results[i].error().kind == ErrorKind::transient;
    }
    if (!down) {
      return false;
    }
    for (const auto* e : m_to_fetch) {
      for (const auto& url : candidate_locations(e->loc, e->links)) {
        if (m_ctx.is_source_host(url)) {
          return true;
        }
      }
    }
    return false;
  }

  Result<void> take_results(std::vector<Result<FetchedContent>>& results, std::vector<std::string>& transient) {
    const bool down = source_down(results);
    for (size_t i = 0; i < m_to_fetch.size(); ++i) {
      const rs::Entry& e = *m_to_fetch[i];
      if (!results[i] && m_source) {
        return tl::unexpected(results[i].error()); // a package is applied whole or not at all
      }
      if (!results[i]) {
        if (results[i].error().kind == ErrorKind::transient && down) {
          transient.push_back(results[i].error().message);
        } else {
          m_failed.insert(e.loc);
          ++m_batch.counters.failed;
          m_ctx.error(e.loc, results[i].error().message);
          const PendingChange& c = m_changes[m_last[e.loc]];
          m_batch.retries.push_back(m_ctx.retry_for(e, c.entry.change(), c.time, results[i].error().message));
        }
        continue;
      }
      m_batch.counters.bytes += results[i]->blob.length;
      m_final[e.loc] = record_for(e, results[i]->blob, results[i]->served_from, results[i]->type);
    }
    return {};
  }

  // A URI whose last change in this batch failed: an earlier deletion of it
  // in the batch needs no bytes, so it is applied, and what we hold agrees
  // with the log (which logs it) while the later change waits for its
  // retry. Left as it was, an overlap read it again later, applied it then
  // and the log had to date it after the creation it preceded (the
  // randomized history test's seed 359).
  void apply_earlier_deletions() {
    for (const auto& uri : m_failed) {
      for (size_t i = m_last[uri]; i-- > 0;) {
        const PendingChange& c = m_changes[i];
        if (c.entry.loc != uri || !c.selected) {
          continue;
        }
        if (c.entry.change() == rs::Change::deleted) {
          auto it = m_held.find(uri);
          const bool newer =
              it == m_held.end() || !it->second.change_datetime || *it->second.change_datetime < c.time;
          if (it != m_held.end() && it->second.state == ResourceState::live && newer) {
            ResourceRecord r = it->second;
            r.state = ResourceState::deleted;
            r.lastmod = c.entry.lastmod ? c.entry.lastmod : r.lastmod;
            r.change_datetime = c.time;
            m_final[uri] = std::move(r);
          }
        }
        break; // the latest earlier change decides
      }
    }
  }

  // Every change read is proposed, in upstream order, with the state it
  // left where we hold that state: the store logs what moves the URI's
  // logged history forward (store/history_rule.h) and nothing it says
  // already. (An earlier change of the URI in this batch happened upstream
  // whatever became of the later one; a change as old as what we hold is
  // in the log unless a baseline jumped past it.)
  void propose_changes() {
    for (size_t i = 0; i < m_changes.size(); ++i) {
      const PendingChange& c = m_changes[i];
      const std::string& uri = c.entry.loc;
      if (!c.selected) {
        continue;
      }
      // Whatever becomes of the later change (applied, failed in turn, or
      // found held already), the earlier one happened upstream: it is
      // logged before it, once. (Its retry is cleared by the upsert,
      // replaced by the later change's retry, or cleared below for a held
      // one.)
      if (auto old = m_superseded.find(uri);
          old != m_superseded.end() && old->second.change_datetime && *old->second.change_datetime < c.time) {
        const store::RetryRecord& r = old->second;
        m_batch.changes.push_back(
            ChangeRecord{*r.change, r.change_datetime, record_from_entry(r.entry, ResourceState::live)});
        m_superseded.erase(old);
        if (m_unchanged.count(uri) && m_held.count(uri)) {
          m_final[uri] = m_held.at(uri); // written back unchanged: that clears the retry
        }
      }
      if (m_last[uri] == i && m_failed.count(uri)) {
        continue; // its retry holds it
      }
      const rs::Change change = c.entry.change().value_or(rs::Change::updated);
      const bool deletion = change == rs::Change::deleted;
      ResourceRecord state;
      if (m_last[uri] == i && m_final.count(uri)) {
        state = m_final[uri];
      } else if (auto h = m_held.find(uri);
                 m_last[uri] == i && h != m_held.end() &&
                 (deletion ? h->second.state == ResourceState::deleted : same_content(h->second, c.entry))) {
        state = h->second;
      } else {
        state = record_from_entry(c.entry, deletion ? ResourceState::deleted : ResourceState::live);
      }
      // (Created, updated and deleted are counted by the store as it logs
      // them: Store::apply.)
      m_batch.counters.unchanged += m_last[uri] == i && m_unchanged.count(uri);
      m_batch.changes.push_back(ChangeRecord{change, c.time, std::move(state)});
    }
  }

  // The watermark after the batch's last change. A Source whose clock is
  // ahead dates its changes in the future: they are applied, but the
  // watermark stops at the time we read them, so that the changes it dates
  // correctly once its clock is put right are not skipped (a change read
  // again meanwhile is a no-op).
  Watermark reached(const std::string& list_url, const Watermark& w) {
    const PendingChange& tail = m_changes.back();
    Watermark next = w;
    next.change_list_url = list_url;
    next.last_time = tail.time;
    next.last_uri = tail.entry.loc;
    next.last_position = tail.position;
    const auto now = std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
    for (const auto& c : m_changes) {
      if (c.time > now + m_ctx.src().clock_tolerance) {
        const double ahead = std::chrono::duration<double>(c.time - now).count();
        m_ctx.report().clock_ahead_seconds = std::max(m_ctx.report().clock_ahead_seconds.value_or(0.0), ahead);
      }
    }
    if (tail.time > now + m_ctx.src().clock_tolerance) {
      next.last_time = now;
      next.last_uri.clear();
      next.last_position = -1;
    }
    return next;
  }

  RunContext& m_ctx;
  int64_t m_feed;
  std::vector<PendingChange>& m_changes;
  const ContentSource& m_source;
  store::Batch m_batch;
  std::unordered_map<std::string, size_t> m_last; // by URI, its last selected change
  std::vector<std::string> m_uris;
  std::unordered_map<std::string, ResourceRecord> m_held;
  std::unordered_map<std::string, store::RetryRecord> m_superseded;
  std::unordered_map<std::string, ResourceRecord> m_final;
  std::unordered_set<std::string> m_failed;
  std::unordered_set<std::string> m_unchanged;
  std::vector<const rs::Entry*> m_to_fetch;
};

} // namespace

Result<void> change_batch(RunContext& ctx, int64_t feed, const std::string& list_url, std::vector<PendingChange>& changes,
                          Watermark& w, const ContentSource& source, const std::function<void(Watermark&)>& settle) {
  return ChangeBatch(ctx, feed, changes, source).apply(list_url, w, settle);
}

} // namespace tributary::sync

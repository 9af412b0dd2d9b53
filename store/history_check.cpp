#include "store/history_check.h"

#include "store/history_rule.h"

#include "resourcesync/datetime.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

// The change log's invariant checker (see history_check.h).
namespace tributary::store {

namespace {

// An entry, or what we hold, as the change log's rule compares states.
LogHead state_of(const HistoryEntry& e) {
  LogHead h;
  h.change = e.change;
  h.time = e.time;
  h.hashes = e.hashes;
  h.blob_sha256 = e.blob_sha256;
  return h;
}

LogHead state_of(const ResourceRecord& r) {
  LogHead h;
  h.change = r.state == ResourceState::deleted ? rs::Change::deleted : rs::Change::updated;
  h.hashes = r.hashes;
  h.blob_sha256 = r.blob_sha256;
  return h;
}

// The first digest of `h` shown in a message.
std::string digest_of(const LogHead& h) {
  if (h.blob_sha256) {
    return "sha-256 " + h.blob_sha256->substr(0, 12) + "...";
  }
  return h.hashes.empty() ? std::string("no digest") : h.hashes[0].algorithm + " " + h.hashes[0].hex.substr(0, 12) + "...";
}

std::string when(const std::optional<Timestamp>& t) { return t ? rs::format_w3c_datetime(*t) : "(no time)"; }

} // namespace

HistoryReport& HistoryReport::operator+=(const HistoryReport& o) {
  uris += o.uris;
  entries += o.entries;
  repeated += o.repeated;
  backwards += o.backwards;
  disagreeing += o.disagreeing;
  waiting += o.waiting;
  first.insert(first.end(), o.first.begin(), o.first.end());
  return *this;
}

std::optional<std::string> disagreement(const UriHistory& h) {
  const bool held_live = h.held && h.held->state == ResourceState::live;
  if (h.log.empty()) {
    if (held_live && !h.compacted) {
      return std::string("held live but never logged");
    }
    return std::nullopt;
  }
  const HistoryEntry& last = h.log.back();
  const bool logged_live = last.change != rs::Change::deleted;
  if (logged_live != held_live) {
    return std::string("the last entry (") + std::string(rs::to_string(last.change)) + " at " + when(last.time) +
           ") says " + (logged_live ? "live" : "deleted") + ", we hold it " +
           (!h.held ? "not at all" : held_live ? "live" : "deleted");
  }
  if (held_live) {
    // Every digest both name must agree (an older version logged some
    // changes with the listed md5 only).
    const LogHead logged = state_of(last);
    const LogHead held = state_of(*h.held);
    if (same_state(logged, held) == false) {
      return "the last entry (" + std::string(rs::to_string(last.change)) + " at " + when(last.time) + ") names " +
             digest_of(logged) + ", we hold " + digest_of(held);
    }
  }
  return std::nullopt;
}

void HistoryChecker::problem(const UriHistory& h, std::string what) {
  if (m_report.first.size() < m_limit) {
    m_report.first.push_back(HistoryProblem{h.feed_id, h.uri, std::move(what)});
  }
}

void HistoryChecker::check(const UriHistory& h) {
  ++m_report.uris;
  m_report.entries += h.log.size();
  std::set<std::tuple<rs::Change, Timestamp>> seen;
  std::optional<Timestamp> previous;
  const HistoryEntry* before = nullptr;
  for (const auto& e : h.log) {
    const HistoryEntry* prior = std::exchange(before, &e);
    if (!e.time) {
      // Untimed (a list without lastmod): the same change and bytes as the
      // entry before it is that entry again.
      if (prior && !prior->time && prior->change == e.change &&
          same_state(state_of(*prior), state_of(e)) == true) {
        ++m_report.repeated;
        problem(h, std::string(rs::to_string(e.change)) + " (no time) logged again (seq " + std::to_string(e.seq) +
                       ")");
      }
      continue;
    }
    {
      if (!seen.emplace(e.change, *e.time).second) {
        ++m_report.repeated;
        problem(h, std::string(rs::to_string(e.change)) + " at " + when(e.time) + " logged again (seq " +
                       std::to_string(e.seq) + ")");
      }
      if (previous && *e.time < *previous) {
        ++m_report.backwards;
        problem(h, std::string(rs::to_string(e.change)) + " at " + when(e.time) + " (seq " + std::to_string(e.seq) +
                       ") logged after a change at " + when(previous));
      }
      previous = previous ? std::max(*previous, *e.time) : *e.time;
    }
  }
  if (auto d = disagreement(h)) {
    if (h.retrying) {
      ++m_report.waiting;
    } else {
      ++m_report.disagreeing;
      problem(h, *d);
    }
  }
}

namespace {

// The change that brings the log to what we hold.
ChangeRecord corrective(const UriHistory& h) {
  ChangeRecord c;
  if (h.held) {
    c.resource = *h.held;
  } else {
    c.resource.uri = h.uri;
    c.resource.state = ResourceState::deleted;
  }
  const bool live = c.resource.state == ResourceState::live;
  const bool logged_live = !h.log.empty() && h.log.back().change != rs::Change::deleted;
  c.change = !live ? rs::Change::deleted : logged_live ? rs::Change::updated : rs::Change::created;
  // Dated by the held state's change, or just after every entry of the URI
  // when one is as late (so that it repeats no (change, time) and no time
  // goes back).
  c.upstream_datetime = c.resource.change_datetime;
  for (const auto& e : h.log) {
    if (e.time && (!c.upstream_datetime || *c.upstream_datetime <= *e.time)) {
      c.upstream_datetime = *e.time + std::chrono::microseconds(1);
    }
  }
  return c;
}

} // namespace

Result<HistoryCheck> check_history(Store& store, const std::vector<int64_t>& feeds, bool repair, size_t limit) {
  HistoryCheck out;
  for (int64_t feed : feeds) {
    HistoryChecker checker(limit);
    std::vector<ChangeRecord> fixes;
    auto walked = store.for_each_history(feed, [&](const UriHistory& h) {
      checker.check(h);
      if (repair && !h.retrying && disagreement(h)) {
        fixes.push_back(corrective(h));
      }
    });
    if (!walked) {
      return tl::unexpected(walked.error());
    }
    out.report += checker.report();
    if (out.report.first.size() > limit) {
      out.report.first.resize(limit);
    }
    for (size_t i = 0; i < fixes.size(); i += 1000) {
      Batch b;
      b.feed_id = feed;
      for (size_t j = i; j < std::min(fixes.size(), i + 1000); ++j) {
        b.upserts.push_back(fixes[j].resource);
        b.changes.push_back(fixes[j]);
      }
      if (auto r = store.apply(b); !r) {
        return tl::unexpected(r.error());
      }
      out.corrected += b.changes.size();
    }
  }
  return out;
}

} // namespace tributary::store

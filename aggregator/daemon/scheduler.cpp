#include "aggregator/daemon/scheduler.h"

#include <algorithm>

namespace tributary::agg {

std::string_view to_string(SourceState s) {
  switch (s) {
  case SourceState::idle: return "idle";
  case SourceState::syncing: return "syncing";
  case SourceState::backing_off: return "backing_off";
  case SourceState::waiting: return "waiting";
  case SourceState::busy: return "busy";
  case SourceState::paused: return "paused";
  case SourceState::disabled: return "disabled";
  }
  return "idle";
}

Scheduler::Scheduler(uint64_t seed) : m_rng(seed) {}

std::chrono::seconds Scheduler::jittered(std::chrono::seconds d) {
  const auto spread = d.count() / 10;
  if (spread <= 0) {
    return d;
  }
  std::uniform_int_distribution<long long> dist(-spread, spread);
  return std::chrono::seconds(d.count() + dist(m_rng));
}

std::chrono::seconds Scheduler::backoff(unsigned failures, std::chrono::seconds interval) {
  const std::chrono::seconds cap = std::max<std::chrono::seconds>(std::chrono::hours(1), interval);
  if (failures <= 1) {
    return std::min<std::chrono::seconds>(std::chrono::seconds(30), cap);
  }
  const unsigned shift = std::min(failures - 2, 16u);
  return std::min<std::chrono::seconds>(std::chrono::seconds(60LL << shift), cap);
}

void Scheduler::configure(const std::vector<sync::SourceConfig>& sources, Time now) {
  std::map<std::string, Entry> next;
  for (const auto& s : sources) {
    auto it = m_entries.find(s.name);
    Entry e;
    if (it != m_entries.end()) {
      e = std::move(it->second);
      m_entries.erase(it);
      e.removed = false;
      if (e.config.interval != s.interval && e.failures == 0 && !e.running) {
        e.next_run = std::min(e.next_run, now + s.interval);
      }
      if (s.audit_interval.count() == 0) {
        e.next_audit.reset();
      } else if (!e.next_audit || e.config.audit_interval != s.audit_interval) {
        e.next_audit = now + s.audit_interval;
      }
    } else {
      e.next_run = now;
      if (s.audit_interval.count() > 0) {
        e.next_audit = now + s.audit_interval;
      }
    }
    e.config = s;
    next.emplace(s.name, std::move(e));
  }
  for (auto& [name, e] : m_entries) {
    if (e.running) {
      e.removed = true;
      next.emplace(name, std::move(e));
    }
  }
  m_entries = std::move(next);
}

std::vector<Job> Scheduler::due(Time now, size_t slots, size_t stalled) {
  size_t running = 0;
  size_t suspects = 0; // running jobs of sources whose last run stalled
  std::vector<std::pair<Time, Entry*>> ready;
  for (auto& [name, e] : m_entries) {
    if (e.running) {
      ++running;
      suspects += e.suspect && !e.stalled_this_run ? 1 : 0;
      continue;
    }
    if (!e.config.enabled || e.removed || m_paused.count(name) > 0) {
      continue;
    }
    if (e.requested) {
      ready.emplace_back(Time::min(), &e); // asked for: first in line
    } else if (e.next_run <= now) {
      ready.emplace_back(e.next_run, &e);
    }
  }
  std::sort(ready.begin(), ready.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second->config.name < b.second->config.name;
  });
  // Stalled runs (and runs of sources whose last run stalled) hold at
  // most slots - 1: one slot stays for the rest.
  size_t stalled_now = std::min(running, std::min(stalled, running) + suspects);
  size_t others = running - stalled_now;
  auto held = [&] { return others + std::min(stalled_now, slots > 0 ? slots - 1 : 0); };
  std::vector<Job> jobs;
  for (auto& [when, e] : ready) {
    if (held() >= slots || running + jobs.size() >= 2 * slots) {
      break;
    }
    ++(e->suspect ? stalled_now : others);
    e->stalled_this_run = false;
    Job j;
    j.source = e->config.name;
    j.trigger = e->started ? store::RunTrigger::schedule : store::RunTrigger::startup;
    if (e->requested) {
      j.mode = *e->requested;
      j.requested = true;
      j.trigger = e->requested_by;
      e->requested.reset();
    } else if (e->retry_mode) {
      j.mode = *e->retry_mode;
    } else if (e->next_audit && *e->next_audit <= now && e->failures == 0) {
      j.mode = store::RunMode::audit;
    } else {
      j.mode = store::RunMode::incremental; // baselines first when never synced
    }
    e->running = true;
    e->started = true;
    e->running_mode = j.mode;
    jobs.push_back(std::move(j));
  }
  return jobs;
}

void Scheduler::stalled(const std::string& source) {
  if (auto it = m_entries.find(source); it != m_entries.end() && it->second.running) {
    it->second.stalled_this_run = true;
    it->second.suspect = true;
  }
}

void Scheduler::finished(const std::string& source, store::RunMode mode, bool ok, Time now) {
  auto it = m_entries.find(source);
  if (it == m_entries.end()) {
    return; // removed from the config while it ran
  }
  Entry& e = it->second;
  if (e.removed) {
    m_entries.erase(it); // removed from the config while it ran
    return;
  }
  e.running = false;
  e.busy = false;
  e.waiting_for_node = false;
  e.suspect = e.stalled_this_run;
  e.stalled_this_run = false;
  e.retry_mode.reset();
  if (ok) {
    e.failures = 0;
    e.next_run = now + jittered(std::max(e.config.interval, e.stretched));
    if (mode == store::RunMode::audit && e.config.audit_interval.count() > 0) {
      e.next_audit = now + e.config.audit_interval;
    }
  } else {
    ++e.failures;
    e.next_run = now + jittered(backoff(e.failures, e.config.interval));
  }
}

void Scheduler::busy(const std::string& source, Time now) {
  auto it = m_entries.find(source);
  if (it == m_entries.end()) {
    return;
  }
  if (it->second.removed) {
    m_entries.erase(it);
    return;
  }
  it->second.running = false;
  it->second.busy = true;
  it->second.next_run = now + std::min<std::chrono::seconds>(k_busy_retry, it->second.config.interval);
}

void Scheduler::wait_for_node(const std::string& source, store::RunMode mode, Time now) {
  auto it = m_entries.find(source);
  if (it == m_entries.end()) {
    return;
  }
  if (it->second.removed) {
    m_entries.erase(it);
    return;
  }
  Entry& e = it->second;
  e.running = false;
  e.busy = false;
  e.waiting_for_node = true;
  if (mode != store::RunMode::incremental) {
    e.retry_mode = mode; // a baseline or an audit is run again as one
  }
  e.next_run = now + k_node_retry;
}

void Scheduler::node_back(Time now) {
  for (auto& [name, e] : m_entries) {
    if (e.waiting_for_node && !e.running) {
      e.next_run = std::min(e.next_run, now);
    }
  }
}

namespace {

int strength(store::RunMode m) {
  return m == store::RunMode::baseline ? 3 : m == store::RunMode::audit ? 2 : 1;
}

} // namespace

Scheduler::Request Scheduler::request(const std::string& source, store::RunMode mode, store::RunTrigger trigger) {
  auto it = m_entries.find(source);
  if (it == m_entries.end() || it->second.removed) {
    return Request::unknown;
  }
  if (!it->second.config.enabled) {
    return Request::disabled;
  }
  if (m_paused.count(source) > 0) {
    return Request::paused;
  }
  Entry& e = it->second;
  if (!e.requested) {
    e.requested = mode;
    e.requested_by = trigger;
    return Request::queued;
  }
  // Coalesced with the request already waiting: one run, the strongest
  // mode, an operator's word before a notification's.
  if (strength(mode) > strength(*e.requested)) {
    e.requested = mode;
  }
  if (trigger == store::RunTrigger::operator_) {
    e.requested_by = trigger;
  }
  return Request::queued;
}

void Scheduler::set_paused(const std::string& source, bool paused) {
  if (paused) {
    m_paused.insert(source);
  } else {
    m_paused.erase(source);
  }
}

bool Scheduler::paused(const std::string& source) const { return m_paused.count(source) > 0; }

void Scheduler::stretch(const std::string& source, std::chrono::seconds at_least) {
  if (auto it = m_entries.find(source); it != m_entries.end()) {
    it->second.stretched = at_least;
  }
}

std::optional<Time> Scheduler::next_due() const {
  std::optional<Time> best;
  for (const auto& [name, e] : m_entries) {
    if (e.running || !e.config.enabled || m_paused.count(name) > 0) {
      continue;
    }
    const Time t = e.requested ? Time::min() : e.next_run;
    if (!best || t < *best) {
      best = t;
    }
  }
  return best;
}

std::vector<Scheduler::View> Scheduler::view() const {
  std::vector<View> out;
  for (const auto& [name, e] : m_entries) {
    if (e.removed) {
      continue;
    }
    View v;
    v.name = name;
    v.paused = m_paused.count(name) > 0;
    v.waiting_for_node = e.waiting_for_node;
    v.state = !e.config.enabled    ? SourceState::disabled
              : e.running          ? SourceState::syncing
              : v.paused           ? SourceState::paused
              : e.busy             ? SourceState::busy
              : e.waiting_for_node ? SourceState::waiting
              : e.failures > 0     ? SourceState::backing_off
                                   : SourceState::idle;
    if (e.running) {
      v.running = e.running_mode;
    }
    v.next_run = e.next_run;
    v.next_audit = e.next_audit;
    v.consecutive_failures = e.failures;
    if (e.requested) {
      v.queued = std::string(store::to_string(*e.requested));
      v.queued_by = e.requested_by;
    }
    out.push_back(std::move(v));
  }
  return out;
}

const sync::SourceConfig* Scheduler::source(const std::string& name) const {
  auto it = m_entries.find(name);
  return it == m_entries.end() || it->second.removed ? nullptr : &it->second.config;
}

} // namespace tributary::agg

#include "aggregator/daemon/run_metrics.h"

#include <iterator>

namespace tributary::agg {

void RunMetrics::record(const std::string& source, store::RunMode mode, store::RunMode recorded,
                        store::RunTrigger trigger, store::RunStatus status, const store::RunCounters& c,
                        const store::RunCounters& b, std::chrono::milliseconds duration) {
  const std::string m(store::to_string(mode));
  const double seconds = static_cast<double>(duration.count()) / 1000.0;
  std::lock_guard lock(m_mutex);
  PerSource& s = m_sources[source];
  s.applied[{"baseline", "created"}] += b.created;
  s.applied[{"baseline", "updated"}] += b.updated;
  s.applied[{"baseline", "deleted"}] += b.deleted;
  s.applied[{m, "created"}] += c.created - b.created;
  s.applied[{m, "updated"}] += c.updated - b.updated;
  s.applied[{m, "deleted"}] += c.deleted - b.deleted;
  s.bytes += c.bytes;
  ++s.runs[{std::string(store::to_string(trigger)), std::string(store::to_string(status))}];
  s.last_duration = seconds;
  Histogram& h = m_durations[std::string(store::to_string(recorded))];
  for (size_t i = 0; i < std::size(k_buckets); ++i) {
    if (seconds <= k_buckets[i]) {
      ++h.counts[i];
    }
  }
  ++h.count;
  h.sum += seconds;
}

void RunMetrics::keep_only(const std::set<std::string>& configured) {
  std::lock_guard lock(m_mutex);
  for (auto it = m_sources.begin(); it != m_sources.end();) {
    it = configured.count(it->first) > 0 ? std::next(it) : m_sources.erase(it);
  }
}

void RunMetrics::render(std::ostream& m, const std::set<std::string>& sources) const {
  auto family = [&m](const char* name, const char* type, const char* help) {
    m << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  };
  std::lock_guard lock(m_mutex);
  static const PerSource none;
  auto of = [this](const std::string& name) -> const PerSource& {
    auto it = m_sources.find(name);
    return it == m_sources.end() ? none : it->second;
  };
  family("tributary_changes_applied_total", "counter",
         "Resources created, updated and deleted by this process's runs, by run mode (a baseline's are apart from "
         "an incremental run's changes).");
  for (const auto& name : sources) {
    const PerSource& s = of(name);
    for (const char* mode : {"baseline", "incremental", "audit"}) {
      for (const char* change : {"created", "updated", "deleted"}) {
        auto it = s.applied.find({mode, change});
        m << "tributary_changes_applied_total{source=\"" << name << "\",mode=\"" << mode << "\",change=\""
          << change << "\"} " << (it == s.applied.end() ? 0 : it->second) << '\n';
      }
    }
  }
  family("tributary_content_bytes_total", "counter", "Bytes of content this process's runs fetched and stored.");
  for (const auto& name : sources) {
    m << "tributary_content_bytes_total{source=\"" << name << "\"} " << of(name).bytes << '\n';
  }
  family("tributary_runs_total", "counter", "Runs finished by this process, by source, trigger and outcome.");
  for (const auto& name : sources) {
    const PerSource& s = of(name);
    for (const auto& [key, n] : s.runs) {
      m << "tributary_runs_total{source=\"" << name << "\",trigger=\"" << key.first << "\",status=\"" << key.second
        << "\"} " << n << '\n';
    }
  }
  family("tributary_source_last_run_duration_seconds", "gauge", "Duration of the last run in this process.");
  for (const auto& name : sources) {
    if (of(name).last_duration >= 0) {
      m << "tributary_source_last_run_duration_seconds{source=\"" << name << "\"} " << of(name).last_duration
        << '\n';
    }
  }
  family("tributary_run_duration_seconds", "histogram", "How long this process's runs took, by mode.");
  for (const char* mode : {"baseline", "incremental", "audit"}) {
    auto it = m_durations.find(mode);
    const Histogram h = it == m_durations.end() ? Histogram{} : it->second;
    for (size_t i = 0; i < std::size(k_buckets); ++i) {
      m << "tributary_run_duration_seconds_bucket{mode=\"" << mode << "\",le=\"" << k_buckets[i] << "\"} "
        << h.counts[i] << '\n';
    }
    m << "tributary_run_duration_seconds_bucket{mode=\"" << mode << "\",le=\"+Inf\"} " << h.count << '\n';
    m << "tributary_run_duration_seconds_sum{mode=\"" << mode << "\"} " << h.sum << '\n';
    m << "tributary_run_duration_seconds_count{mode=\"" << mode << "\"} " << h.count << '\n';
  }
}

} // namespace tributary::agg

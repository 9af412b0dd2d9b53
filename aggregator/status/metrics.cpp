#include "aggregator/status/metrics.h"

#include "aggregator/status/json.h"
#include "common/version.h"
#include "store/pg/migrations.h"
#include "store/pg/pg_budget.h"
#include "store/store.h"
#include "sync_engine/commit_stats.h"
#include "sync_engine/pipelined_http.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iomanip>
#include <set>
#include <functional>
#include <optional>
#include <sstream>
#include <tuple>

namespace tributary::agg {

namespace {

double epoch_seconds(rs::Timestamp t) {
  return static_cast<double>(t.time_since_epoch().count()) / 1e6;
}

// Seconds since the epoch to the millisecond: a default double print has 6
// significant digits ("1.79624e+09", thousands of seconds off).
std::string timestamp(rs::Timestamp t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", epoch_seconds(t));
  return buf;
}

uint64_t resident_bytes() {
  std::ifstream in("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

// A label value as the text format wants it: \\, \" and \n escaped.
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// The exposition, one family group a method, in the order it is written.
class MetricsWriter {
public:
  MetricsWriter(DaemonState& s, const StatsByName& by_name, std::vector<Scheduler::View> v)
      : state(s), stats(by_name), views(std::move(v)), now(Clock::now()) {}

  void family(const char* name, const char* type, const char* help) {
    m << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  }
  const store::SourceStats* stat_of(const std::string& name) const {
    auto it = stats.find(name);
    return it == stats.end() ? nullptr : &it->second;
  }

  void sources() {
  // A gauge per source: `write` puts the source's value on the stream, or
  // returns false when it has none (the series is left out).
  auto per_source = [&](const char* name, const char* help,
                        const std::function<bool(const store::SourceStats*, std::ostream&)>& write) {
    family(name, "gauge", help);
    for (const auto& v : views) {
      std::ostringstream value;
      if (write(stat_of(v.name), value)) {
        m << name << "{source=\"" << v.name << "\"} " << value.str() << '\n';
      }
    }
  };
  per_source("tributary_source_resources", "Resources held live.", [](const auto* s, std::ostream& o) {
    o << (s ? s->live : 0);
    return true;
  });
  per_source("tributary_source_deleted_resources", "Resources held as deleted.", [](const auto* s, std::ostream& o) {
    o << (s ? s->deleted : 0);
    return true;
  });
  per_source("tributary_source_deletions_held",
             "Deletions the mass-deletion guard holds for an operator's confirmation (not yet confirmed).",
             [](const auto* s, std::ostream& o) {
               uint64_t held = 0;
               for (const auto& h : s ? s->deletion_holds : std::vector<store::DeletionHold>{}) {
                 held += h.confirmed ? 0 : h.unseen;
               }
               o << held;
               return true;
             });
  per_source("tributary_source_retrying_resources",
             "Resources whose content failed and is fetched again by later runs.", [](const auto* s, std::ostream& o) {
               o << (s ? s->retrying : 0);
               return true;
             });
  per_source("tributary_source_retrying_oldest_seconds",
             "How long the oldest resource waiting for a retry has been failing (0: none waits); past the source's "
             "retry_attention_after the source is in state attention.",
             [this](const auto* s, std::ostream& o) {
               o << retry_age_of(s, now).value_or(0.0);
               return true;
             });
  per_source("tributary_source_bytes", "Bytes of the resources held live.", [](const auto* s, std::ostream& o) {
    o << (s ? s->bytes : 0);
    return true;
  });
  }

  void lag() {
  // A source that never synced lags, and last succeeded, from the moment
  // it was configured (its first run's record, or this process's first
  // sight of it): so the Lagging and NoSuccess alerts fire for a source
  // that never once worked, instead of finding no series.
  auto configured = [this](const std::string& name, const store::SourceStats* s) {
    return std::chrono::duration<double>(configured_at(state, name, s).time_since_epoch()).count();
  };
  family("tributary_source_lag_seconds", "gauge",
         "How far behind the source is: since the start of its last successful run (before any: since it was "
         "configured). No series for a paused or disabled source.");
  for (const auto& v : views) {
    if (auto lag = lag_of(v, stat_of(v.name), configured_at(state, v.name, stat_of(v.name)), now)) {
      m << "tributary_source_lag_seconds{source=\"" << v.name << "\"} " << std::fixed << std::setprecision(3)
        << *lag << std::defaultfloat << std::setprecision(6) << '\n';
    }
  }
  family("tributary_source_last_success_timestamp_seconds", "gauge",
         "When the last successful run ended (before any: when the source was configured).");
  for (const auto& v : views) {
    const auto* s = stat_of(v.name);
    const double at = s && s->last_success && s->last_success->finished_at
                          ? epoch_seconds(*s->last_success->finished_at)
                          : configured(v.name, s);
    m << "tributary_source_last_success_timestamp_seconds{source=\"" << v.name << "\"} " << std::fixed
      << std::setprecision(3) << at << std::defaultfloat << std::setprecision(6) << '\n';
  }
  family("tributary_source_ever_succeeded", "gauge", "1 once a run of the source has succeeded.");
  for (const auto& v : views) {
    const auto* s = stat_of(v.name);
    m << "tributary_source_ever_succeeded{source=\"" << v.name << "\"} " << (s && s->last_success ? 1 : 0) << '\n';
  }
  family("tributary_source_consecutive_failures", "gauge", "Failed runs since the last success.");
  for (const auto& v : views) {
    m << "tributary_source_consecutive_failures{source=\"" << v.name << "\"} " << v.consecutive_failures << '\n';
  }
  }

  void source_states() {
  // The status page's and the API's states, one series per state (1 for
  // the current one), so that "sources by state" counts each.
  family("tributary_source_state", "gauge",
         "1 for the source's state (in_sync, lagging, attention, failing, paused, disabled: as the status page and "
         "API say).");
  for (const auto& v : views) {
    const sync::SourceConfig* cfg = state.scheduler.source(v.name);
    uint64_t unapplied = 0;
    if (auto it = state.running.find(v.name); it != state.running.end() && !it->second.done) {
      const auto& p = it->second.progress;
      unapplied = p.total > p.done ? p.total - p.done : 0;
    }
    const std::string now_state = cfg ? sync_state_of(v, *cfg, stat_of(v.name), unapplied, now).first : "";
    for (const char* st : k_sync_states) {
      m << "tributary_source_state{source=\"" << v.name << "\",state=\"" << st << "\"} " << (now_state == st ? 1 : 0)
        << '\n';
    }
  }
  family("tributary_source_syncing", "gauge", "1 while a run of the source is under way in this process.");
  for (const auto& v : views) {
    m << "tributary_source_syncing{source=\"" << v.name << "\"} " << (v.running ? 1 : 0) << '\n';
  }
  }

  void runs_and_hosts() {
  {
    std::set<std::string> names;
    for (const auto& v : views) {
      names.insert(v.name);
    }
    state.run_metrics.render(m, names);
  }
  // A family per upstream host: `value` gives the host's value, or nullopt
  // to leave its series out.
  const auto hosts = state.throttle->snapshot();
  using HostView = sync::HostThrottle::HostView;
  auto per_host = [&](const char* name, const char* type, const char* help,
                      const std::function<std::optional<double>(const HostView&)>& value) {
    family(name, type, help);
    for (const auto& h : hosts) {
      if (auto v = value(h)) {
        m << name << "{host=\"" << label(h.host) << "\"} " << *v << '\n';
      }
    }
  };
  per_host("tributary_host_window", "gauge", "Concurrent requests allowed to an upstream host now.",
           [](const HostView& h) { return std::optional<double>(h.window); });
  per_host("tributary_host_rate_limit", "gauge",
           "The adaptive request rate limit of an upstream host (absent: none, the window alone).",
           [](const HostView& h) { return h.rate_limit; });
  per_host("tributary_host_requests_total", "counter", "Requests started to an upstream host.",
           [](const HostView& h) { return std::optional<double>(static_cast<double>(h.requests)); });
  per_host("tributary_host_throttled_total", "counter",
           "Responses from an upstream host that slowed us down (429, 502, 503, 504, timeouts, slow responses).",
           [](const HostView& h) { return std::optional<double>(static_cast<double>(h.throttled)); });
  family("tributary_node_info", "gauge", "This process's node name (config node_name; runs record it).");
  m << "tributary_node_info{node=\"" << label(store::node_name()) << "\"} 1\n";
  family("tributary_disk_full", "gauge",
         "1 while the data directory's disk is full (every run paused until space returns).");
  m << "tributary_disk_full " << (state.disk.is_full() ? 1 : 0) << '\n';
  if (state.tier) {
    const auto c = state.tier->counters();
    for (const auto& [name, help, value] :
         {std::tuple<const char*, const char*, uint64_t>{"tributary_s3_objects_put_total",
                                                         "Objects this process put in the S3 bucket.", c.objects_put},
          {"tributary_s3_bytes_put_total", "Bytes this process put in the S3 bucket.", c.bytes_put},
          {"tributary_s3_blobs_uploaded_total", "Blobs this process uploaded to the S3 bucket.", c.blobs_uploaded},
          {"tributary_s3_blobs_known_total", "Blobs this process found in the S3 bucket already.", c.blobs_known},
          {"tributary_s3_ranges_read_total", "Blobs this process read from the S3 bucket (Range GETs).",
           c.ranges_read}}) {
      family(name, "counter", help);
      m << name << ' ' << value << '\n';
    }
  }
  }

  void push(const std::vector<store::PushSubscription>& ours, const std::vector<store::HubSubscription>& followers) {
  family("tributary_push_subscription_active", "gauge",
         "1 while our WebSub subscription to a source's Change Notification channel is active.");
  for (const auto& p : ours) {
    m << "tributary_push_subscription_active{source=\"" << p.source << "\",topic=\"" << label(p.topic) << "\"} "
      << (p.state == "active" && p.expires_at && *p.expires_at > rs::Timestamp(std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch())) ? 1 : 0) << '\n';
  }
  family("tributary_push_lease_expiry_timestamp_seconds", "gauge", "When our subscription's lease ends.");
  for (const auto& p : ours) {
    if (p.expires_at) {
      m << "tributary_push_lease_expiry_timestamp_seconds{source=\"" << p.source << "\",topic=\""
        << label(p.topic) << "\"} " << timestamp(*p.expires_at) << '\n';
    }
  }
  family("tributary_push_last_notification_timestamp_seconds", "gauge", "When the last notification was accepted.");
  for (const auto& p : ours) {
    if (p.last_notification_at) {
      m << "tributary_push_last_notification_timestamp_seconds{source=\"" << p.source << "\",topic=\""
        << label(p.topic) << "\"} " << timestamp(*p.last_notification_at) << '\n';
    }
  }
  family("tributary_push_notifications_total", "counter", "Notifications accepted (each syncs the source).");
  for (const auto& p : ours) {
    m << "tributary_push_notifications_total{source=\"" << p.source << "\",topic=\"" << label(p.topic) << "\"} "
      << p.notifications << '\n';
  }
  family("tributary_push_notifications_ignored_total", "counter",
         "Notifications ignored: bad signature, foreign topic, out of order, unreadable.");
  for (const auto& p : ours) {
    m << "tributary_push_notifications_ignored_total{source=\"" << p.source << "\",topic=\"" << label(p.topic)
      << "\"} " << p.ignored << '\n';
  }
  uint64_t delivered = 0, failed = 0;
  int64_t failing = 0;
  for (const auto& f : followers) {
    delivered += f.deliveries;
    failed += f.failures_total;
    failing += f.failures > 0 ? 1 : 0;
  }
  family("tributary_hub_subscribers", "gauge", "Subscriptions to our hub's topics.");
  m << "tributary_hub_subscribers " << followers.size() << '\n';
  family("tributary_hub_subscribers_failing", "gauge", "Subscribers whose last delivery failed.");
  m << "tributary_hub_subscribers_failing " << failing << '\n';
  family("tributary_hub_deliveries_total", "counter", "Notifications our hub delivered (acknowledged).");
  m << "tributary_hub_deliveries_total " << delivered << '\n';
  family("tributary_hub_deliveries_failed_total", "counter", "Notification deliveries that failed (retried).");
  m << "tributary_hub_deliveries_failed_total " << failed << '\n';
  }

  void disk_and_reloads() {
  // The file system of data_dir (blobs, documents, dumps, spooled
  // downloads): what an operator's "disk near full" alert watches.
  if (struct statvfs fs{}; ::statvfs(state.config.data_dir.c_str(), &fs) == 0) {
    const auto unit = static_cast<uint64_t>(fs.f_frsize);
    family("tributary_data_dir_size_bytes", "gauge", "Size of the file system holding data_dir.");
    m << "tributary_data_dir_size_bytes " << static_cast<uint64_t>(fs.f_blocks) * unit << '\n';
    family("tributary_data_dir_free_bytes", "gauge", "Bytes free to us on the file system holding data_dir.");
    m << "tributary_data_dir_free_bytes " << static_cast<uint64_t>(fs.f_bavail) * unit << '\n';
  }
  family("tributary_config_reloads_total", "counter", "Reloads (SIGHUP) by outcome: applied, or refused (invalid).");
  m << "tributary_config_reloads_total{outcome=\"applied\"} " << state.reloads_ok << '\n';
  m << "tributary_config_reloads_total{outcome=\"refused\"} " << state.reloads_refused << '\n';
  family("tributary_config_last_reload_successful", "gauge",
         "1 when the last reload was applied (or none was asked), 0 when it was refused.");
  m << "tributary_config_last_reload_successful " << (!state.last_reload || state.last_reload->ok ? 1 : 0) << '\n';
  if (state.last_reload) {
    family("tributary_config_last_reload_timestamp_seconds", "gauge", "When the last reload was asked.");
    m << "tributary_config_last_reload_timestamp_seconds "
      << timestamp(rs::Timestamp(std::chrono::duration_cast<std::chrono::microseconds>(
             state.last_reload->at.time_since_epoch())))
      << '\n';
  }
  }

  void database_and_pipelining() {
  // The PostgreSQL connection budget (#38): how full the pool is, and
  // whether components wait for it (raise database_connections when they
  // do, if PostgreSQL has room).
  const store::PgPoolStats pool = store::pg_pool_stats();
  family("tributary_db_connections_max", "gauge",
         "Connections this process may hold (database_connections: the pool and the session connection).");
  m << "tributary_db_connections_max " << pool.size + 1 << '\n';
  family("tributary_db_pool_connections", "gauge", "Pooled connections open, by state (idle, in_use).");
  m << "tributary_db_pool_connections{state=\"idle\"} " << pool.open - std::min(pool.open, pool.in_use) << '\n';
  m << "tributary_db_pool_connections{state=\"in_use\"} " << pool.in_use << '\n';
  family("tributary_db_pool_borrows_total", "counter", "Connections lent from the pool (one per transaction).");
  m << "tributary_db_pool_borrows_total " << pool.borrows << '\n';
  family("tributary_db_pool_waits_total", "counter", "Borrows that waited for a connection to come free.");
  m << "tributary_db_pool_waits_total " << pool.waits << '\n';
  family("tributary_db_pool_wait_seconds_total", "counter", "Time spent waiting for a connection, all borrows.");
  m << "tributary_db_pool_wait_seconds_total " << pool.wait_seconds << '\n';
  family("tributary_db_pool_wait_seconds_max", "gauge", "The longest wait for a connection since the start.");
  m << "tributary_db_pool_wait_seconds_max " << pool.max_wait_seconds << '\n';
  family("tributary_db_pool_timeouts_total", "counter",
         "Borrows that gave up after database_wait (the work failed, and is tried again later).");
  m << "tributary_db_pool_timeouts_total " << pool.timeouts << '\n';
  // Pipelined content fetching (#38): how much of it there was, and the
  // hosts it was found to work with or turned off for.
  const sync::PipelineStats piped = sync::pipeline_stats();
  family("tributary_pipelined_requests_total", "counter",
         "Content GETs answered on pipelined connections (the rest go one at a time).");
  m << "tributary_pipelined_requests_total " << piped.answered << '\n';
  family("tributary_pipelining_hosts", "gauge",
         "Upstream hosts by what a probe found: pipelining works (on), or is off for a day (off).");
  m << "tributary_pipelining_hosts{state=\"on\"} " << piped.hosts_on << '\n';
  m << "tributary_pipelining_hosts{state=\"off\"} " << piped.hosts_off << '\n';
  // Where the runs' commits spent their time (sync_engine/commit_stats.h).
  const sync::CommitStats commits = sync::commit_stats();
  family("tributary_commits_total", "counter", "Batches committed (or failed) by this process's runs.");
  m << "tributary_commits_total " << commits.batches << '\n';
  family("tributary_commit_seconds_total", "counter",
         "Time the runs' batches spent committing, by stage: publish (their blobs made durable, indexed and, with "
         "S3, uploaded), "
         "waiting (for the batch before to apply), apply (the database transaction).");
  m << "tributary_commit_seconds_total{stage=\"publish\"} " << commits.publish_seconds << '\n';
  m << "tributary_commit_seconds_total{stage=\"waiting\"} " << commits.waiting_seconds << '\n';
  m << "tributary_commit_seconds_total{stage=\"apply\"} " << commits.apply_seconds << '\n';
  }

  void process() {
  family("tributary_build_info", "gauge", "1, labelled with this build's version and schema version.");
  m << "tributary_build_info{version=\"" << label(std::string(version())) << "\",schema=\""
    << store::expected_schema_version() << "\"} 1\n";
  family("tributary_syncs_running", "gauge", "Sources syncing now.");
  m << "tributary_syncs_running " << state.running.size() << '\n';
  family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
  m << "process_resident_memory_bytes " << resident_bytes() << '\n';
  family("process_start_time_seconds", "gauge", "Start time of the process since the epoch, in seconds.");
  m << "process_start_time_seconds " << std::chrono::duration_cast<std::chrono::seconds>(
                                             state.started_at.time_since_epoch()).count()
    << '\n';
  }

  std::ostringstream m;

private:
  DaemonState& state;
  const StatsByName& stats;
  const std::vector<Scheduler::View> views;
  const Time now;
};

} // namespace

std::string render_metrics(DaemonState& state, const StatsByName& stats) {
  std::vector<store::PushSubscription> ours;
  std::vector<store::HubSubscription> followers;
  bool push_known = false;
  {
    std::lock_guard lock(state.status_mutex);
    if ((push_known = read_push(state))) {
      ours = state.push_ours;
      followers = state.push_followers;
    }
  }
  std::lock_guard lock(state.mutex);
  MetricsWriter w(state, stats, state.scheduler.view());
  w.sources();
  w.lag();
  w.source_states();
  w.runs_and_hosts();
  if (push_known) {
    w.push(ours, followers);
  }
  w.disk_and_reloads();
  w.database_and_pipelining();
  w.process();
  return w.m.str();
}
} // namespace tributary::agg

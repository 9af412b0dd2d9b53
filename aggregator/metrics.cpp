#include "aggregator/metrics.h"

#include "store/store.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <tuple>

namespace tributary::agg {

namespace {

double epoch_seconds(rs::Timestamp t) {
  return static_cast<double>(t.time_since_epoch().count()) / 1e6;
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

} // namespace

std::string render_metrics(DaemonState& state, const StatsByName& stats) {
  std::ostringstream m;
  auto family = [&m](const char* name, const char* type, const char* help) {
    m << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  };
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
  const auto views = state.scheduler.view();
  auto stat_of = [&stats](const std::string& name) -> const store::SourceStats* {
    auto it = stats.find(name);
    return it == stats.end() ? nullptr : &it->second;
  };
  const auto now = Clock::now();
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
  per_source("tributary_source_retrying_resources",
             "Resources whose content failed and is fetched again by later runs.", [](const auto* s, std::ostream& o) {
               o << (s ? s->retrying : 0);
               return true;
             });
  per_source("tributary_source_bytes", "Bytes of the resources held live.", [](const auto* s, std::ostream& o) {
    o << (s ? s->bytes : 0);
    return true;
  });
  per_source("tributary_source_lag_seconds", "Now minus the newest upstream change applied.",
             [&now](const auto* s, std::ostream& o) {
               if (!s || !s->newest_change) {
                 return false;
               }
               o << std::max(0.0, std::chrono::duration<double>(now - *s->newest_change).count());
               return true;
             });
  per_source("tributary_source_last_success_timestamp_seconds", "When the last successful run ended.",
             [](const auto* s, std::ostream& o) {
               if (!s || !s->last_success || !s->last_success->finished_at) {
                 return false;
               }
               o << std::fixed << epoch_seconds(*s->last_success->finished_at);
               return true;
             });
  family("tributary_source_consecutive_failures", "gauge", "Failed runs since the last success.");
  for (const auto& v : views) {
    m << "tributary_source_consecutive_failures{source=\"" << v.name << "\"} " << v.consecutive_failures << '\n';
  }
  family("tributary_source_state", "gauge", "1 for the source's current state.");
  for (const auto& v : views) {
    m << "tributary_source_state{source=\"" << v.name << "\",state=\"" << to_string(v.state) << "\"} 1\n";
  }
  family("tributary_source_last_run_duration_seconds", "gauge", "Duration of the last run in this process.");
  for (const auto& [name, secs] : state.last_duration) {
    m << "tributary_source_last_run_duration_seconds{source=\"" << name << "\"} " << secs << '\n';
  }
  family("tributary_runs_total", "counter", "Runs finished by this process, by source and status.");
  for (const auto& [key, n] : state.runs_total) {
    const auto nl = key.find('\n');
    m << "tributary_runs_total{source=\"" << key.substr(0, nl) << "\",status=\"" << key.substr(nl + 1) << "\"} "
      << n << '\n';
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
  if (push_known) {
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
          << label(p.topic) << "\"} " << epoch_seconds(*p.expires_at) << '\n';
      }
    }
    family("tributary_push_last_notification_timestamp_seconds", "gauge", "When the last notification was accepted.");
    for (const auto& p : ours) {
      if (p.last_notification_at) {
        m << "tributary_push_last_notification_timestamp_seconds{source=\"" << p.source << "\",topic=\""
          << label(p.topic) << "\"} " << epoch_seconds(*p.last_notification_at) << '\n';
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
  // The file system of data_dir (blobs, documents, dumps, spooled
  // downloads): what an operator's "disk near full" alert watches.
  if (struct statvfs fs{}; ::statvfs(state.config.data_dir.c_str(), &fs) == 0) {
    const auto unit = static_cast<uint64_t>(fs.f_frsize);
    family("tributary_data_dir_size_bytes", "gauge", "Size of the file system holding data_dir.");
    m << "tributary_data_dir_size_bytes " << static_cast<uint64_t>(fs.f_blocks) * unit << '\n';
    family("tributary_data_dir_free_bytes", "gauge", "Bytes free to us on the file system holding data_dir.");
    m << "tributary_data_dir_free_bytes " << static_cast<uint64_t>(fs.f_bavail) * unit << '\n';
  }
  family("tributary_syncs_running", "gauge", "Sources syncing now.");
  m << "tributary_syncs_running " << state.running.size() << '\n';
  family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
  m << "process_resident_memory_bytes " << resident_bytes() << '\n';
  family("process_start_time_seconds", "gauge", "Start time of the process since the epoch, in seconds.");
  m << "process_start_time_seconds " << std::chrono::duration_cast<std::chrono::seconds>(
                                             state.started_at.time_since_epoch()).count()
    << '\n';
  return m.str();
}

} // namespace tributary::agg

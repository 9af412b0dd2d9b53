#include "aggregator/daemon.h"

#include "aggregator/config.h"
#include "aggregator/scheduler.h"
#include "aggregator/status_page.h"
#include "common/log.h"
#include "common/version.h"
#include "republisher/server.h"
#include "resourcesync/datetime.h"
#include "sync_engine/store/pg_store.h"
#include "sync_engine/sync.h"

#include <nlohmann/json.hpp>

#include <csignal>
#include <malloc.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <map>
#include <mutex>
#include <ostream>
#include <sstream>
#include <thread>

namespace tributary::agg {

namespace {

using nlohmann::json;
using Clock = std::chrono::system_clock;

std::string iso(Time t) {
  return rs::format_w3c_datetime(std::chrono::time_point_cast<std::chrono::microseconds>(t));
}

std::string iso(rs::Timestamp t) { return rs::format_w3c_datetime(t); }

double epoch_seconds(rs::Timestamp t) {
  return static_cast<double>(t.time_since_epoch().count()) / 1e6;
}

std::optional<store::RunMode> mode_from(const std::string& s) {
  if (s == "incremental") {
    return store::RunMode::incremental;
  }
  if (s == "baseline") {
    return store::RunMode::baseline;
  }
  if (s == "audit") {
    return store::RunMode::audit;
  }
  return std::nullopt;
}

// Every answer of the API has one shape: {"ok": true, "data": …} or
// {"ok": false, "error": {"code": …, "message": …}}.
void answer(http::Response& res, int status, const json& data) {
  res.status = status;
  res.set_body(json{{"ok", true}, {"data", data}}.dump(2) + "\n", "application/json");
  res.set_header("Cache-Control", "no-store");
}

void fail(http::Response& res, int status, const std::string& code, const std::string& message) {
  res.status = status;
  res.set_body(json{{"ok", false}, {"error", {{"code", code}, {"message", message}}}}.dump(2) + "\n",
               "application/json");
  res.set_header("Cache-Control", "no-store");
}

json run_json(const store::RunInfo& r) {
  json j{{"id", r.id},
         {"mode", store::to_string(r.mode)},
         {"status", store::to_string(r.status)},
         {"started_at", iso(r.started_at)},
         {"finished_at", r.finished_at ? json(iso(*r.finished_at)) : json(nullptr)},
         {"counters",
          {{"created", r.counters.created},
           {"updated", r.counters.updated},
           {"deleted", r.counters.deleted},
           {"unchanged", r.counters.unchanged},
           {"failed", r.counters.failed},
           {"bytes", r.counters.bytes}}},
         {"message", r.message}};
  if (r.finished_at) {
    j["duration_seconds"] = static_cast<double>((*r.finished_at - r.started_at).count()) / 1e6;
  }
  return j;
}

bool same_secret(const std::string& a, const std::string& b) {
  // Constant time in the length of the presented value.
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

uint64_t resident_bytes() {
  std::ifstream in("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

} // namespace

struct Daemon {
  std::string config_path;
  Config config;
  std::mutex mutex; // guards config, scheduler, progress, threads, admin_token
  std::condition_variable wake;
  Scheduler scheduler;
  std::atomic<bool> stopping{false};
  const Time started_at = Clock::now();

  std::shared_ptr<store::PgStore> store;        // the republisher's reads
  std::unique_ptr<store::PgStore> status_store; // the status API's reads
  std::mutex status_mutex;
  std::shared_ptr<sync::BlobStore> blobs;
  std::shared_ptr<sync::Fetcher> fetcher = sync::make_default_fetcher();
  std::shared_ptr<sync::HostRateLimiter> limiter = std::make_shared<sync::HostRateLimiter>();
  std::shared_ptr<sync::ValidatorCache> validators = std::make_shared<sync::ValidatorCache>();
  std::optional<std::string> admin_token;
  pub::Republisher* republisher = nullptr;

  struct Running {
    store::RunMode mode = store::RunMode::incremental;
    Time started{};
    sync::Progress progress;
    std::thread thread;
    bool done = false;
  };
  std::map<std::string, Running> running;
  std::vector<std::thread> finished_threads;
  std::map<std::string, uint64_t> runs_total; // "source\nstatus" -> count, this process
  std::map<std::string, double> last_duration; // source -> seconds

  // ---- configuration -------------------------------------------------------

  void apply_logging(const Config& c) {
    log::configure(*log::parse_level(c.log_level), *log::parse_format(c.log_format));
  }

  void load_admin_token(const Config& c) {
    admin_token.reset();
    if (!c.admin_token) {
      return;
    }
    auto t = sync::read_secret(*c.admin_token, "admin token");
    if (!t) {
      log::error("", "admin API disabled: " + t.error().message);
      return;
    }
    admin_token = *t;
  }

  static bool sets_equal(const Config& a, const Config& b) {
    if (a.sets.size() != b.sets.size()) {
      return false;
    }
    for (size_t i = 0; i < a.sets.size(); ++i) {
      if (a.sets[i].name != b.sets[i].name || a.sets[i].sources != b.sets[i].sources) {
        return false;
      }
    }
    return true;
  }

  void reload() {
    auto load = load_config(config_path);
    if (!load.config) {
      for (const auto& p : load.problems) {
        log::error("", "config not reloaded: " + p);
      }
      log::error("", "SIGHUP: " + config_path + " is invalid; still running with the previous config");
      return;
    }
    Config next = std::move(*load.config);
    std::lock_guard lock(mutex);
    for (const auto& [key, same] : {std::pair<const char*, bool>{"listen", next.listen == config.listen},
                                    {"database", next.database == config.database},
                                    {"data_dir", next.data_dir == config.data_dir},
                                    {"public_url", next.public_url == config.public_url},
                                    {"change_list_part_size", next.change_list_part_size == config.change_list_part_size},
                                    {"resource_dump_interval", next.resource_dump_interval == config.resource_dump_interval},
                                    {"dump_package_size", next.dump_package_size == config.dump_package_size},
                                    {"dump_package_bytes", next.dump_package_bytes == config.dump_package_bytes},
                                    {"sets", sets_equal(next, config)}}) {
      if (!same) {
        log::warn("", std::string("SIGHUP: a change of '") + key + "' takes effect after a restart");
      }
    }
    size_t added = 0, removed = 0;
    for (const auto& s : next.sources) {
      added += config.find_source(s.name) ? 0 : 1;
    }
    for (const auto& s : config.sources) {
      removed += next.find_source(s.name) ? 0 : 1;
    }
    apply_logging(next);
    load_admin_token(next);
    scheduler.configure(next.sources, Clock::now());
    next.listen = config.listen;
    next.database = config.database;
    next.data_dir = config.data_dir;
    next.public_url = config.public_url;
    next.change_list_part_size = config.change_list_part_size;
    next.sets = config.sets;
    config = std::move(next);
    log::info("", "config reloaded", {{"sources", std::to_string(config.sources.size())},
                                      {"added", std::to_string(added)},
                                      {"removed", std::to_string(removed)}});
    wake.notify_all();
  }

  // ---- running sources ----------------------------------------------------

  void dispatch() {
    std::unique_lock lock(mutex);
    while (!stopping) {
      for (auto it = running.begin(); it != running.end();) {
        if (it->second.done) {
          it->second.thread.join();
          it = running.erase(it);
        } else {
          ++it;
        }
      }
      const Time now = Clock::now();
      for (Job& job : scheduler.due(now, config.max_concurrent_syncs)) {
        const sync::SourceConfig* cfg = scheduler.source(job.source);
        Running& r = running[job.source];
        r.mode = job.mode;
        r.started = now;
        r.progress = {};
        r.done = false;
        r.thread = std::thread([this, job, src = *cfg] { run_job(job, src); });
      }
      auto until = now + std::chrono::seconds(1);
      if (auto next = scheduler.next_due()) {
        until = std::clamp(*next, now + std::chrono::milliseconds(10), until);
      }
      wake.wait_until(lock, until);
    }
    // Stopping: runs stop at their next batch.
    for (auto& [name, r] : running) {
      lock.unlock();
      r.thread.join();
      lock.lock();
    }
    running.clear();
  }

  void run_job(const Job& job, const sync::SourceConfig& src) {
    log::info(src.name, "run started", {{"mode", std::string(store::to_string(job.mode))},
                                        {"trigger", job.requested ? "api" : "schedule"}});
    sync::SourceReport report;
    auto session = store->open_session();
    if (!session) {
      report.source = src.name;
      report.status = store::RunStatus::failed;
      report.errors.push_back(session.error().message);
      report.error_count = 1;
    } else {
      sync::SyncEngine engine(std::shared_ptr<store::Store>(std::move(*session)), blobs, fetcher, limiter,
                              std::filesystem::path(config.data_dir) / "tmp", validators);
      sync::RunOptions options;
      options.mode = job.mode;
      options.repair = job.mode == store::RunMode::audit;
      options.cancel = &stopping;
      options.on_progress = [this, name = src.name](const sync::Progress& p) {
        std::lock_guard lock(mutex);
        if (auto it = running.find(name); it != running.end()) {
          it->second.progress = p;
        }
      };
      report = engine.run(src, options);
    }
    const bool ok = report.status != store::RunStatus::failed;
    log::Fields fields{{"mode", std::string(store::to_string(job.mode))},
                       {"status", std::string(store::to_string(report.status))},
                       {"run", std::to_string(report.run_id)},
                       {"seconds", std::to_string(static_cast<double>(report.duration.count()) / 1000.0)},
                       {"counts", sync::format_counters(report.counters)},
                       {"errors", std::to_string(report.error_count)}};
    if (!report.errors.empty()) {
      fields.emplace_back("first_error", report.errors.front());
    }
    if (ok) {
      log::info(src.name, "run finished", fields);
    } else {
      log::error(src.name, "run failed", fields);
    }
    for (const auto& n : report.notes) {
      log::info(src.name, "note: " + n);
    }
    // A baseline allocates and frees a lot; keep the daemon's footprint
    // what it holds, not its peak.
    malloc_trim(0);
    const auto& c = report.counters;
    if (republisher && c.created + c.updated + c.deleted > 0) {
      republisher->refresh_soon(); // our Change List shows the changes now, not at the next check
    }
    std::lock_guard lock(mutex);
    scheduler.finished(src.name, job.mode, ok, Clock::now());
    ++runs_total[src.name + "\n" + std::string(store::to_string(report.status))];
    last_duration[src.name] = static_cast<double>(report.duration.count()) / 1000.0;
    if (auto it = running.find(src.name); it != running.end()) {
      it->second.done = true;
    }
    wake.notify_all();
  }

  // ---- status API ---------------------------------------------------------

  std::optional<http::Disposition> route(const http::Request& req, http::Response& res, bool can_block) {
    const std::string& p = req.path;
    const bool api = p.rfind("/api/", 0) == 0;
    if (!api && p != "/metrics" && p != "/healthz" && p != "/readyz" && p != "/status") {
      return std::nullopt;
    }
    if (p == "/healthz") {
      answer(res, 200, {{"status", "alive"}});
      return http::Disposition::done;
    }
    if (p == "/status") {
      res.set_body(std::string(status_page_html()), "text/html; charset=utf-8");
      res.set_header("Cache-Control", "no-cache");
      return http::Disposition::done;
    }
    if (!can_block) {
      return http::Disposition::blocking; // everything else reads the database
    }
    try {
      if (p == "/readyz") {
        if (auto r = store::check_schema(config_database()); !r) {
          fail(res, 503, "not_ready", r.error().message);
        } else {
          answer(res, 200, {{"status", "ready"}});
        }
      } else if (p == "/metrics") {
        metrics(res);
      } else {
        api_route(req, res);
      }
    } catch (const std::exception& e) {
      fail(res, 500, "internal", e.what());
    }
    return http::Disposition::done;
  }

  std::string config_database() {
    std::lock_guard lock(mutex);
    return config.database;
  }

  void api_route(const http::Request& req, http::Response& res) {
    const std::string prefix = "/api/v1/sources/";
    if (req.path == "/api/v1/status") {
      if (req.method != "GET" && req.method != "HEAD") {
        res.set_header("Allow", "GET, HEAD");
        fail(res, 405, "method_not_allowed", "use GET");
        return;
      }
      auto sources = sources_json("");
      if (!sources) {
        fail(res, 503, "store_unavailable", sources.error().message);
        return;
      }
      const auto uptime = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - started_at).count();
      answer(res, 200,
             {{"version", std::string(version())},
              {"started_at", iso(started_at)},
              {"now", iso(Clock::now())},
              {"uptime_seconds", uptime},
              {"sources", *sources}});
      return;
    }
    if (req.path.rfind(prefix, 0) != 0) {
      fail(res, 404, "not_found", "no such endpoint: " + req.path);
      return;
    }
    std::string rest = req.path.substr(prefix.size());
    std::string action;
    if (auto slash = rest.find('/'); slash != std::string::npos) {
      action = rest.substr(slash + 1);
      rest = rest.substr(0, slash);
    }
    const std::string name = rest;
    {
      std::lock_guard lock(mutex);
      if (!scheduler.source(name)) {
        fail(res, 404, "unknown_source", "no source named '" + name + "' in the configuration");
        return;
      }
    }
    if (action.empty() || action == "runs") {
      if (req.method != "GET" && req.method != "HEAD") {
        res.set_header("Allow", "GET, HEAD");
        fail(res, 405, "method_not_allowed", "use GET");
        return;
      }
      if (action.empty()) {
        auto sources = sources_json(name);
        if (!sources) {
          fail(res, 503, "store_unavailable", sources.error().message);
        } else {
          answer(res, 200, sources->at(0));
        }
        return;
      }
      std::lock_guard lock(status_mutex);
      auto runs = status_store->recent_runs(name, 50);
      if (!runs) {
        fail(res, 503, "store_unavailable", runs.error().message);
        return;
      }
      json list = json::array();
      for (const auto& r : *runs) {
        list.push_back(run_json(r));
      }
      answer(res, 200, {{"source", name}, {"runs", list}});
      return;
    }
    if (action != "sync") {
      fail(res, 404, "not_found", "no such endpoint: " + req.path);
      return;
    }
    if (req.method != "POST") {
      res.set_header("Allow", "POST");
      fail(res, 405, "method_not_allowed", "use POST");
      return;
    }
    std::optional<std::string> token;
    {
      std::lock_guard lock(mutex);
      token = admin_token;
    }
    const std::string auth = req.header_value("authorization");
    if (!token) {
      res.set_header("WWW-Authenticate", "Bearer");
      fail(res, 401, "unauthorized", "no admin token is configured (admin_token_file or admin_token_env)");
      return;
    }
    if (auth.rfind("Bearer ", 0) != 0 || !same_secret(auth.substr(7), *token)) {
      res.set_header("WWW-Authenticate", "Bearer");
      fail(res, 401, "unauthorized", auth.empty() ? "an admin bearer token is required" : "wrong admin token");
      return;
    }
    std::string mode_name = "incremental";
    if (!req.body.empty()) {
      json body = json::parse(req.body, nullptr, false);
      if (body.is_discarded() || !body.is_object() ||
          (body.contains("mode") && !body["mode"].is_string())) {
        fail(res, 400, "bad_request", "expected a JSON object such as {\"mode\": \"incremental\"}");
        return;
      }
      mode_name = body.value("mode", mode_name);
    }
    auto mode = mode_from(mode_name);
    if (!mode) {
      fail(res, 400, "bad_request", "mode must be \"incremental\", \"baseline\" or \"audit\"");
      return;
    }
    Scheduler::Request r;
    {
      std::lock_guard lock(mutex);
      r = scheduler.request(name, *mode);
    }
    if (r == Scheduler::Request::disabled) {
      fail(res, 409, "disabled", "source '" + name + "' is disabled in the configuration");
      return;
    }
    wake.notify_all();
    log::info(name, "run requested through the API", {{"mode", mode_name}});
    answer(res, 202, {{"source", name}, {"mode", mode_name}, {"queued", true}});
  }

  using StatsByName = std::map<std::string, store::SourceStats>;
  Result<StatsByName> read_stats() {
    std::lock_guard lock(status_mutex);
    auto s = status_store->source_stats();
    if (!s) {
      return tl::unexpected(s.error());
    }
    StatsByName out;
    for (auto& st : *s) {
      std::string name = st.name;
      out.emplace(std::move(name), std::move(st));
    }
    return out;
  }

  // One object per configured source (or just `only`): the scheduler's view,
  // the running job's progress, and the store's counts and runs.
  Result<json> sources_json(const std::string& only) {
    auto stats = read_stats();
    if (!stats) {
      return tl::unexpected(stats.error());
    }
    const Time now = Clock::now();
    json out = json::array();
    std::lock_guard lock(mutex);
    for (const auto& v : scheduler.view()) {
      if (!only.empty() && v.name != only) {
        continue;
      }
      const sync::SourceConfig* cfg = scheduler.source(v.name);
      json j{{"name", v.name},
             {"url", cfg->url},
             {"enabled", cfg->enabled},
             {"state", std::string(to_string(v.state))},
             {"interval_seconds", cfg->interval.count()},
             {"audit_interval_seconds", cfg->audit_interval.count()},
             {"strategy", cfg->strategy},
             {"next_run_at", v.state == SourceState::disabled ? json(nullptr) : json(iso(v.next_run))},
             {"consecutive_failures", v.consecutive_failures},
             {"queued", v.queued ? json(*v.queued) : json(nullptr)}};
      auto found = stats->find(v.name);
      const store::SourceStats* st = found == stats->end() ? nullptr : &found->second;
      j["resources"] = {{"live", st ? st->live : 0}, {"deleted", st ? st->deleted : 0},
                        {"retrying", st ? st->retrying : 0}};
      j["bytes"] = st ? st->bytes : 0;
      j["watermark"] = st && st->newest_change ? json(iso(*st->newest_change)) : json(nullptr);
      j["baseline_at"] = st && st->baseline_at ? json(iso(*st->baseline_at)) : json(nullptr);
      j["last_success"] = st && st->last_success ? run_json(*st->last_success) : json(nullptr);
      if (st && st->last_failure) {
        json f = run_json(*st->last_failure);
        f["error"] = st->last_failure->message;
        j["last_failure"] = f;
      } else {
        j["last_failure"] = nullptr;
      }
      uint64_t unapplied = 0;
      json job = nullptr;
      if (auto it = running.find(v.name); it != running.end() && !it->second.done) {
        const sync::Progress& p = it->second.progress;
        unapplied = p.total > p.done ? p.total - p.done : 0;
        job = {{"mode", store::to_string(it->second.mode)},
               {"started_at", iso(it->second.started)},
               {"document", p.document},
               {"done", p.done},
               {"total", p.total},
               {"per_second", p.per_second},
               {"eta_seconds", p.per_second > 0 && p.total > p.done
                                   ? json(static_cast<double>(p.total - p.done) / p.per_second)
                                   : json(nullptr)}};
      }
      j["job"] = job;
      json lag{{"unapplied_changes", unapplied}};
      if (st && st->newest_change) {
        lag["seconds"] = std::max(0.0, std::chrono::duration<double>(now - *st->newest_change).count());
      } else {
        lag["seconds"] = nullptr;
      }
      j["lag"] = lag;
      out.push_back(std::move(j));
    }
    return out;
  }

  void metrics(http::Response& res) {
    auto stats = read_stats();
    if (!stats) {
      fail(res, 503, "store_unavailable", stats.error().message);
      return;
    }
    std::ostringstream m;
    auto family = [&m](const char* name, const char* type, const char* help) {
      m << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
    };
    std::lock_guard lock(mutex);
    const auto views = scheduler.view();
    auto stat_of = [&stats](const std::string& name) -> const store::SourceStats* {
      auto it = stats->find(name);
      return it == stats->end() ? nullptr : &it->second;
    };
    const auto now = Clock::now();
    family("tributary_source_resources", "gauge", "Resources held live.");
    for (const auto& v : views) {
      const auto* s = stat_of(v.name);
      m << "tributary_source_resources{source=\"" << v.name << "\"} " << (s ? s->live : 0) << '\n';
    }
    family("tributary_source_deleted_resources", "gauge", "Resources held as deleted.");
    for (const auto& v : views) {
      const auto* s = stat_of(v.name);
      m << "tributary_source_deleted_resources{source=\"" << v.name << "\"} " << (s ? s->deleted : 0) << '\n';
    }
    family("tributary_source_retrying_resources", "gauge",
           "Resources whose content failed and is fetched again by later runs.");
    for (const auto& v : views) {
      const auto* s = stat_of(v.name);
      m << "tributary_source_retrying_resources{source=\"" << v.name << "\"} " << (s ? s->retrying : 0) << '\n';
    }
    family("tributary_source_bytes", "gauge", "Bytes of the resources held live.");
    for (const auto& v : views) {
      const auto* s = stat_of(v.name);
      m << "tributary_source_bytes{source=\"" << v.name << "\"} " << (s ? s->bytes : 0) << '\n';
    }
    family("tributary_source_lag_seconds", "gauge", "Now minus the newest upstream change applied.");
    for (const auto& v : views) {
      const auto* s = stat_of(v.name);
      if (s && s->newest_change) {
        m << "tributary_source_lag_seconds{source=\"" << v.name << "\"} "
          << std::max(0.0, std::chrono::duration<double>(now - *s->newest_change).count()) << '\n';
      }
    }
    family("tributary_source_last_success_timestamp_seconds", "gauge", "When the last successful run ended.");
    for (const auto& v : views) {
      const auto* s = stat_of(v.name);
      if (s && s->last_success && s->last_success->finished_at) {
        m << "tributary_source_last_success_timestamp_seconds{source=\"" << v.name << "\"} " << std::fixed
          << epoch_seconds(*s->last_success->finished_at) << std::defaultfloat << '\n';
      }
    }
    family("tributary_source_consecutive_failures", "gauge", "Failed runs since the last success.");
    for (const auto& v : views) {
      m << "tributary_source_consecutive_failures{source=\"" << v.name << "\"} " << v.consecutive_failures << '\n';
    }
    family("tributary_source_state", "gauge", "1 for the source's current state.");
    for (const auto& v : views) {
      m << "tributary_source_state{source=\"" << v.name << "\",state=\"" << to_string(v.state) << "\"} 1\n";
    }
    family("tributary_source_last_run_duration_seconds", "gauge", "Duration of the last run in this process.");
    for (const auto& [name, secs] : last_duration) {
      m << "tributary_source_last_run_duration_seconds{source=\"" << name << "\"} " << secs << '\n';
    }
    family("tributary_runs_total", "counter", "Runs finished by this process, by source and status.");
    for (const auto& [key, n] : runs_total) {
      const auto nl = key.find('\n');
      m << "tributary_runs_total{source=\"" << key.substr(0, nl) << "\",status=\"" << key.substr(nl + 1) << "\"} "
        << n << '\n';
    }
    family("tributary_syncs_running", "gauge", "Sources syncing now.");
    m << "tributary_syncs_running " << running.size() << '\n';
    family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
    m << "process_resident_memory_bytes " << resident_bytes() << '\n';
    family("process_start_time_seconds", "gauge", "Start time of the process since the epoch, in seconds.");
    m << "process_start_time_seconds " << std::chrono::duration_cast<std::chrono::seconds>(
                                               started_at.time_since_epoch()).count()
      << '\n';
    res.set_body(m.str(), "text/plain; version=0.0.4; charset=utf-8");
  }
};

int run_daemon(const std::string& config_path, std::ostream& out, std::ostream& err) {
  auto load = load_config(config_path);
  for (const auto& p : load.problems) {
    err << p << '\n';
  }
  if (!load.config) {
    return 1;
  }
  // Signals are taken by one thread with sigwait, never by a worker.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto d = std::make_unique<Daemon>();
  d->config_path = config_path;
  d->config = std::move(*load.config);
  d->apply_logging(d->config);
  d->load_admin_token(d->config);
  auto store = store::PgStore::open(d->config.database);
  if (!store) {
    err << "tributary run: " << store.error().message << '\n';
    return 1;
  }
  d->store = std::move(*store);
  auto status_store = store::PgStore::open(d->config.database);
  if (!status_store) {
    err << "tributary run: " << status_store.error().message << '\n';
    return 1;
  }
  d->status_store = std::move(*status_store);
  auto blobs = sync::BlobStore::open(d->config.data_dir);
  if (!blobs) {
    err << "tributary run: " << blobs.error().message << '\n';
    return 1;
  }
  d->blobs = *blobs;
  d->scheduler.configure(d->config.sources, Clock::now());

  pub::ServerOptions options;
  const auto colon = d->config.listen.rfind(':');
  options.host = d->config.listen.substr(0, colon);
  options.port = std::stoi(d->config.listen.substr(colon + 1));
  options.public_url = d->config.public_url;
  options.change_list_part = d->config.change_list_part_size;
  options.dump_dir = d->config.serving_dir("dumps");
  options.document_dir = d->config.serving_dir("documents");
  options.resource_dump_interval = d->config.resource_dump_interval;
  options.dump_package_entries = d->config.dump_package_size;
  options.dump_package_bytes = d->config.dump_package_bytes;
  for (const auto& s : d->config.sets) {
    options.named_sets.push_back(pub::NamedSet{s.name, s.sources});
  }
  Daemon* dp = d.get();
  options.before = [dp](const http::Request& req, http::Response& res, bool can_block) {
    return dp->route(req, res, can_block);
  };
  pub::Republisher server(d->store, d->blobs, options);
  d->republisher = &server;
  if (auto r = server.start(); !r) {
    err << "tributary run: " << r.error().message << '\n';
    return 1;
  }
  const std::string base = d->config.public_url.back() == '/' ? d->config.public_url.substr(0, d->config.public_url.size() - 1)
                                                               : d->config.public_url;
  log::info("", "tributary " + std::string(version()) + " running",
            {{"listen", options.host + ":" + std::to_string(server.port())},
             {"sources", std::to_string(d->config.sources.size())},
             {"status_page", base + "/status"},
             {"source_description", base + "/.well-known/resourcesync"}});
  out << "status page: " << base << "/status\n"
      << "source description: " << base << "/.well-known/resourcesync" << std::endl;

  std::thread dispatcher([dp] { dp->dispatch(); });
  for (;;) {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig == SIGHUP) {
      log::info("", "SIGHUP: reloading " + config_path);
      d->reload();
      continue;
    }
    log::info("", std::string("stopping (") + (sig == SIGTERM ? "SIGTERM" : "SIGINT") +
                      "): runs stop at their next batch");
    break;
  }
  {
    std::lock_guard lock(d->mutex);
    d->stopping = true;
  }
  d->wake.notify_all();
  dispatcher.join();
  server.stop();
  log::info("", "stopped");
  return 0;
}

} // namespace tributary::agg

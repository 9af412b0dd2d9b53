#include "aggregator/status/api.h"

#include "aggregator/status/metrics.h"
#include "aggregator/daemon/source_actions.h"
#include "aggregator/status/json.h"
#include "resourcesync/websub.h"
#include "aggregator/status/page.h"
#include "common/log.h"
#include "common/text.h"
#include "common/version.h"
#include "resourcesync/datetime.h"
#include "store/pg/migrations.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace tributary::agg {

using nlohmann::json;

namespace api {

std::string iso(Time t) {
  return rs::format_w3c_datetime(std::chrono::time_point_cast<std::chrono::microseconds>(t));
}

std::string iso(rs::Timestamp t) { return rs::format_w3c_datetime(t); }

// Every answer of the API has one shape: {"ok": true, "data": …} or
// {"ok": false, "error": {"code": …, "message": …}}.
void answer(http::Response& res, int status, const json& data, int indent) {
  res.status = status;
  res.set_body(json{{"ok", true}, {"data", data}}.dump(indent) + "\n", "application/json");
  res.set_header("Cache-Control", "no-store");
}

void fail(http::Response& res, int status, const std::string& code, const std::string& message) {
  res.status = status;
  res.set_body(json{{"ok", false}, {"error", {{"code", code}, {"message", message}}}}.dump(2) + "\n",
               "application/json");
  res.set_header("Cache-Control", "no-store");
}

} // namespace api

namespace {

using api::answer;
using api::fail;
using api::iso;

} // namespace

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
         {"message", r.message},
         {"node", r.node.empty() ? json(nullptr) : json(r.node)},
         {"trigger", r.trigger ? json(std::string(store::to_string(*r.trigger))) : json(nullptr)}};
  if (r.finished_at) {
    j["duration_seconds"] = static_cast<double>((*r.finished_at - r.started_at).count()) / 1e6;
  }
  return j;
}

json hold_json(const store::DeletionHold& h) {
  return {{"capability_list", h.capability_list_url},
          {"unlisted", h.unseen},
          {"live", h.live},
          {"since", iso(h.since)},
          {"run_id", h.run_id},
          {"confirmed", h.confirmed}};
}



std::pair<std::string, std::string> sync_state_of(const Scheduler::View& v, const sync::SourceConfig& cfg,
                                                  const store::SourceStats* st, uint64_t unapplied, Time now) {
  if (v.state == SourceState::disabled) {
    return {"disabled", "disabled in the configuration"};
  }
  if (v.paused) {
    return {"paused", "paused by an operator"};
  }
  if (v.consecutive_failures > 0) {
    return {"failing", std::to_string(v.consecutive_failures) + " failed run(s) in a row"};
  }
  // What needs a human: deletions held for a confirmation, a Source whose
  // clock is ahead. Green would hide them.
  if (st) {
    uint64_t held = 0;
    for (const auto& h : st->deletion_holds) {
      held += h.confirmed ? 0 : h.unseen;
    }
    if (held > 0) {
      return {"attention", std::to_string(held) + " deletion(s) held by the mass-deletion guard: confirm or refuse "
                                                  "them (the source's page, or the API)"};
    }
  }
  if (st && st->clock_ahead_seconds) {
    return {"attention", "the Source's clock is ahead: it dates changes up to " +
                             std::to_string(static_cast<long long>(*st->clock_ahead_seconds)) +
                             " s in the future (applied; the watermark waits at the time they were read)"};
  }
  if (const auto age = retry_age_of(st, now);
      age && cfg.retry_attention_after.count() > 0 && *age > static_cast<double>(cfg.retry_attention_after.count())) {
    return {"attention", std::to_string(st->retrying) +
                             " resource(s) wait for a retry of their content, the oldest failing for " +
                             human_duration(static_cast<int64_t>(*age)) +
                             ", longer than retry_attention_after: see them on the source's page (retry now, "
                             "or fix the Source)"};
  }
  if (st && st->retrying > 0) {
    return {"lagging", std::to_string(st->retrying) + " resource(s) wait for a retry of their content"};
  }
  if (!st || !st->last_success) {
    return {"lagging", "no successful run yet"};
  }
  if (unapplied > 0) {
    return {"lagging", std::to_string(unapplied) + " change(s) left to apply in the running job"};
  }
  // Overdue: due for longer than its interval (every slot busy).
  const auto grace = std::max<std::chrono::seconds>(cfg.interval, std::chrono::seconds(60));
  if (!v.running && now > v.next_run + grace) {
    const auto late = std::chrono::duration_cast<std::chrono::seconds>(now - v.next_run).count();
    return {"lagging", "overdue by " + std::to_string(late) + " s (its run waits for a free slot)"};
  }
  return {"in_sync", ""};
}

std::optional<double> lag_of(const Scheduler::View& v, const store::SourceStats* st, Time configured, Time now) {
  if (v.state == SourceState::disabled || v.paused) {
    return std::nullopt;
  }
  const Time since = st && st->last_success ? Time(st->last_success->started_at) : configured;
  return std::max(0.0, std::chrono::duration<double>(now - since).count());
}

std::optional<double> retry_age_of(const store::SourceStats* st, Time now) {
  if (!st || st->retrying == 0 || !st->retrying_since) {
    return std::nullopt;
  }
  return std::max(0.0, std::chrono::duration<double>(now - Time(*st->retrying_since)).count());
}

Time configured_at(const DaemonState& state, const std::string& name, const store::SourceStats* st) {
  if (st && st->created_at != rs::Timestamp{}) {
    return Time(st->created_at);
  }
  auto it = state.configured_at.find(name);
  return it == state.configured_at.end() ? state.started_at : it->second;
}

Result<json> sources_json(DaemonState& state, const std::string& only) {
  auto stats = read_stats(state);
  if (!stats) {
    return tl::unexpected(stats.error());
  }
  const Time now = Clock::now();
  json out = json::array();
  std::lock_guard lock(state.mutex);
  for (const auto& v : state.scheduler.view()) {
    if (!only.empty() && v.name != only) {
      continue;
    }
    const sync::SourceConfig* cfg = state.scheduler.source(v.name);
    auto parsed = sync::parse_url(cfg->url);
    json j{{"name", v.name},
           {"url", cfg->url},
           {"host", parsed ? json(parsed->origin()) : json(nullptr)},
           {"enabled", cfg->enabled},
           {"activity", std::string(to_string(v.state))},
           {"interval_seconds", cfg->interval.count()},
           {"audit_interval_seconds", cfg->audit_interval.count()},
           {"strategy", cfg->strategy},
           {"next_run_at", v.state == SourceState::disabled ? json(nullptr) : json(iso(v.next_run))},
           {"consecutive_failures", v.consecutive_failures},
           {"queued", v.queued ? json(*v.queued) : json(nullptr)},
           {"queued_by", v.queued_by ? json(std::string(store::to_string(*v.queued_by))) : json(nullptr)}};
    auto found = stats->find(v.name);
    const store::SourceStats* st = found == stats->end() ? nullptr : &found->second;
    j["resources"] = {{"live", st ? st->live : 0}, {"deleted", st ? st->deleted : 0},
                      {"retrying", st ? st->retrying : 0},
                      {"retrying_since", retry_age_of(st, now) ? json(iso(*st->retrying_since)) : json(nullptr)}};
    j["bytes"] = st ? st->bytes : 0;
    // What the Source publishes, as its last run found it.
    j["kind"] = st && !st->kind.empty() ? json(st->kind) : json(nullptr);
    // A Source whose clock is ahead (its last Change List dated changes past
    // clock_tolerance in the future): by how much.
    j["clock_ahead_seconds"] =
        st && st->clock_ahead_seconds ? json(std::round(*st->clock_ahead_seconds)) : json(nullptr);
    j["watermark"] = st && st->newest_change ? json(iso(*st->newest_change)) : json(nullptr);
    j["baseline_at"] = st && st->baseline_at ? json(iso(*st->baseline_at)) : json(nullptr);
    j["last_success"] = st && st->last_success ? run_json(*st->last_success) : json(nullptr);
    // Which node runs the source now (any daemon on the database, by its
    // lease), else which ran it last.
    const bool running = st && st->last_run && st->last_run->status == store::RunStatus::running;
    j["running_on"] = running && !st->last_run->node.empty() ? json(st->last_run->node) : json(nullptr);
    j["last_node"] = st && st->last_run && !st->last_run->node.empty() ? json(st->last_run->node) : json(nullptr);
    if (st && st->last_failure) {
      json f = run_json(*st->last_failure);
      f["error"] = st->last_failure->message;
      j["last_failure"] = f;
    } else {
      j["last_failure"] = nullptr;
    }
    // The mass-deletion guard's holds, with why and what to do.
    json holds = json::array();
    for (const auto& h : st ? st->deletion_holds : std::vector<store::DeletionHold>{}) {
      json hj = hold_json(h);
      hj["reason"] = "the Resource List lacks " + std::to_string(h.unseen) + " of the " + std::to_string(h.live) +
                     " resources held, more than max_deletion_share (" +
                     std::to_string(static_cast<int>(cfg->max_deletion_share * 100 + 0.5)) +
                     "%): none deleted until an operator confirms";
      hj["confirm"] = "POST /api/v1/sources/" + v.name + "/confirm-deletions";
      holds.push_back(std::move(hj));
    }
    j["deletions_held"] = holds;
    uint64_t unapplied = 0;
    json job = nullptr;
    if (auto it = state.running.find(v.name); it != state.running.end() && !it->second.done) {
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
    const auto seconds = lag_of(v, st, configured_at(state, v.name, st), now);
    lag["seconds"] = seconds ? json(*seconds) : json(nullptr);
    j["lag"] = lag;
    auto [sync, why] = sync_state_of(v, *cfg, st, unapplied, now);
    j["state"] = sync;
    j["state_reason"] = why.empty() ? json(nullptr) : json(why);
    if (auto it = state.pauses.find(v.name); it != state.pauses.end()) {
      j["paused"] = {{"since", iso(it->second.at)}, {"by", it->second.by}, {"reason", it->second.reason}};
    } else {
      j["paused"] = nullptr;
    }
    j["failing_since"] = st && st->failing_since && sync == "failing" ? json(iso(*st->failing_since)) : json(nullptr);
    if (auto it = state.configured_at.find(v.name); it != state.configured_at.end()) {
      j["configured_at"] = st && st->created_at != rs::Timestamp{} ? iso(st->created_at) : iso(it->second);
    } else {
      j["configured_at"] = nullptr;
    }
    out.push_back(std::move(j));
  }
  return out;
}

namespace {

// Each upstream host's throttle: its window, its rate and why it changed.
nlohmann::json hosts_json(const DaemonState& state) {
  auto out = nlohmann::json::array();
  auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  auto when = [](const std::optional<Time>& t) { return t ? nlohmann::json(iso(*t)) : nlohmann::json(nullptr); };
  for (const auto& h : state.throttle->snapshot()) {
    out.push_back({{"host", h.host},
                   {"window", h.window},
                   {"max_window", h.max_window},
                   {"in_flight", h.in_flight},
                   {"rate_limit", opt(h.rate_limit)},
                   {"configured_rate", opt(h.configured_rate)},
                   {"crawl_delay", opt(h.crawl_delay)},
                   {"measured_rate", h.measured_rate},
                   {"minute_rate", h.minute_rate},
                   {"latency_ms", h.latency_ms},
                   {"usual_latency_ms", h.usual_latency_ms},
                   {"requests", h.requests},
                   {"throttled", h.throttled},
                   {"paused_until", when(h.paused_until)},
                   {"reason", h.reason},
                   {"changed_at", when(h.changed_at)}});
  }
  return out;
}




// What the last reload did, or null.
json reload_json(DaemonState& state) {
  std::lock_guard lock(state.mutex);
  if (!state.last_reload) {
    return nullptr;
  }
  const auto& r = *state.last_reload;
  return {{"at", iso(r.at)},
          {"ok", r.ok},
          {"error", r.ok ? json(nullptr) : json(r.error)},
          {"added", r.sources.added},
          {"removed", r.sources.removed},
          {"enabled", r.sources.enabled},
          {"disabled", r.sources.disabled},
          {"changed", r.sources.changed},
          {"restart_needed", r.restart_needed}};
}

// The conditions of this node that pause its runs: the database out of
// reach (shown only in the 503 answers, as this answer needs it) and the
// data directory's disk full.
nlohmann::json node_json(const DaemonState& state) {
  json disk = {{"full", false}};
  if (auto c = state.disk.condition()) {
    disk = {{"full", true}, {"since", iso(c->since)}, {"free_bytes", c->free_bytes}};
  }
  return {{"disk", disk}, {"started_at", iso(state.started_at)}};
}

void api_route(DaemonState& state, const http::Request& req, http::Response& res) {
  const std::string prefix = "/api/v1/sources/";
  if (req.path == "/api/v1/status") {
    if (req.method != "GET" && req.method != "HEAD") {
      res.set_header("Allow", "GET, HEAD");
      fail(res, 405, "method_not_allowed", "use GET");
      return;
    }
    auto sources = sources_json(state, "");
    if (!sources) {
      fail(res, 503, "store_unavailable", state.database.for_client(sources.error()));
      return;
    }
    const auto uptime = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - state.started_at).count();
    answer(res, 200,
           {{"version", std::string(version())},
            {"started_at", iso(state.started_at)},
            {"now", iso(Clock::now())},
            {"uptime_seconds", uptime},
            {"node", node_json(state)},
            {"sources", *sources},
            {"hosts", hosts_json(state)},
            {"push", push_json(state, k_subscribers_shown)},
            {"reload", reload_json(state)}});
    return;
  }
  if (req.path == "/api/v1/push") {
    if (req.method != "GET" && req.method != "HEAD") {
      res.set_header("Allow", "GET, HEAD");
      fail(res, 405, "method_not_allowed", "use GET");
      return;
    }
    size_t limit = k_subscribers_shown;
    if (auto q = rs::websub::parse_form(req.query); q && q->count("limit")) {
      const std::string& v = q->at("limit");
      if (v.empty() || v.size() > 6 || v.find_first_not_of("0123456789") != std::string::npos) {
        fail(res, 400, "bad_request", "limit must be a number of subscribers, at most 100000");
        return;
      }
      limit = std::stoul(v);
    }
    answer(res, 200, push_json(state, limit));
    return;
  }
  if (req.path == "/api/v1/hosts") {
    if (req.method != "GET" && req.method != "HEAD") {
      res.set_header("Allow", "GET, HEAD");
      fail(res, 405, "method_not_allowed", "use GET");
      return;
    }
    answer(res, 200, {{"hosts", hosts_json(state)}});
    return;
  }
  if (req.path == "/api/v1/history") {
    if (req.method != "GET" && req.method != "HEAD") {
      res.set_header("Allow", "GET, HEAD");
      fail(res, 405, "method_not_allowed", "use GET");
      return;
    }
    history_route(state, req, res);
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
    std::lock_guard lock(state.mutex);
    if (!state.scheduler.source(name)) {
      fail(res, 404, "unknown_source", "no source named '" + name + "' in the configuration");
      return;
    }
  }
  if (action.empty() || action == "runs" || action == "detail") {
    if (req.method != "GET" && req.method != "HEAD") {
      res.set_header("Allow", "GET, HEAD");
      fail(res, 405, "method_not_allowed", "use GET");
      return;
    }
    if (action == "detail") {
      detail_route(state, name, res);
      return;
    }
    if (action.empty()) {
      auto sources = sources_json(state, name);
      if (!sources) {
        fail(res, 503, "store_unavailable", state.database.for_client(sources.error()));
      } else {
        answer(res, 200, sources->at(0));
      }
      return;
    }
    runs_route(state, name, req, res);
    return;
  }
  if (!is_source_action(action)) {
    fail(res, 404, "not_found", "no such endpoint: " + req.path);
    return;
  }
  source_action(state, name, action, req, res);
}

} // namespace

namespace {

constexpr auto k_status_cache_time = std::chrono::seconds(1);

} // namespace

bool fresh(const DaemonState::Cached& c) {
  return c.valid && std::chrono::steady_clock::now() - c.at < k_status_cache_time;
}

Result<StatsByName> read_stats(DaemonState& state) {
  std::lock_guard lock(state.status_mutex);
  if (!fresh(state.stats_read)) {
    auto s = state.status_store->source_stats();
    if (!s) {
      state.stats_read.valid = false;
      return tl::unexpected(s.error());
    }
    state.stats = std::move(*s);
    state.stats_read = {std::chrono::steady_clock::now(), true};
  }
  StatsByName out;
  for (const auto& st : state.stats) {
    out.emplace(st.name, st);
  }
  return out;
}

std::optional<std::string> readiness(DaemonState& state) {
  std::lock_guard lock(state.status_mutex);
  if (fresh(state.ready_read)) {
    return state.not_ready;
  }
  std::optional<std::string> why;
  std::string detail;
  auto v = state.status_store->schema_version();
  if (!v) {
    why = "the database does not answer";
    if (v.error().kind == ErrorKind::database) {
      state.database.lost(v.error().message);
      why = state.database.describe();
    }
    detail = v.error().message;
  } else if (*v != store::expected_schema_version()) {
    why = "the database schema is at version " + std::to_string(*v) + ", this Tributary needs " +
          std::to_string(store::expected_schema_version());
  }
  if (why != state.not_ready) {
    // Once per change, with the database's own words: they stay in the
    // log, never in an answer to a client.
    if (why) {
      log::warn("", "not ready: " + *why, detail.empty() ? log::Fields{} : log::Fields{{"error", detail}});
    } else {
      log::info("", "ready: the database answers");
    }
  }
  if (v && state.database.answered()) {
    // Runs waiting for the database go now, not at their next retry (told
    // through the dispatcher: `mutex` is never taken under status_mutex).
    state.database_back = true;
    state.wake.notify_all();
  }
  state.not_ready = why;
  state.ready_read = {std::chrono::steady_clock::now(), true};
  return why;
}

void StatusApi::mount(http::Router& router) {
  mount_probes(router);
  mount_operator(router);
}

void StatusApi::mount_probes(http::Router& router) {
  auto h = [this](const http::Request& req, http::Response& res, bool can_block) {
    return handle(req, res, can_block);
  };
  for (const char* path : {"/healthz", "/readyz"}) {
    router.mount(path, h);
  }
}

void StatusApi::mount_operator(http::Router& router) {
  auto h = [this](const http::Request& req, http::Response& res, bool can_block) {
    return handle(req, res, can_block);
  };
  for (const char* path : {"/api/", "/metrics", "/status", "/status/sources/"}) {
    router.mount(path, h);
  }
}

http::Disposition StatusApi::handle(const http::Request& req, http::Response& res, bool can_block) {
  const std::string& p = req.path;
  if (p == "/healthz") {
    answer(res, 200, {{"status", "alive"}});
    return http::Disposition::done;
  }
  const size_t k_page_prefix = std::string_view("/status/sources/").size();
  if (p == "/status" ||
      (p.rfind("/status/sources/", 0) == 0 && p.size() > k_page_prefix && p.find('/', k_page_prefix) == std::string::npos)) {
    res.set_body(std::string(status_page_html()), "text/html; charset=utf-8");
    res.set_header("Cache-Control", "no-cache");
    // Never inside another site's frame (its buttons act with the
    // operator's token): clickjacking.
    res.set_header("Content-Security-Policy", "frame-ancestors 'none'");
    res.set_header("X-Frame-Options", "DENY");
    return http::Disposition::done;
  }
  if (!can_block) {
    return http::Disposition::blocking; // everything else reads the database
  }
  try {
    if (p == "/readyz") {
      if (auto why = readiness(m_state)) {
        fail(res, 503, "not_ready", *why);
      } else {
        answer(res, 200, {{"status", "ready"}});
      }
    } else if (p == "/metrics") {
      auto stats = read_stats(m_state);
      if (!stats) {
        fail(res, 503, "store_unavailable", m_state.database.for_client(stats.error()));
      } else {
        res.set_body(render_metrics(m_state, *stats), "text/plain; version=0.0.4; charset=utf-8");
      }
    } else {
      api_route(m_state, req, res);
    }
  } catch (const std::exception& e) {
    fail(res, 500, "internal", e.what());
  }
  return http::Disposition::done;
}

} // namespace tributary::agg

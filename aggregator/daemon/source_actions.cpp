#include "aggregator/daemon/source_actions.h"

#include "aggregator/status/json.h"
#include "common/log.h"

#include <algorithm>

namespace tributary::agg {

using nlohmann::json;
using api::answer;
using api::fail;
using api::iso;

namespace {

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

bool same_secret(const std::string& a, const std::string& b) {
  // Constant time in the length of the presented value.
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

// An operator's words (a name, a reason) as we keep them: control
// characters dropped, at most `max` bytes, cut at a character boundary.
// Characters (code points) of UTF-8 text.
size_t characters(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) {
    n += (c & 0xc0) != 0x80;
  }
  return n;
}

std::string words(const std::string& s, size_t max) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c != 0x7f) {
      out += static_cast<char>(c);
    }
  }
  if (out.size() > max) {
    size_t cut = max;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xc0) == 0x80) {
      --cut;
    }
    out.resize(cut);
  }
  return out;
}

// Answers 503 when the store could not do it: true then (the caller
// returns).
template <typename T> bool unavailable(DaemonState& state, const Result<T>& r, http::Response& res) {
  if (r) {
    return false;
  }
  fail(res, 503, "store_unavailable", state.database.for_client(r.error()));
  return true;
}

// Queues a run of `mode` asked by an operator; false (answered) when the
// source cannot take it.
bool queue(DaemonState& state, const std::string& name, store::RunMode mode, http::Response& res) {
  Scheduler::Request r;
  {
    std::lock_guard lock(state.mutex);
    r = state.scheduler.request(name, mode, store::RunTrigger::operator_);
  }
  if (r == Scheduler::Request::disabled) {
    fail(res, 409, "disabled", "source '" + name + "' is disabled in the configuration");
    return false;
  }
  if (r == Scheduler::Request::paused) {
    fail(res, 409, "paused", "source '" + name + "' is paused: resume it first");
    return false;
  }
  state.wake.notify_all();
  return true;
}

void record(DaemonState& state, const std::string& name, const std::string& action, const std::string& actor,
            const std::string& detail) {
  if (auto r = state.operator_store->record_action(name, action, actor, detail); !r) {
    log::warn(name, "operator action not recorded: " + r.error().message, {{"action", action}});
  }
  log::info(name, "operator action: " + action, {{"by", actor}, {"detail", detail}});
}

// The operator's word on held deletions: each feed of the source that holds
// them applies them at its next baseline, queued now.
void confirm_deletions(DaemonState& state, const std::string& name, const std::string& actor,
                       http::Response& res) {
  Result<std::vector<store::DeletionHold>> holds;
  {
    std::lock_guard lock(state.status_mutex);
    auto stats = state.status_store->source_stats();
    if (unavailable(state, stats, res)) {
      return;
    }
    auto it = std::find_if(stats->begin(), stats->end(), [&](const auto& st) { return st.name == name; });
    if (it == stats->end() || it->deletion_holds.empty()) {
      fail(res, 409, "nothing_held", "source '" + name + "' holds no deletions");
      return;
    }
    holds = state.status_store->confirm_deletions(it->source_id);
    state.stats_read.valid = false; // the next answer shows the confirmation
  }
  if (unavailable(state, holds, res)) {
    return;
  }
  uint64_t unseen = 0;
  json feeds = json::array();
  for (const auto& h : *holds) {
    unseen += h.unseen;
    feeds.push_back(hold_json(h));
  }
  {
    std::lock_guard lock(state.mutex);
    state.scheduler.request(name, store::RunMode::baseline, store::RunTrigger::operator_);
  }
  state.wake.notify_all();
  record(state, name, "confirm-deletions", actor, std::to_string(unseen) + " resources to delete at the next baseline");
  answer(res, 202, {{"source", name}, {"confirmed", feeds}, {"mode", "baseline"}, {"queued", true}});
}

} // namespace

void apply_pauses(DaemonState& state, const std::vector<store::PauseInfo>& pauses) {
  std::map<std::string, store::PauseInfo> next;
  for (const auto& p : pauses) {
    next[p.source] = p;
    state.scheduler.set_paused(p.source, true);
  }
  for (const auto& [name, p] : state.pauses) {
    if (next.count(name) == 0) {
      state.scheduler.set_paused(name, false);
    }
  }
  state.pauses = std::move(next);
}

bool is_source_action(const std::string& action) {
  static const char* const k_actions[] = {"sync",  "audit",  "retry",           "pause",
                                          "resume", "confirm-deletions", "refuse-deletions"};
  return std::find(std::begin(k_actions), std::end(k_actions), action) != std::end(k_actions);
}

bool admin_allowed(DaemonState& state, const http::Request& req, http::Response& res) {
  std::optional<std::string> token;
  {
    std::lock_guard lock(state.mutex);
    token = state.admin_token;
  }
  const std::string auth = req.header_value("authorization");
  if (!token) {
    res.set_header("WWW-Authenticate", "Bearer");
    fail(res, 401, "unauthorized", "no admin token is configured (admin_token_file or admin_token_env)");
    return false;
  }
  const std::string client = req.client.empty() ? req.peer : req.client;
  if (const int64_t wait = state.auth_guard.blocked_for(client); wait > 0) {
    res.set_header("Retry-After", std::to_string(wait));
    fail(res, 429, "too_many_requests", "too many wrong admin tokens from this client: try again later");
    return false;
  }
  if (auth.rfind("Bearer ", 0) != 0 || !same_secret(auth.substr(7), *token)) {
    if (!auth.empty()) {
      const auto [say, count] = state.auth_guard.failed(client);
      if (say) {
        log::warn("", "admin API: wrong admin token from " + (client.empty() ? std::string("a local caller") : client) +
                          " for " + req.method + " " + req.path + " (" + std::to_string(count) +
                          " this minute; 10 and it waits a minute)");
      }
    }
    res.set_header("WWW-Authenticate", "Bearer");
    fail(res, 401, "unauthorized", auth.empty() ? "an admin bearer token is required" : "wrong admin token");
    return false;
  }
  return true;
}

std::string actor_of(const http::Request& req, const std::string& by) {
  std::string name = words(by.empty() ? req.header_value("x-operator") : by, 64);
  const std::string from = req.peer.empty() ? "" : "from " + req.peer;
  if (name.empty()) {
    return from.empty() ? "an operator" : "an operator " + from;
  }
  return from.empty() ? name : name + " " + from;
}

void source_action(DaemonState& state, const std::string& name, const std::string& action,
                   const http::Request& req, http::Response& res) {
  if (req.method != "POST") {
    res.set_header("Allow", "POST");
    fail(res, 405, "method_not_allowed", "use POST");
    return;
  }
  if (!admin_allowed(state, req, res)) {
    return;
  }
  json body = json::object();
  if (!req.body.empty()) {
    body = json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object() || (body.contains("mode") && !body["mode"].is_string()) ||
        (body.contains("by") && !body["by"].is_string()) || (body.contains("reason") && !body["reason"].is_string())) {
      fail(res, 400, "bad_request",
           "expected a JSON object such as {\"mode\": \"incremental\"}, {\"reason\": \"…\"} or {\"by\": \"…\"}");
      return;
    }
    // The documented limits hold: a value past one is refused, not cut.
    for (const auto& [field, max] : {std::pair<const char*, size_t>{"by", 64}, {"reason", 200}}) {
      if (body.contains(field) && characters(body[field].get<std::string>()) > max) {
        fail(res, 400, "too_long",
             std::string(field) + " is longer than " + std::to_string(max) + " characters (docs/openapi.json)");
        return;
      }
    }
  }
  const std::string actor = actor_of(req, body.value("by", ""));
  if (action == "confirm-deletions") {
    confirm_deletions(state, name, actor, res);
    return;
  }
  if (action == "refuse-deletions") {
    auto n = state.operator_store->refuse_deletions(name);
    if (unavailable(state, n, res)) {
      return;
    }
    if (*n == 0) {
      fail(res, 409, "nothing_held", "source '" + name + "' holds no deletions");
      return;
    }
    {
      std::lock_guard lock(state.status_mutex);
      state.stats_read.valid = false;
    }
    record(state, name, "refuse-deletions", actor, "held deletions dropped; nothing deleted");
    answer(res, 200, {{"source", name}, {"refused", *n}});
    return;
  }
  if (action == "pause") {
    const std::string reason = words(body.value("reason", ""), 200);
    if (auto r = state.operator_store->pause(name, actor, reason); unavailable(state, r, res)) {
      return;
    }
    const auto at = std::chrono::time_point_cast<std::chrono::microseconds>(Clock::now());
    {
      std::lock_guard lock(state.mutex);
      state.scheduler.set_paused(name, true);
      state.pauses[name] = store::PauseInfo{name, rs::Timestamp(at.time_since_epoch()), actor, reason};
    }
    log::info(name, "operator action: pause", {{"by", actor}, {"reason", reason}});
    answer(res, 200, {{"source", name}, {"paused", true}, {"by", actor}, {"reason", reason}});
    return;
  }
  if (action == "resume") {
    auto was = state.operator_store->resume(name, actor);
    if (unavailable(state, was, res)) {
      return;
    }
    {
      std::lock_guard lock(state.mutex);
      state.scheduler.set_paused(name, false);
      state.pauses.erase(name);
    }
    state.wake.notify_all();
    log::info(name, "operator action: resume", {{"by", actor}, {"was_paused", *was ? "yes" : "no"}});
    answer(res, 200, {{"source", name}, {"paused", false}, {"was_paused", *was}});
    return;
  }
  if (action == "retry") {
    auto n = state.operator_store->retry_now(name);
    if (unavailable(state, n, res)) {
      return;
    }
    if (!queue(state, name, store::RunMode::incremental, res)) {
      return;
    }
    record(state, name, "retry", actor, std::to_string(*n) + " resources due now");
    answer(res, 202, {{"source", name}, {"due_now", *n}, {"mode", "incremental"}, {"queued", true}});
    return;
  }
  std::string mode_name = action == "audit" ? "audit" : body.value("mode", "incremental");
  auto mode = mode_from(mode_name);
  if (!mode) {
    fail(res, 400, "bad_request", "mode must be \"incremental\", \"baseline\" or \"audit\"");
    return;
  }
  if (!queue(state, name, *mode, res)) {
    return;
  }
  record(state, name, action, actor, "mode " + mode_name);
  answer(res, 202, {{"source", name}, {"mode", mode_name}, {"queued", true}});
}

} // namespace tributary::agg

// The status page's views beyond the status answer: the rolling history
// (sparklines) and one source's detail (feeds, runs, errors by kind,
// retrying resources, subscription).
#include "aggregator/status/json.h"

#include "resourcesync/websub.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>

namespace tributary::agg {

using nlohmann::json;
using api::answer;
using api::fail;
using api::iso;

namespace {

bool has(std::string_view s, std::string_view needle) {
  auto it = std::search(s.begin(), s.end(), needle.begin(), needle.end(),
                        [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
  return it != s.end();
}

constexpr size_t k_error_window = 1000; // the newest errors grouped
constexpr size_t k_examples = 3;
constexpr size_t k_retry_rows = 100;

} // namespace

std::string error_kind(std::string_view reason) {
  if (reason.rfind("entry rejected", 0) == 0) {
    return "rejected entry";
  }
  static const std::regex k_status(R"((?:^|: )HTTP ([1-5][0-9][0-9]))");
  std::match_results<std::string_view::const_iterator> m;
  if (std::regex_search(reason.begin(), reason.end(), m, k_status)) {
    return "HTTP " + m[1].str();
  }
  if (has(reason, "hash mismatch") || has(reason, "hash differs")) {
    return "hash mismatch";
  }
  if (has(reason, "too slow") || has(reason, "timeout") || has(reason, "timed out")) {
    return "timeout";
  }
  if (has(reason, "larger than") || (has(reason, "more than") && has(reason, "limit"))) {
    return "too large";
  }
  if (has(reason, "tls ")) {
    return "TLS";
  }
  if (has(reason, "connection refused") || has(reason, "unreachable") || has(reason, "resolve") ||
      has(reason, "connect")) {
    return "connection";
  }
  if (has(reason, "refused:")) {
    return "refused";
  }
  if (has(reason, "being synced by another run")) {
    return "busy";
  }
  for (const char* word : {"invalid", "not well-formed", "zip file", "manifest", "not a ", "not an ", "malformed"}) {
    if (has(reason, word)) {
      return "invalid document";
    }
  }
  return "other";
}

json stale_listing(const std::string& change, const std::string& kind) {
  if (change.empty() ||
      (kind != "hash mismatch" && kind != "too large" && kind != "HTTP 404" && kind != "HTTP 410")) {
    return nullptr;
  }
  // A change whose bytes or resource the upstream no longer serves: it
  // lists a state that no longer exists (replaced or deleted since, or its
  // own log is wrong). Nothing we can fetch mends it.
  return std::string("the upstream lists a state of this resource that it no longer serves (") +
         (kind == "hash mismatch" ? "other bytes than it lists"
          : kind == "too large"   ? "more bytes than it lists, unless our size limit is the cause"
                                  : "it is gone") +
         "): the retry ends when the upstream lists a later change of it, or at an audit with repair; if the "
         "upstream is a Tributary, `tributary check-history --repair` there logs what it holds";
}

void history_route(DaemonState& state, const http::Request& req, http::Response& res) {
  auto q = rs::websub::parse_form(req.query);
  if (!q) {
    fail(res, 400, "bad_request", "malformed query");
    return;
  }
  auto number = [&](const char* name, long fallback, long lo, long hi) -> std::optional<long> {
    auto it = q->find(name);
    if (it == q->end()) {
      return fallback;
    }
    char* end = nullptr;
    const long v = std::strtol(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end != '\0' || v < lo || v > hi) {
      return std::nullopt;
    }
    return v;
  };
  const auto bucket = store::PgStatusStore::k_bucket.count();
  const auto hours = number("hours", 24, 1, 168);
  const auto step = number("step", bucket, bucket, 86400);
  if (!hours || !step || *step % bucket != 0) {
    fail(res, 400, "bad_request",
         "hours must be 1 to 168, step a multiple of " + std::to_string(bucket) + " seconds up to 86400");
    return;
  }
  const std::string only = q->count("source") ? q->at("source") : std::string();
  std::vector<std::string> names;
  {
    std::lock_guard lock(state.mutex);
    for (const auto& v : state.scheduler.view()) {
      if (only.empty() || v.name == only) {
        names.push_back(v.name);
      }
    }
  }
  if (!only.empty() && names.empty()) {
    fail(res, 404, "unknown_source", "no source named '" + only + "' in the configuration");
    return;
  }
  // Buckets of `step` seconds, the last one holding now.
  const int64_t step_us = *step * 1000000LL;
  const int64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count();
  const size_t n = static_cast<size_t>(*hours * 3600 / *step);
  const int64_t from_us = (now_us / step_us - static_cast<int64_t>(n) + 1) * step_us;
  const rs::Timestamp from{std::chrono::microseconds(from_us)};
  Result<std::vector<store::SourceHistory>> read = make_error(ErrorKind::permanent, "no status store");
  if (state.history_store) {
    read = state.history_store->history(from, only);
  }
  if (!read) {
    fail(res, 503, "store_unavailable", state.database.for_client(read.error()));
    return;
  }
  std::map<std::string, const store::SourceHistory*> by_name;
  for (const auto& h : *read) {
    by_name[h.source] = &h;
  }
  json sources = json::array();
  for (const auto& name : names) {
    json lag = json::array();
    json changes = json::array();
    json baseline = json::array();
    std::vector<std::optional<double>> lags(n);
    std::vector<uint64_t> counts(n, 0), stored(n, 0);
    if (auto it = by_name.find(name); it != by_name.end()) {
      for (const auto& p : it->second->points) {
        const int64_t at = p.bucket.time_since_epoch().count();
        if (at < from_us) {
          continue;
        }
        const size_t i = static_cast<size_t>((at - from_us) / step_us);
        if (i >= n) {
          continue;
        }
        counts[i] += p.changes;
        stored[i] += p.baseline;
        if (p.lag_seconds) {
          lags[i] = std::max(lags[i].value_or(0.0), *p.lag_seconds); // the worst in the step
        }
      }
    }
    for (size_t i = 0; i < n; ++i) {
      lag.push_back(lags[i] ? json(std::round(*lags[i])) : json(nullptr));
      changes.push_back(counts[i]);
      baseline.push_back(stored[i]);
    }
    sources.push_back({{"name", name}, {"lag_seconds", lag}, {"changes", changes}, {"baseline", baseline}});
  }
  answer(res, 200,
         {{"from", iso(from)},
          {"step_seconds", *step},
          {"points", n},
          {"sources", sources}},
         -1);
}

void detail_route(DaemonState& state, const std::string& name, http::Response& res) {
  auto sources = sources_json(state, name);
  if (!sources) {
    fail(res, 503, "store_unavailable", state.database.for_client(sources.error()));
    return;
  }
  if (!state.history_store) {
    fail(res, 503, "store_unavailable", "no status store");
    return;
  }
  auto feeds = state.history_store->feeds(name);
  auto errors = state.history_store->recent_errors(name, k_error_window);
  auto retrying = state.history_store->retrying(name, k_retry_rows);
  Result<std::vector<store::RunInfo>> runs = make_error(ErrorKind::permanent, "unread");
  {
    std::lock_guard lock(state.status_mutex);
    // Enough that a failed run is not pushed off by a morning of runs that
    // changed nothing (the page folds those into one line each).
    runs = state.status_store->recent_runs(name, 100);
  }
  for (const Error* e : {feeds ? nullptr : &feeds.error(), errors ? nullptr : &errors.error(),
                         retrying ? nullptr : &retrying.error(), runs ? nullptr : &runs.error()}) {
    if (e) {
      fail(res, 503, "store_unavailable", state.database.for_client(*e));
      return;
    }
  }
  auto opt_time = [](const std::optional<rs::Timestamp>& t) { return t ? json(iso(*t)) : json(nullptr); };
  json feed_list = json::array();
  for (const auto& f : *feeds) {
    feed_list.push_back({{"capability_list", f.capability_list_url},
                         {"resources", {{"live", f.live}, {"deleted", f.deleted}, {"retrying", f.retrying}}},
                         {"bytes", f.bytes},
                         {"baseline_at", opt_time(f.baseline_at)},
                         {"change_list", f.change_list_url.empty() ? json(nullptr) : json(f.change_list_url)},
                         {"watermark",
                          {{"datetime", opt_time(f.last_time)},
                           {"uri", f.last_uri.empty() ? json(nullptr) : json(f.last_uri)},
                           {"position", f.last_position ? json(*f.last_position) : json(nullptr)},
                           {"updated_at", opt_time(f.updated_at)}}}});
  }
  json run_list = json::array();
  for (const auto& r : *runs) {
    run_list.push_back(run_json(r));
  }
  // Errors grouped by kind, the largest group first, each with a few URLs.
  struct Group {
    uint64_t count = 0;
    rs::Timestamp last_at{};
    std::vector<std::string> urls;
    std::string reason;
  };
  std::map<std::string, Group> groups;
  for (const auto& e : *errors) { // newest first
    Group& g = groups[error_kind(e.reason)];
    if (g.count++ == 0) {
      g.last_at = e.at;
      g.reason = e.reason;
    }
    if (g.urls.size() < k_examples && std::find(g.urls.begin(), g.urls.end(), e.url) == g.urls.end()) {
      g.urls.push_back(e.url);
    }
  }
  std::vector<std::pair<std::string, Group>> ordered(groups.begin(), groups.end());
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return a.second.count > b.second.count; });
  json kinds = json::array();
  for (const auto& [kind, g] : ordered) {
    kinds.push_back({{"kind", kind},
                     {"count", g.count},
                     {"last_at", iso(g.last_at)},
                     {"example_urls", g.urls},
                     {"example_reason", g.reason}});
  }
  json retry_list = json::array();
  for (const auto& r : retrying->second) {
    const std::string kind = error_kind(r.reason);
    retry_list.push_back({{"uri", r.uri},
                          {"capability_list", r.capability_list_url},
                          {"change", r.change.empty() ? json(nullptr) : json(r.change)},
                          {"reason", r.reason},
                          {"kind", kind},
                          {"why", stale_listing(r.change, kind)},
                          {"attempts", r.attempts},
                          {"first_failed_at", iso(r.first_failed_at)},
                          {"next_attempt_at", iso(r.next_attempt_at)}});
  }
  json subscription = nullptr;
  {
    std::lock_guard lock(state.status_mutex);
    if (read_push(state)) {
      for (const auto& s : state.push_ours) {
        if (s.source == name) {
          subscription = subscription_json(s);
        }
      }
    }
  }
  // The operators' actions on it, newest first (a read that fails leaves
  // the list empty: the rest of the page still answers).
  json action_list = json::array();
  if (auto acts = state.operator_store ? state.operator_store->actions(name, 20)
                                         : Result<std::vector<store::OperatorAction>>(tl::unexpected(Error{}))) {
    for (const auto& a : *acts) {
      action_list.push_back(
          {{"action", a.action}, {"by", a.actor}, {"at", iso(a.at)}, {"detail", a.detail}});
    }
  }
  answer(res, 200,
         {{"source", sources->at(0)},
          {"feeds", feed_list},
          {"runs", run_list},
          {"errors", {{"window", errors->size()}, {"kinds", kinds}}},
          {"retrying", {{"total", retrying->first}, {"resources", retry_list}}},
          {"subscription", subscription},
          {"actions", action_list}});
}

void runs_route(DaemonState& state, const std::string& name, const http::Request& req, http::Response& res) {
  auto q = rs::websub::parse_form(req.query);
  if (!q) {
    fail(res, 400, "bad_request", "malformed query");
    return;
  }
  auto get = [&](const char* k) { return q->count(k) ? q->at(k) : std::string(); };
  auto whole = [](const std::string& v, long long lo, long long hi) -> std::optional<long long> {
    if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos) {
      return std::nullopt;
    }
    const long long n = std::stoll(v);
    return n < lo || n > hi ? std::nullopt : std::optional<long long>(n);
  };
  const auto limit = get("limit").empty() ? std::optional<long long>(50) : whole(get("limit"), 1, 500);
  const auto before = get("before").empty() ? std::optional<long long>(0) : whole(get("before"), 1, INT64_MAX);
  const std::string status = get("status"), trigger = get("trigger");
  const bool status_ok = status.empty() || status == "running" || status == "succeeded" || status == "partial" ||
                         status == "failed" || status == "interrupted";
  if (!limit || !before || !status_ok || (!trigger.empty() && !store::parse_trigger(trigger))) {
    fail(res, 400, "bad_request",
         "limit 1 to 500, before a run id, status running|succeeded|partial|failed, "
         "trigger schedule|push|operator|startup|cli");
    return;
  }
  std::lock_guard lock(state.status_mutex);
  auto runs = state.status_store->runs_page(name, *before, static_cast<size_t>(*limit), status, trigger);
  if (!runs) {
    fail(res, 503, "store_unavailable", state.database.for_client(runs.error()));
    return;
  }
  json list = json::array();
  for (const auto& r : *runs) {
    list.push_back(run_json(r));
  }
  const bool more = runs->size() == static_cast<size_t>(*limit);
  answer(res, 200, {{"source", name}, {"runs", list}, {"next_before", more ? json(runs->back().id) : json(nullptr)}});
}

std::vector<store::HistorySample> history_samples(DaemonState& state) {
  std::vector<store::HistorySample> out;
  auto sources = sources_json(state, "");
  if (!sources) {
    return out;
  }
  for (const auto& s : *sources) {
    store::HistorySample h;
    h.source = s["name"].get<std::string>();
    if (s["lag"]["seconds"].is_number()) {
      h.lag_seconds = s["lag"]["seconds"].get<double>();
    }
    h.failing = s["state"] == "failing";
    out.push_back(std::move(h));
  }
  return out;
}

} // namespace tributary::agg

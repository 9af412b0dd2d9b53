#pragma once

// The status API's JSON, shared by its files: status_api.cpp (status,
// sources, runs, push, hosts) and status_views.cpp (history, a source's
// detail, the history sampler).

#include "aggregator/daemon/daemon_state.h"
#include "common/http/server.h"
#include "store/pg/pg_status_store.h"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tributary::agg {

namespace api {

std::string iso(Time t);
std::string iso(rs::Timestamp t);
// Every answer of the API has one shape: {"ok": true, "data": …} or
// {"ok": false, "error": {"code": …, "message": …}}.
// `indent` -1: compact (the history's long arrays).
void answer(http::Response& res, int status, const nlohmann::json& data, int indent = 2);
void fail(http::Response& res, int status, const std::string& code, const std::string& message);

} // namespace api

// One object per configured source (or just `only`): the scheduler's view,
// the running job's progress, and the store's counts and runs.
Result<nlohmann::json> sources_json(DaemonState& state, const std::string& only);
nlohmann::json run_json(const store::RunInfo& r);
// A feed's held deletions (the mass-deletion guard).
nlohmann::json hold_json(const store::DeletionHold& h);
// Our subscription at an upstream hub, without its token or secret.
nlohmann::json subscription_json(const store::PushSubscription& s);
// Subscriptions both ways, without tokens or secrets (the status API may be
// public: a token is what a notification proves itself with). Of our hub's
// subscribers, the `limit` most in need of a look (failing first, then the
// oldest delivery), with the totals: a flood of subscriptions must not make
// every status answer as long as the flood.
nlohmann::json push_json(DaemonState& state, size_t limit);
constexpr size_t k_subscribers_shown = 100;
// A cached read of the store is fresh for a second.
bool fresh(const DaemonState::Cached& c);

// A source's state, one vocabulary for the page, the API and /metrics:
// "in_sync", "lagging", "attention" (needs a human: deletions held, its
// clock ahead), "failing", "paused" or "disabled", and why when not in sync. `st` may be null (no run yet); `unapplied`: changes left in its
// running job.
inline constexpr const char* k_sync_states[] = {"in_sync", "lagging", "attention", "failing", "paused", "disabled"};
std::pair<std::string, std::string> sync_state_of(const Scheduler::View& v, const sync::SourceConfig& cfg,
                                                  const store::SourceStats* st, uint64_t unapplied, Time now);

// How far behind the source is, in seconds: since the start of its last
// successful run (at its end we held everything the Source offered when it
// began; changes since are what we may not have), or, before any, since it
// was configured (`configured`). A quiet source polled a minute ago lags
// about a minute; one that fails lags more at every run. None for a paused
// or disabled source (not behind: stopped on purpose), so no alert on lag
// fires for it. The one rule for the page, the API, the history and
// /metrics.
std::optional<double> lag_of(const Scheduler::View& v, const store::SourceStats* st, Time configured, Time now);
// How long the oldest resource waiting for a retry has failed, in seconds:
// one rule for the state, the API and /metrics. None when none waits.
std::optional<double> retry_age_of(const store::SourceStats* st, Time now);
// When a source was configured: its first run's record, or this process's
// first sight of it.
Time configured_at(const DaemonState& state, const std::string& name, const store::SourceStats* st);

// The kind of a run's error, from its reason, for grouping: "HTTP 404",
// "hash mismatch", "timeout", "TLS", "connection", "too large", "refused",
// "rejected entry", "invalid document", "busy" or "other".
std::string error_kind(std::string_view reason);
// For a retry of a `change` that failed as `kind`: why it cannot succeed
// until the upstream moves (it lists a state it no longer serves), or null.
nlohmann::json stale_listing(const std::string& change, const std::string& kind);

// GET /api/v1/history[?hours=H&step=S&source=NAME]: each source's lag and
// changes in buckets of S seconds over the last H hours.
void history_route(DaemonState& state, const http::Request& req, http::Response& res);
// GET /api/v1/sources/{name}/runs[?limit=50&before=ID&status=S&trigger=T]:
// a page of its runs, newest first, with `next_before` for the next page.
void runs_route(DaemonState& state, const std::string& name, const http::Request& req, http::Response& res);
// GET /api/v1/sources/{name}/detail: the source, its feeds and watermarks,
// recent runs, errors grouped by kind, retrying resources and subscription.
void detail_route(DaemonState& state, const std::string& name, http::Response& res);
// Every source's lag and state now, for the history sampler.
std::vector<store::HistorySample> history_samples(DaemonState& state);

} // namespace tributary::agg

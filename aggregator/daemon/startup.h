#pragma once

#include "aggregator/daemon/daemon_state.h"
#include "aggregator/push/subscriber.h"
#include "aggregator/status/api.h"
#include "common/http/router.h"
#include "common/http/server.h"

#include <chrono>
#include <csignal>
#include <functional>
#include <future>
#include <iosfwd>
#include <memory>
#include <string>

// The steps of starting and stopping `tributary run` that need only the
// daemon's state, in the order daemon.cpp takes them.
namespace tributary::agg {

// How long a stopping daemon waits for its runs to reach a safe point.
inline constexpr std::chrono::seconds k_stop_grace{3};

// SIGINT, SIGTERM and SIGHUP blocked in every thread (taken by sigwait in
// wait_for_stop, never by a worker); the set of them.
sigset_t block_signals();

// Our subscriptions to upstream hubs, on stores of their own; null (said on
// `err`) when those cannot be opened.
std::unique_ptr<PushSubscriber> make_subscriber(DaemonState& d, std::shared_ptr<sync::Fetcher> fetcher,
                                                std::ostream& err);

// With operator_listen: the probes mounted on `router`, the operator's
// surfaces on `operator_router`, served by a server of their own; null
// (said on `err`) when it cannot listen.
std::unique_ptr<http::Server> start_operator_server(DaemonState& d, StatusApi& status_api, http::Router& router,
                                                    http::Router& operator_router, std::ostream& err);

// Until SIGINT or SIGTERM; SIGHUP calls `reload`.
void wait_for_stop(sigset_t& signals, const std::string& config_path, const std::function<void()>& reload);

// Every run asked to stop at its next safe point; past the grace period
// (k_stop_grace) the process exits at once.
void stop_runs(DaemonState& d, std::future<void>& dispatcher_done);

} // namespace tributary::agg

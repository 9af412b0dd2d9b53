// The steps of starting and stopping `tributary run` that need only the
// daemon's state (daemon.cpp takes them in order).
#include "aggregator/daemon/startup.h"

#include "aggregator/setup/publishing.h"
#include "common/log.h"

#include <csignal>
#include <iostream>
#include <set>

namespace tributary::agg {

// Signals are taken by one thread with sigwait, never by a worker.
sigset_t block_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// Our subscriptions to upstream hubs; null (said on `err`) when its stores
// cannot be opened.
std::unique_ptr<PushSubscriber> make_subscriber(DaemonState& d, std::shared_ptr<sync::Fetcher> fetcher,
                                                std::ostream& err) {
  DaemonState* dp = &d;
  auto subs = store::PgAuxStore::open(d.config.database);
  auto marks = subs ? store::PgStore::open(d.config.database) : Result<std::unique_ptr<store::PgStore>>();
  if (!subs || !marks) {
    err << "tributary run: " << (!subs ? subs.error().message : marks.error().message) << '\n';
    return nullptr;
  }
  PushOptions po;
  po.subscribe = d.config.push.subscribe;
  po.sign = d.config.push.sign;
  po.lease = d.config.push.lease;
  po.public_url = d.config.public_url;
  PushSubscriber::Hooks hooks;
  hooks.source = [dp](const std::string& name) -> std::optional<sync::SourceConfig> {
    std::lock_guard lock(dp->mutex);
    const sync::SourceConfig* c = dp->config.find_source(name);
    return c ? std::optional<sync::SourceConfig>(*c) : std::nullopt;
  };
  hooks.notified = [dp](const std::string& name) {
    {
      std::lock_guard lock(dp->mutex);
      dp->scheduler.request(name, store::RunMode::incremental, store::RunTrigger::push);
    }
    dp->wake.notify_all();
  };
  hooks.active = [dp](const std::string& name, bool active) {
    std::lock_guard lock(dp->mutex);
    dp->scheduler.stretch(name, active ? dp->config.push.poll_interval : std::chrono::seconds(0));
  };
  std::shared_ptr<store::PgStore> applied(std::move(*marks));
  auto subscriber = std::make_unique<PushSubscriber>(std::shared_ptr<store::PgAuxStore>(std::move(*subs)), applied,
                                                     applied, std::move(fetcher), std::move(po), std::move(hooks));
  std::set<std::string> names;
  for (const auto& src : d.config.sources) {
    names.insert(src.name);
  }
  subscriber->configured(names);
  return subscriber;
}

// With operator_listen, the operator's surfaces on a server of their own
// (the probes stay on `listen`); null and `failed` when it cannot listen.
std::unique_ptr<http::Server> start_operator_server(DaemonState& d, StatusApi& status_api, http::Router& router,
                                                    http::Router& operator_router, std::ostream& err) {
  status_api.mount_probes(router);
  status_api.mount_operator(operator_router);
  http::ServerOptions ops = server_options(d.config);
  const auto colon = d.config.operator_listen.rfind(':');
  ops.host = d.config.operator_listen.substr(0, colon);
  ops.port = std::stoi(d.config.operator_listen.substr(colon + 1));
  auto server = std::make_unique<http::Server>(
      ops, [&operator_router](const http::Request& req, http::Response& res, bool can_block) {
        return operator_router(req, res, can_block);
      });
  if (auto r = server->start(); !r) {
    err << "tributary run: operator_listen: " << r.error().message << '\n';
    return nullptr;
  }
  log::info("", "the operator's surfaces (/api, /status, /metrics) listen apart",
            {{"operator_listen", ops.host + ":" + std::to_string(server->port())}});
  return server;
}

// Until SIGINT or SIGTERM; SIGHUP reloads the config.
void wait_for_stop(sigset_t& signals, const std::string& config_path, const std::function<void()>& reload) {
  for (;;) {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig == SIGHUP) {
      log::info("", "SIGHUP: reloading " + config_path);
      reload();
      continue;
    }
    log::info("", std::string("stopping (") + (sig == SIGTERM ? "SIGTERM" : "SIGINT") +
                      "): runs stop at their next batch");
    return;
  }
}

// Every run asked to stop at its next safe point; past the grace period the
// process exits at once.
void stop_runs(DaemonState& d, std::future<void>& dispatcher_done) {
  {
    std::lock_guard lock(d.mutex);
    d.stopping = true;
    for (auto& [name, r] : d.running) {
      if (r.cancel) {
        r.cancel->store(true); // every run stops at its next safe point
      }
    }
  }
  d.wake.notify_all();
  // Every wait of a run ends at the stop flag; a request in flight to a
  // hung upstream does not (its read timeout is a minute). Past the grace
  // period the process exits anyway: what is committed is durable, and a
  // batch not committed is fetched again by the next run (as after a
  // crash, which the crash matrix covers). systemd's stop timeout is 90 s.
  if (dispatcher_done.wait_for(k_stop_grace) == std::future_status::timeout) {
    size_t busy = 0;
    {
      std::lock_guard lock(d.mutex);
      busy = d.running.size();
    }
    log::warn("", "stopping: " + std::to_string(busy) + " run(s) still waiting on the network after " +
                      std::to_string(k_stop_grace.count()) +
                      " s; exiting now (their uncommitted batches are redone by the next run)");
    std::cout.flush();
    std::cerr.flush();
    std::_Exit(0);
  }
}

} // namespace tributary::agg

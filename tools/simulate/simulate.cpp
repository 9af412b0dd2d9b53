// Room tools/simulate/simulate: the simulator's wiring. It owns the
// simulated Source (simulated_source.h), its hub (simulated_hub.h, with the
// `hub` option), the HTTP server that answers for both, and the ticker that
// makes changes at the configured rate; and `tributary simulate`.
#include "tools/simulate/simulate.h"

#include "tools/simulate/simulated_hub.h"
#include "tools/simulate/simulated_source.h"

#include "resourcesync/websub.h"

#include <csignal>
#include <pthread.h>

#include <condition_variable>
#include <mutex>
#include <ostream>
#include <thread>

namespace tributary::agg {

struct Simulator::Impl {
  SimulateOptions options;
  SimulatedSource source{options};
  std::unique_ptr<SimulatedHub> hub; // with options.hub
  std::unique_ptr<http::Server> server;
  std::thread ticker;
  std::mutex stop_mutex;
  std::condition_variable stop_cv;
  bool stopping = false;

  explicit Impl(SimulateOptions o) : options(std::move(o)) {}

  http::Disposition handle(const http::Request& req, http::Response& res, bool can_block);
  // Makes changes at options.change_rate until stopped.
  void tick();
  // Applies `n` changes now; the hub pushes them.
  void change(uint64_t n);
};

auto Simulator::Impl::handle(const http::Request& req, http::Response& res, bool can_block) -> http::Disposition {
  if (hub && req.path == "/hub" && req.method == "POST") {
    hub->request(req, res);
    return http::Disposition::done;
  }
  if (hub && req.path == "/notification/changelist" && (req.method == "GET" || req.method == "HEAD")) {
    res.set_header("Link", rs::websub::link_header(source.url("/hub"), source.topic()));
    res.set_body("WebSub topic of this Source's Change Notification channel\n", "text/plain");
    return http::Disposition::done;
  }
  if (req.method != "GET" && req.method != "HEAD") {
    res.status = 405;
    res.set_header("Allow", "GET, HEAD");
    return http::Disposition::done;
  }
  return source.serve(req.path, res, can_block);
}

void Simulator::Impl::change(uint64_t n) {
  source.change(n);
  if (hub) {
    hub->wake();
  }
}

auto Simulator::Impl::tick() -> void {
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t applied = 0;
  std::unique_lock lock(stop_mutex);
  while (!stop_cv.wait_for(lock, std::chrono::milliseconds(20), [this] { return stopping; })) {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto due = static_cast<uint64_t>(secs * options.change_rate);
    if (options.max_changes > 0) {
      due = std::min(due, options.max_changes);
    }
    if (due > applied) {
      change(due - applied);
      applied = due;
    }
  }
}


Simulator::Simulator(SimulateOptions options) : m_impl(std::make_unique<Impl>(std::move(options))) {}

Simulator::~Simulator() { stop(); }

Result<void> Simulator::start() {
  Impl& m = *m_impl;
  m.options.part_size = std::max<size_t>(1, std::min<size_t>(m.options.part_size, 50000));
  http::ServerOptions so;
  so.host = m.options.host;
  so.port = m.options.port;
  so.workers = 4;
  m.server = std::make_unique<http::Server>(so, [&m](const http::Request& req, http::Response& res, bool can_block) {
    return m.handle(req, res, can_block);
  });
  if (auto r = m.server->start(); !r) {
    return r;
  }
  std::string base = m.options.public_url.empty()
                         ? "http://" + m.options.host + ":" + std::to_string(m.server->port())
                         : m.options.public_url;
  while (!base.empty() && base.back() == '/') {
    base.pop_back();
  }
  m.source.start(std::move(base));
  m.ticker = std::thread([&m] { m.tick(); });
  if (m.options.hub) {
    m.hub = std::make_unique<SimulatedHub>(m.source);
    m.hub->start();
  }
  return {};
}

int Simulator::port() const { return m_impl->server ? m_impl->server->port() : 0; }

std::string Simulator::base_url() const { return m_impl->source.url(""); }

void Simulator::change(uint64_t n) { m_impl->change(n); }

uint64_t Simulator::changes() const { return m_impl->source.changes(); }

uint64_t Simulator::live() const { return m_impl->source.live(); }

void Simulator::stop() {
  Impl& m = *m_impl;
  {
    std::lock_guard lock(m.stop_mutex);
    if (m.stopping) {
      return;
    }
    m.stopping = true;
  }
  m.stop_cv.notify_all();
  if (m.ticker.joinable()) {
    m.ticker.join();
  }
  if (m.hub) {
    m.hub->stop();
  }
  if (m.server) {
    m.server->stop();
  }
}

int run_simulate(const SimulateOptions& options, std::ostream& out, std::ostream& err) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  Simulator sim(options);
  if (auto r = sim.start(); !r) {
    err << "tributary simulate: " << r.error().message << '\n';
    return 1;
  }
  out << "simulating " << options.resources << " resources, " << options.change_rate
      << " changes/s (seed " << options.seed << "): " << sim.base_url() << "/.well-known/resourcesync"
      << (options.hub ? ", notifications through " + sim.base_url() + "/hub" : std::string()) << std::endl;
  int sig = 0;
  sigwait(&signals, &sig);
  out << "stopping after " << sim.changes() << " changes (" << sim.live() << " resources live)" << std::endl;
  sim.stop();
  return 0;
}

} // namespace tributary::agg

#include "tools/simulate/simulator_impl.h"

namespace tributary::agg {

using namespace simulate_detail;

auto Simulator::Impl::handle(const http::Request& req, http::Response& res, bool can_block) -> http::Disposition {
  if (options.hub && req.path == "/hub" && req.method == "POST") {
    hub_request(req, res);
    return http::Disposition::done;
  }
  if (options.hub && req.path == "/notification/changelist" && (req.method == "GET" || req.method == "HEAD")) {
    res.set_header("Link", rs::websub::link_header(url("/hub"), topic()));
    res.set_body("WebSub topic of this Source's Change Notification channel\n", "text/plain");
    return http::Disposition::done;
  }
  if (req.method != "GET" && req.method != "HEAD") {
    res.status = 405;
    res.set_header("Allow", "GET, HEAD");
    return http::Disposition::done;
  }
  std::string path = req.path;
  const bool mirror = path.rfind("/mirror/res/", 0) == 0;
  if (mirror) {
    path = path.substr(7);
  }
  if (path.rfind("/res/", 0) == 0) {
    uint64_t id = 0;
    try {
      size_t used = 0;
      id = std::stoull(path.substr(5), &used);
      if (used != path.size() - 5) {
        throw std::invalid_argument(path);
      }
    } catch (const std::exception&) {
      res.status = 404;
      return http::Disposition::done;
    }
    std::lock_guard lock(mutex);
    if (id >= resources.size()) {
      res.status = 404;
      return http::Disposition::done;
    }
    const Resource& r = resources[id];
    if (!r.live) {
      res.status = 410;
      return http::Disposition::done;
    }
    res.set_header("ETag", "\"" + r.md5 + "\"");
    res.set_body(content(id, r.version), "text/plain");
    res.ranges = true;
    return http::Disposition::done;
  }
  if (path == "/about") {
    res.set_body("A ResourceSync Source simulated by tributary simulate (seed " + std::to_string(options.seed) +
                     ").\n",
                 "text/plain");
    return http::Disposition::done;
  }
  if (!can_block) {
    return http::Disposition::blocking; // rendering a large list takes a while
  }
  auto doc = document(path);
  if (!doc) {
    res.status = 404;
    return http::Disposition::done;
  }
  const bool zip = path.size() > 4 && path.compare(path.size() - 4, 4, ".zip") == 0;
  res.set_shared(doc, zip ? "application/zip" : "application/xml");
  return http::Disposition::done;
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
      {
        std::lock_guard state(mutex);
        for (; applied < due; ++applied) {
          change_one();
        }
      }
      pushed.notify_all();
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
  m.base = m.options.public_url.empty() ? "http://" + m.options.host + ":" + std::to_string(m.server->port())
                                        : m.options.public_url;
  while (!m.base.empty() && m.base.back() == '/') {
    m.base.pop_back();
  }
  {
    std::lock_guard lock(m.mutex);
    m.started = m.last_time = now_us();
    m.resources.resize(m.options.resources);
    m.live_pos.assign(m.options.resources, k_none);
    for (uint64_t id = 0; id < m.options.resources; ++id) {
      m.write_version(id, m.started);
      m.set_live(id, true);
    }
    m.render_resource_list();
  }
  m.ticker = std::thread([&m] { m.tick(); });
  if (m.options.hub) {
    m.client = sync::make_default_fetcher();
    m.pusher = std::thread([&m] { m.push_loop(); });
  }
  return {};
}

int Simulator::port() const { return m_impl->server ? m_impl->server->port() : 0; }

std::string Simulator::base_url() const { return m_impl->base; }

void Simulator::change(uint64_t n) {
  {
    std::lock_guard lock(m_impl->mutex);
    for (uint64_t i = 0; i < n; ++i) {
      m_impl->change_one();
    }
  }
  m_impl->pushed.notify_all();
}

uint64_t Simulator::changes() const {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->log.size();
}

uint64_t Simulator::live() const {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->live_ids.size();
}

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
  {
    std::lock_guard lock(m.mutex);
    m.push_stop = true;
  }
  m.pushed.notify_all();
  if (m.ticker.joinable()) {
    m.ticker.join();
  }
  if (m.pusher.joinable()) {
    m.pusher.join();
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

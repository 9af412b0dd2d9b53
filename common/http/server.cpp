#include "common/http/server.h"

#include "common/http/response_out.h"
#include "common/http/text.h"
#include "common/log.h"
#include "common/thread_name.h"

#include <arpa/inet.h>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace tributary::http {

using detail::lists_token;
using detail::make_outgoing;
using detail::note_slow;
using detail::Outgoing;
using detail::send_some;
using detail::Sent;

namespace {

using Clock = std::chrono::steady_clock;

struct Connection {
  int fd = -1;
  uint64_t id = 0;
  std::string in;
  size_t in_pos = 0;            // parsed up to here
  bool waiting = false;         // a request is with a worker
  bool closing = false;         // no more requests: close once written
  bool peer_done = false;       // the peer half-closed: answer what came, then close
  std::string peer;             // its address, for the per-client cap
  bool reading = true;          // EPOLLIN registered
  bool writing = false;         // EPOLLOUT registered
  std::deque<Outgoing> out;
  Clock::time_point last_activity;
  Clock::time_point request_started; // when the first byte of a pending request came
  bool request_pending = false;
  Clock::time_point parsed_at;       // when the request being answered was read
};

struct Completion {
  int fd;
  uint64_t id;
  Request req;
  Response res;
};

} // namespace

namespace {

struct Loop {
  int epfd = -1;
  int wakefd = -1;
  std::thread thread;
  std::unordered_map<int, std::unique_ptr<Connection>> conns;
  std::mutex completions_mutex;
  std::vector<Completion> completions;
  std::time_t date_second = 0;
  std::string date;
  Clock::time_point accept_paused_until{}; // out of file descriptors: not listening until then
};

} // namespace

struct Server::Impl {
  ServerOptions options;
  Handler handler;
  int listen_fd = -1;
  int bound_port = 0;
  std::vector<std::unique_ptr<Loop>> loops;
  std::vector<std::thread> workers;
  std::atomic<bool> stopping{false};
  std::atomic<size_t> connections{0};
  std::atomic<uint64_t> next_id{1};
  std::atomic<bool> accept_warned{false};
  std::mutex peers_mutex;
  std::unordered_map<std::string, size_t> peers; // open connections per client address
  bool started = false;

  std::mutex jobs_mutex;
  std::condition_variable jobs_cv;
  struct Job {
    Loop* loop;
    int fd;
    uint64_t id;
    Request req;
  };
  std::deque<Job> jobs;
  bool workers_stop = false;

  Impl(ServerOptions o, Handler h) : options(std::move(o)), handler(std::move(h)) {}

  // ---- the event loop -------------------------------------------------

  void run_loop(Loop& loop) {
    epoll_event events[256];
    auto last_sweep = Clock::now();
    Clock::time_point stop_deadline{};
    bool listening = true;
    for (;;) {
      const int n = epoll_wait(loop.epfd, events, 256, 500);
      if (n < 0 && errno != EINTR) {
        break;
      }
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == listen_fd) {
          if (listening) {
            accept_one(loop);
          }
          continue;
        }
        if (fd == loop.wakefd) {
          uint64_t v;
          [[maybe_unused]] auto r = ::read(loop.wakefd, &v, sizeof v);
          drain_completions(loop);
          continue;
        }
        auto it = loop.conns.find(fd);
        if (it == loop.conns.end()) {
          continue;
        }
        Connection& c = *it->second;
        const uint32_t ev = events[i].events;
        if (ev & (EPOLLERR)) {
          close_conn(loop, c);
          continue;
        }
        if (ev & EPOLLOUT) {
          if (!write_out(loop, c)) {
            continue; // closed
          }
          if (!(ev & (EPOLLIN | EPOLLHUP | EPOLLRDHUP))) {
            process(loop, c);
            continue;
          }
        }
        if (ev & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) {
          on_readable(loop, c);
        }
      }
      const auto now = Clock::now();
      if (stopping.load(std::memory_order_relaxed)) {
        if (listening) {
          listening = false;
          epoll_ctl(loop.epfd, EPOLL_CTL_DEL, listen_fd, nullptr);
          stop_deadline = now + std::chrono::seconds(3);
        }
        // Idle connections go now; busy ones when done or at the deadline.
        std::vector<Connection*> to_close;
        for (auto& [fd, c] : loop.conns) {
          if ((!c->waiting && c->out.empty()) || now >= stop_deadline) {
            to_close.push_back(c.get());
          }
        }
        for (Connection* c : to_close) {
          close_conn(loop, *c);
        }
        if (loop.conns.empty()) {
          break;
        }
      }
      if (listening && loop.accept_paused_until != Clock::time_point{} && now >= loop.accept_paused_until) {
        loop.accept_paused_until = {};
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLEXCLUSIVE;
        ev.data.fd = listen_fd;
        epoll_ctl(loop.epfd, EPOLL_CTL_ADD, listen_fd, &ev);
      }
      if (now - last_sweep >= std::chrono::seconds(1)) {
        last_sweep = now;
        sweep(loop, now);
      }
    }
  }

  void accept_one(Loop& loop) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    const int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // The pending connection stays in the backlog and the listening
        // socket stays readable: listening on would spin this loop. Pause
        // for a moment (idle connections are swept meanwhile).
        epoll_ctl(loop.epfd, EPOLL_CTL_DEL, listen_fd, nullptr);
        loop.accept_paused_until = Clock::now() + std::chrono::milliseconds(100);
        if (!accept_warned.exchange(true)) {
          log::warn("http", std::string("accept: ") + std::strerror(errno) + "; not accepting for 100 ms at a time");
        }
      }
      return; // EAGAIN: another loop took it
    }
    if (connections.load() >= options.max_connections) {
      ::close(fd);
      return;
    }
    std::string peer = peer_address(addr);
    if (!admit_peer(peer)) {
      // Over the per-client cap: a short answer, then the door.
      static constexpr std::string_view k_busy =
          "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
      [[maybe_unused]] auto w = ::send(fd, k_busy.data(), k_busy.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      ::close(fd);
      return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto c = std::make_unique<Connection>();
    c->peer = std::move(peer);
    c->fd = fd;
    c->id = next_id.fetch_add(1);
    c->last_activity = Clock::now();
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    if (epoll_ctl(loop.epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
      release_peer(c->peer);
      ::close(fd);
      return;
    }
    ++connections;
    loop.conns.emplace(fd, std::move(c));
  }

  static std::string peer_address(const sockaddr_storage& addr) {
    char text[INET6_ADDRSTRLEN] = "";
    if (addr.ss_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(addr).sin_addr, text, sizeof text);
    } else if (addr.ss_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr, text, sizeof text);
    }
    return text;
  }

  // Counts the peer's connections; false when it is at the cap.
  bool admit_peer(const std::string& peer) {
    if (options.max_connections_per_client == 0) {
      return true;
    }
    std::lock_guard lock(peers_mutex);
    size_t& n = peers[peer];
    if (n >= options.max_connections_per_client) {
      return false;
    }
    ++n;
    return true;
  }

  void release_peer(const std::string& peer) {
    if (options.max_connections_per_client == 0) {
      return;
    }
    std::lock_guard lock(peers_mutex);
    auto it = peers.find(peer);
    if (it != peers.end() && --it->second == 0) {
      peers.erase(it);
    }
  }

  void close_conn(Loop& loop, Connection& c) {
    const int fd = c.fd;
    epoll_ctl(loop.epfd, EPOLL_CTL_DEL, fd, nullptr);
    ::close(fd);
    --connections;
    release_peer(c.peer);
    loop.conns.erase(fd); // destroys c
  }

  void update_interest(Loop& loop, Connection& c) {
    const bool want_read = !c.closing && !c.peer_done && !c.waiting && c.out.empty();
    const bool want_write = !c.out.empty();
    if (want_read == c.reading && want_write == c.writing) {
      return;
    }
    epoll_event ev{};
    ev.events = (want_read ? EPOLLIN | EPOLLRDHUP : 0u) | (want_write ? EPOLLOUT : 0u);
    ev.data.fd = c.fd;
    epoll_ctl(loop.epfd, EPOLL_CTL_MOD, c.fd, &ev);
    c.reading = want_read;
    c.writing = want_write;
  }

  void on_readable(Loop& loop, Connection& c) {
    char buf[16 * 1024];
    bool eof = false;
    for (;;) {
      const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
      if (n > 0) {
        if (c.in_pos > 0 && c.in_pos == c.in.size()) {
          c.in.clear();
          c.in_pos = 0;
        }
        c.in.append(buf, static_cast<size_t>(n));
        c.last_activity = Clock::now();
        if (static_cast<size_t>(n) < sizeof buf) {
          break;
        }
        if (c.in.size() - c.in_pos > options.max_header_bytes + options.max_body_bytes) {
          break; // process() refuses it
        }
        continue;
      }
      if (n == 0) {
        eof = true;
      } else if (errno == EINTR) {
        continue;
      } else if (errno != EAGAIN) {
        close_conn(loop, c);
        return;
      }
      break;
    }
    if (eof) {
      // The peer sent all it will: answer every complete request (a client
      // may pipeline several and half-close), then close.
      c.peer_done = true;
    }
    process(loop, c);
  }

  // Parses and answers complete requests, one at a time so responses stay
  // in request order, writing each before the next; stops when a request is
  // incomplete, went to a worker, or the socket is full.
  void process(Loop& loop, Connection& c) {
    for (;;) {
      if (!c.waiting && c.out.empty() && c.in_pos < c.in.size()) {
        handle_next(loop, c);
      }
      if (c.out.empty()) {
        break;
      }
      if (!write_out(loop, c)) {
        return; // closed
      }
      if (!c.out.empty() || c.waiting || c.in_pos >= c.in.size()) {
        break;
      }
    }
    if ((c.closing || c.peer_done) && !c.waiting && c.out.empty()) {
      close_conn(loop, c);
      return;
    }
    update_interest(loop, c);
  }

  void handle_next(Loop& loop, Connection& c) {
    Request req;
    size_t consumed = 0;
    const int error = parse_request(std::string_view(c.in.data() + c.in_pos, c.in.size() - c.in_pos),
                                    options.max_header_bytes, options.max_body_bytes, req, consumed);
    if (error == -1) {
      // Incomplete: wait for more, within the request timeout.
      if (!c.request_pending) {
        c.request_pending = true;
        c.request_started = Clock::now();
      }
      return;
    }
    c.request_pending = false;
    c.parsed_at = Clock::now();
    req.peer = c.peer;
    req.client = options.proxies.client_of(c.peer, req.header("forwarded"), req.header("x-forwarded-for"));
    if (error != 0) {
      Response res;
      res.status = error;
      res.set_body(std::string(reason_phrase(error)) + "\n", "text/plain");
      c.closing = true;
      c.in.clear();
      c.in_pos = 0;
      enqueue(loop, c, req, std::move(res), true);
      return;
    }
    c.in_pos += consumed;
    if (c.in_pos == c.in.size()) {
      c.in.clear();
      c.in_pos = 0;
    } else if (c.in_pos > 64 * 1024) {
      c.in.erase(0, c.in_pos);
      c.in_pos = 0;
    }
    Response res;
    Disposition d = Disposition::done;
    try {
      d = handler(req, res, false);
    } catch (...) {
      res = Response();
      res.status = 500;
    }
    if (d == Disposition::blocking) {
      c.waiting = true;
      {
        std::lock_guard lock(jobs_mutex);
        jobs.push_back(Job{&loop, c.fd, c.id, std::move(req)});
      }
      jobs_cv.notify_one();
      return;
    }
    enqueue(loop, c, req, std::move(res), false);
  }

  const std::string& date_now(Loop& loop) {
    const std::time_t now = std::time(nullptr);
    if (now != loop.date_second) {
      loop.date_second = now;
      loop.date = http_date(now);
    }
    return loop.date;
  }

  void enqueue(Loop& loop, Connection& c, const Request& req, Response res, bool error) {
    bool keep_alive = !error && !c.closing && !stopping.load(std::memory_order_relaxed);
    if (keep_alive) {
      const std::string* conn = req.header("connection");
      if (req.minor_version == 0) {
        keep_alive = conn && lists_token(*conn, "keep-alive");
      } else if (conn && lists_token(*conn, "close")) {
        keep_alive = false;
      }
    }
    Outgoing o = make_outgoing(req, std::move(res), keep_alive, options.server_name, date_now(loop));
    o.parsed_at = c.parsed_at;
    if (o.close_after) {
      c.closing = true;
    }
    c.out.push_back(std::move(o));
  }

  // Writes what it can; false when the connection was closed.
  bool write_out(Loop& loop, Connection& c) {
    while (!c.out.empty()) {
      Outgoing& o = c.out.front();
      bool progressed = false;
      const Sent sent = send_some(c.fd, o, progressed);
      if (progressed) {
        c.last_activity = Clock::now();
      }
      if (sent == Sent::blocked) {
        break;
      }
      if (sent == Sent::failed) {
        close_conn(loop, c);
        return false;
      }
      const bool close_after = o.close_after;
      note_slow(o, c.peer);
      c.out.pop_front();
      if (close_after) {
        close_conn(loop, c);
        return false;
      }
    }
    return true;
  }

  void drain_completions(Loop& loop) {
    std::vector<Completion> done;
    {
      std::lock_guard lock(loop.completions_mutex);
      done.swap(loop.completions);
    }
    for (Completion& d : done) {
      auto it = loop.conns.find(d.fd);
      if (it == loop.conns.end() || it->second->id != d.id) {
        continue; // the client went away meanwhile
      }
      Connection& c = *it->second;
      c.waiting = false;
      enqueue(loop, c, d.req, std::move(d.res), false);
      process(loop, c);
    }
  }

  void sweep(Loop& loop, Clock::time_point now) {
    std::vector<Connection*> expired;
    for (auto& [fd, c] : loop.conns) {
      if (c->waiting) {
        continue;
      }
      if (!c->out.empty()) {
        if (now - c->last_activity > options.write_timeout) {
          expired.push_back(c.get());
        }
      } else if (c->request_pending) {
        if (now - c->request_started > options.request_timeout) {
          expired.push_back(c.get());
        }
      } else if (now - c->last_activity > options.idle_timeout) {
        expired.push_back(c.get());
      }
    }
    for (Connection* c : expired) {
      close_conn(loop, *c);
    }
  }

  // ---- workers ----------------------------------------------------------

  void run_worker() {
    for (;;) {
      Job job;
      {
        std::unique_lock lock(jobs_mutex);
        jobs_cv.wait(lock, [this] { return workers_stop || !jobs.empty(); });
        if (jobs.empty()) {
          return;
        }
        job = std::move(jobs.front());
        jobs.pop_front();
      }
      Response res;
      try {
        if (handler(job.req, res, true) != Disposition::done) {
          res = Response();
          res.status = 500;
        }
      } catch (...) {
        res = Response();
        res.status = 500;
      }
      {
        std::lock_guard lock(job.loop->completions_mutex);
        job.loop->completions.push_back(Completion{job.fd, job.id, std::move(job.req), std::move(res)});
      }
      const uint64_t one = 1;
      [[maybe_unused]] auto r = ::write(job.loop->wakefd, &one, sizeof one);
    }
  }
};

Server::Server(ServerOptions options, Handler handler)
    : m_impl(std::make_unique<Impl>(std::move(options), std::move(handler))) {}

Server::~Server() { stop(); }

Result<void> Server::start() {
  Impl& m = *m_impl;
  std::signal(SIGPIPE, SIG_IGN);
  const std::string where = m.options.host + ":" + std::to_string(m.options.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(m.options.port);
  const char* host = m.options.host.empty() || m.options.host == "*" ? nullptr : m.options.host.c_str();
  if (int rc = getaddrinfo(host, port.c_str(), &hints, &res); rc != 0) {
    return make_error(ErrorKind::io, "cannot listen on " + where + ": " + gai_strerror(rc));
  }
  std::string reason = "no address";
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      reason = std::strerror(errno);
      continue;
    }
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, 1024) != 0) {
      reason = std::strerror(errno);
      ::close(fd);
      continue;
    }
    m.listen_fd = fd;
    break;
  }
  freeaddrinfo(res);
  if (m.listen_fd < 0) {
    return make_error(ErrorKind::io, "cannot listen on " + where + ": " + reason);
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  getsockname(m.listen_fd, reinterpret_cast<sockaddr*>(&addr), &len);
  m.bound_port = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                            : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  const int n_loops =
      m.options.loops > 0 ? m.options.loops : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  for (int i = 0; i < n_loops; ++i) {
    auto loop = std::make_unique<Loop>();
    loop->epfd = epoll_create1(EPOLL_CLOEXEC);
    loop->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    epoll_event ev{};
    // EPOLLEXCLUSIVE: a new connection wakes one loop, not all of them.
    ev.events = EPOLLIN | EPOLLEXCLUSIVE;
    ev.data.fd = m.listen_fd;
    epoll_ctl(loop->epfd, EPOLL_CTL_ADD, m.listen_fd, &ev);
    epoll_event wev{};
    wev.events = EPOLLIN;
    wev.data.fd = loop->wakefd;
    epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->wakefd, &wev);
    m.loops.push_back(std::move(loop));
  }
  for (auto& loop : m.loops) {
    Loop* l = loop.get();
    loop->thread = std::thread([&m, l] {
      name_thread("http loop");
      m.run_loop(*l);
    });
  }
  for (int i = 0; i < std::max(1, m.options.workers); ++i) {
    m.workers.emplace_back([&m] {
      name_thread("http worker");
      m.run_worker();
    });
  }
  m.started = true;
  return {};
}

int Server::port() const { return m_impl->bound_port; }

void Server::stop() {
  Impl& m = *m_impl;
  if (!m.started) {
    return;
  }
  m.started = false;
  m.stopping = true;
  for (auto& loop : m.loops) {
    const uint64_t one = 1;
    [[maybe_unused]] auto r = ::write(loop->wakefd, &one, sizeof one);
  }
  for (auto& loop : m.loops) {
    if (loop->thread.joinable()) {
      loop->thread.join();
    }
  }
  {
    std::lock_guard lock(m.jobs_mutex);
    m.workers_stop = true;
  }
  m.jobs_cv.notify_all();
  for (auto& w : m.workers) {
    w.join();
  }
  for (auto& loop : m.loops) {
    ::close(loop->epfd);
    ::close(loop->wakefd);
  }
  m.loops.clear();
  m.workers.clear();
  ::close(m.listen_fd);
  m.listen_fd = -1;
}

} // namespace tributary::http

#include "sync_engine/pipelined_http.h"

#include "sync_engine/pipelining_verdicts.h"

#include "sync_engine/http1_response.h"
#include "sync_engine/net_policy.h"
#include "sync_engine/retry.h"

#include "common/version.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>

namespace tributary::sync {

using http1::Head;
using http1::Parse;
using http1::parse_chunked;
using http1::parse_head;
using pipelining::Known;
using pipelining::known;
using pipelining::record;
using pipelining::Verdict;

namespace {

using steady = std::chrono::steady_clock;

// Idle connections kept per origin between batches.
constexpr size_t k_max_idle = 8;


} // namespace

struct PipelinedOrigin::Conn {
  int fd = -1;
  std::string in; // received; unread from `pos`
  size_t pos = 0;
  uint64_t answered = 0; // responses read on this connection
  bool eof = false;
  ~Conn() {
    if (fd >= 0) {
      ::close(fd);
    }
  }
  std::string_view unread() const { return std::string_view(in).substr(pos); }
  void consume(size_t n) {
    pos += n;
    if (pos == in.size()) {
      in.clear();
      pos = 0;
    } else if (pos > 64 * 1024) {
      in.erase(0, pos);
      pos = 0;
    }
  }
};

namespace {

enum class Io { ok, timeout, cancelled, closed, error };

// Waits for `events` on `fd` until `deadline`, in slices that let a
// cancellation through.
Io wait_for(int fd, short events, steady::time_point deadline, const std::atomic<bool>* cancel) {
  for (;;) {
    if (cancel && cancel->load()) {
      return Io::cancelled;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now()).count();
    if (left <= 0) {
      return Io::timeout;
    }
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 100)));
    if (rc > 0) {
      return (p.revents & (POLLERR | POLLNVAL)) && !(p.revents & POLLIN) ? Io::error : Io::ok;
    }
    if (rc < 0 && errno != EINTR) {
      return Io::error;
    }
  }
}

Io send_all(int fd, std::string& out, steady::time_point deadline, const std::atomic<bool>* cancel) {
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::send(fd, out.data() + done, out.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 && (errno == EAGAIN)) {
      if (Io w = wait_for(fd, POLLOUT, deadline, cancel); w != Io::ok) {
        return w;
      }
      continue;
    }
    return Io::closed;
  }
  out.clear();
  return Io::ok;
}

// Reads what has come, waiting until `deadline` for something.
Io receive(PipelinedOrigin::Conn& c, steady::time_point deadline, const std::atomic<bool>* cancel) {
  for (;;) {
    const size_t old = c.in.size();
    c.in.resize(old + 64 * 1024);
    const ssize_t n = ::recv(c.fd, c.in.data() + old, 64 * 1024, 0);
    c.in.resize(old + (n > 0 ? static_cast<size_t>(n) : 0));
    if (n > 0) {
      int one = 1;
      ::setsockopt(c.fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
      return Io::ok;
    }
    if (n == 0) {
      c.eof = true;
      return Io::closed;
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno == ECONNRESET) {
      // Reset after the server closed (requests sent into a closed
      // connection draw one): as a close.
      c.eof = true;
      return Io::closed;
    }
    if (errno != EAGAIN) {
      return Io::error;
    }
    if (Io w = wait_for(c.fd, POLLIN, deadline, cancel); w != Io::ok) {
      return w;
    }
  }
}

} // namespace

namespace {

// The answer to a probe's HEAD: `works` when it came (its head read, no
// body; whatever its status: a server without HEAD that says 501 still
// answered a pipelined request), `broken` when nothing came by `deadline`,
// `unknown` when the connection closed or failed first. `close`: the
// connection ends after it.
Verdict read_probe(PipelinedOrigin::Conn& c, steady::time_point deadline, const std::atomic<bool>* cancel,
                   bool& close) {
  for (;;) {
    Head h;
    std::string why;
    const Parse p = parse_head(c.unread(), h, why);
    if (p == Parse::ok && h.status >= 100 && h.status <= 199) {
      c.consume(h.length);
      continue;
    }
    if (p == Parse::ok) {
      c.consume(h.length); // a HEAD answer has no content, whatever its Content-Length
      close = h.close;
      return Verdict::works;
    }
    if (p == Parse::bad || c.eof) {
      return p == Parse::bad ? Verdict::broken : Verdict::unknown;
    }
    const Io r = receive(c, deadline, cancel);
    if (r == Io::timeout) {
      return Verdict::broken;
    }
    if (r != Io::ok && r != Io::closed) {
      return Verdict::unknown;
    }
  }
}

} // namespace

PipelineStats pipeline_stats() { return pipelining::stats(); }

PipelinedOrigin::PipelinedOrigin(Url origin, PipelineSettings settings, std::shared_ptr<HostThrottle> throttle)
    : m_origin(std::move(origin)), m_key(m_origin.origin()), m_settings(std::move(settings)),
      m_throttle(std::move(throttle)), m_bursts(m_settings.depth) {
  const bool default_port = m_origin.port == 80;
  m_request_head = "Host: " + m_origin.host + (default_port ? "" : ":" + std::to_string(m_origin.port)) +
                   "\r\nUser-Agent: tributary/" + std::string(version()) + "\r\nAccept-Encoding: identity\r\n";
  for (const auto& [k, v] : m_settings.headers) {
    m_request_head += k + ": " + v + "\r\n";
  }
  m_request_head += "\r\n";
  m_settings.depth = std::max(1u, m_settings.depth);
  if (Known k = known(m_key); k.verdict == Verdict::broken) {
    m_broken = true;
    m_broken_reason = k.why;
  }
}

PipelinedOrigin::~PipelinedOrigin() = default;

std::string PipelinedOrigin::broken_reason() const {
  std::lock_guard lock(m_mutex);
  return m_broken_reason;
}

void PipelinedOrigin::set_broken(const std::string& why) {
  record(m_key, Verdict::broken, why);
  std::lock_guard lock(m_mutex);
  if (!m_broken.exchange(true)) {
    m_broken_reason = why;
  }
  m_idle.clear();
}

void PipelinedOrigin::retire(const std::string& why) {
  std::lock_guard lock(m_mutex);
  if (!m_broken.exchange(true)) {
    m_broken_reason = why + " (for this run)";
  }
  m_idle.clear();
}

void PipelinedOrigin::give_back(std::unique_ptr<Conn> c) {
  std::lock_guard lock(m_mutex);
  if (!m_broken.load() && m_idle.size() < k_max_idle) {
    m_idle.push_back(std::move(c));
  }
}

std::unique_ptr<PipelinedOrigin::Conn> PipelinedOrigin::take() {
  {
    std::lock_guard lock(m_mutex);
    while (!m_idle.empty()) {
      auto c = std::move(m_idle.back());
      m_idle.pop_back();
      // A connection the server closed while idle shows readable (EOF):
      // drop it rather than lose a request on it.
      pollfd p{c->fd, POLLIN, 0};
      if (::poll(&p, 1, 0) == 0) {
        return c;
      }
    }
  }
  std::string address;
  if (m_settings.addresses) {
    PickedAddress a = pick_address(m_origin.host, *m_settings.addresses);
    address = a.address;
  } else if (auto all = resolve_host(m_origin.host); !all.empty()) {
    address = all.front();
  }
  if (address.empty()) {
    return nullptr; // the ordinary way says why
  }
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* ai = nullptr;
  if (::getaddrinfo(address.c_str(), std::to_string(m_origin.port).c_str(), &hints, &ai) != 0 || !ai) {
    return nullptr;
  }
  auto c = std::make_unique<Conn>();
  c->fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  bool connected = false;
  if (c->fd >= 0) {
    int one = 1;
    ::setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::setsockopt(c->fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
    if (::connect(c->fd, ai->ai_addr, ai->ai_addrlen) == 0) {
      connected = true;
    } else if (errno == EINPROGRESS &&
               wait_for(c->fd, POLLOUT, steady::now() + m_settings.connect_timeout, m_settings.cancel) == Io::ok) {
      int err = 0;
      socklen_t len = sizeof err;
      connected = ::getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
    }
  }
  ::freeaddrinfo(ai);
  return connected ? std::move(c) : nullptr;
}

// One connection's part of a run: bursts sent and their answers read until
// the batch is done, the connection ends, or pipelining turns out broken.
class PipelinedOrigin::ConnectionRun {
public:
  ConnectionRun(PipelinedOrigin& origin, std::vector<PipelinedGet>& gets, std::vector<bool>& left,
                size_t& next_index, unsigned& limit, std::unique_ptr<Conn> connection)
      : org(origin), batch(gets), handed_back(left), next(next_index), burst_limit(limit),
        conn(std::move(connection)), cancel(origin.m_settings.cancel) {}

  void run() {
    fill();
    while (!q.empty()) {
      // Whether the front request waited behind another of its burst.
      const bool pipelined = q.front().index != burst.front();
      // Each answer, head and body, within the pipelined stall: a slower
      // one (a Source dripping bytes, a mute one) is handed back, for the
      // ordinary way's timeouts and minimum rate to judge.
      const auto stall = std::min<steady::duration>(org.m_settings.read_timeout, org.m_settings.pipelined_stall);
      if (!out.empty()) {
        if (Io w = send_all(conn->fd, out, steady::now() + org.m_settings.read_timeout, cancel); w != Io::ok) {
          // A connection closed under us: a used one is replaced, a fresh
          // one that takes nothing leaves the requests to the caller.
          reusable = false;
          end_connection(conn->answered > 0, "");
          break;
        }
      }
      // The front request's answer.
      PipelinedGet& g = batch[q.front().index];
      const auto began = std::max(q.front().sent, last_done);
      Head h;
      std::string why;
      std::optional<steady::time_point> head_at;
      size_t body_framed = 0;
      if (read_answer(h, why, head_at, body_framed, began + stall) != Parse::ok) {
        reusable = false;
        failed(why, pipelined, head_at.has_value());
        break;
      }
      if (!take_answer(g, h, body_framed, began, head_at)) {
        break;
      }
    }
    if (reusable && q.empty() && !conn->eof) {
      org.give_back(std::move(conn));
    }
  }

private:
  struct InFlight {
    size_t index;
    HostThrottle::Ticket ticket;
    steady::time_point sent;
  };

  bool cancelled() const { return cancel && cancel->load(); }
  void neutral(const InFlight& f) { org.m_throttle->finish(f.ticket, HostThrottle::Outcome{}); }

  // A new burst: as many requests as the throttle allows now (at least
  // one, waiting for it). Until the origin is known to answer pipelined
  // requests, a burst is one GET followed by a HEAD of the same target:
  // whether or not the HEAD is answered, the first answer can only be the
  // GET's.
  void fill() {
    burst.clear();
    burst_answers = 0;
    burst_sent = steady::now();
    const bool proven = known(org.m_key).verdict == Verdict::works;
    while (next < batch.size() && q.size() < (proven ? burst_limit : 1u)) {
      if (handed_back[next]) {
        ++next;
        continue;
      }
      std::optional<HostThrottle::Ticket> t;
      if (q.empty()) {
        t = org.m_throttle->start(org.m_key, org.m_settings.max_connections, org.m_settings.requests_per_second, cancel);
        if (cancelled()) {
          org.m_throttle->finish(*t, HostThrottle::Outcome{});
          return;
        }
      } else {
        // Behind the burst's first on this connection: the server answers
        // it after that one, so it takes no place in the window (the
        // connections do), only the rate's and the pauses' leave.
        t = org.m_throttle->try_start(org.m_key, org.m_settings.max_connections, org.m_settings.requests_per_second,
                                      /*behind=*/true);
      }
      if (!t) {
        return;
      }
      out += "GET ";
      out += batch[next].target;
      out += " HTTP/1.1\r\n";
      out += org.m_request_head;
      q.push_back(InFlight{next, std::move(*t), steady::now()});
      burst.push_back(next);
      if (!proven) {
        out += "HEAD ";
        out += batch[next].target;
        out += " HTTP/1.1\r\n";
        out += org.m_request_head;
        probing = true;
      }
      ++next;
    }
  }

  // Ends this connection mid-burst: the burst's answers are dropped;
  // `again` asks its requests again on another connection, otherwise they
  // are left to the caller. `broken` turns pipelining off.
  void end_connection(bool again, const std::string& broken) {
    for (size_t i : burst) {
      batch[i] = PipelinedGet{std::move(batch[i].target)};
      if (!again) {
        handed_back[i] = true;
      }
    }
    if (again && !burst.empty()) {
      next = burst.front();
    }
    for (const auto& f : q) {
      neutral(f);
    }
    q.clear();
    if (!broken.empty()) {
      org.set_broken(broken);
    }
  }

  // Reads the front request's answer, head and body, until `deadline`.
  Parse read_answer(Head& h, std::string& why, std::optional<steady::time_point>& head_at, size_t& body_framed,
                    steady::time_point deadline) {
    Parse p = Parse::more;
    for (;;) {
      if (!head_at) {
        p = parse_head(conn->unread(), h, why);
        if (p == Parse::ok && h.status >= 100 && h.status <= 199 && h.status != 101) {
          conn->consume(h.length); // an interim response: the final one follows
          continue;
        }
        if (p == Parse::ok) {
          head_at = steady::now();
          if (h.status == 101) {
            p = Parse::bad;
            why = "101 to a GET";
          }
        }
      }
      if (head_at && p != Parse::bad) {
        const bool bodiless = h.status == 204 || h.status == 304;
        const uint64_t limit = h.status >= 200 && h.status <= 299 ? org.m_settings.max_body_bytes : 64 * 1024;
        const std::string_view rest = conn->unread().substr(h.length);
        if (bodiless) {
          body_framed = 0;
          p = Parse::ok;
        } else if (h.chunked) {
          p = parse_chunked(rest, limit, body_framed, nullptr, why);
        } else if (h.content_length) {
          if (*h.content_length > limit) {
            p = Parse::bad;
            why = "too large";
          } else {
            p = rest.size() >= *h.content_length ? Parse::ok : Parse::more;
            body_framed = static_cast<size_t>(*h.content_length);
          }
        } else {
          // Delimited by the close of the connection.
          h.close = true;
          if (rest.size() > limit) {
            p = Parse::bad;
            why = "too large";
          } else {
            p = conn->eof ? Parse::ok : Parse::more;
            body_framed = rest.size();
          }
        }
      }
      if (p != Parse::more) {
        break;
      }
      if (conn->eof) {
        why = "closed";
        break;
      }
      Io r = receive(*conn, deadline, cancel);
      if (r == Io::closed) {
        continue; // parse what came, then see
      }
      if (r != Io::ok) {
        why = r == Io::timeout ? "timeout" : r == Io::cancelled ? "cancelled" : "error";
        p = Parse::bad;
        break;
      }
    }
    return p;
  }

  // The front request's answer did not come whole: why decides what
  // becomes of the burst, the connection and pipelining to this origin.
  void failed(const std::string& why, bool pipelined, bool head_came) {
    if (why == "too large") {
      // Not for this path; the others go on on a new connection.
      handed_back[q.front().index] = true;
      neutral(q.front());
      q.pop_front();
      end_connection(true, "");
    } else if (why == "closed" && !head_came && conn->in.size() == conn->pos) {
      // Closed between answers (an idle timeout, a limit of requests a
      // connection): a connection that answered goes on on another, with
      // bursts no larger than it took; a fresh one that answered nothing
      // leaves the requests to the caller.
      if (conn->answered > 0) {
        burst_limit = std::max<unsigned>(1, static_cast<unsigned>(burst_answers));
        end_connection(true, "");
      } else {
        end_connection(false, burst.size() > 1 ? "closed with pipelined requests unanswered" : "");
      }
    } else if (why == "timeout") {
      // No answer behind one that came: the origin drops pipelined
      // requests. A lone request unanswered within the stall: the
      // origin is slow, and this run leaves it to the ordinary way (its
      // full timeout), rather than wait the stall again each burst. A
      // slow answer that began is only slow.
      neutral(q.front());
      handed_back[q.front().index] = true;
      q.pop_front();
      if (pipelined && !head_came) {
        end_connection(false, "no answer to a pipelined request within " +
                                  std::to_string(org.m_settings.pipelined_stall.count()) + " ms");
      } else {
        end_connection(false, "");
        if (!head_came) {
          org.retire("no answer within " + std::to_string(org.m_settings.pipelined_stall.count()) + " ms");
        }
      }
    } else if (why == "cancelled" || why == "error" || why == "closed") {
      end_connection(false, "");
    } else {
      end_connection(false, "pipelined response not understood: " + why);
    }
  }

  // A whole response, taken; false when the connection ends here.
  bool take_answer(PipelinedGet& g, Head& h, size_t body_framed, steady::time_point began,
                   const std::optional<steady::time_point>& head_at) {
    // A whole response.
    g.answered = true;
    g.status = h.status;
    g.content_type = std::move(h.content_type);
    g.content_encoding = std::move(h.content_encoding);
    if (g.status >= 200 && g.status <= 299) {
      const std::string_view rest = conn->unread().substr(h.length);
      if (h.chunked) {
        g.body.clear();
        size_t framed = 0;
        std::string unused;
        (void)parse_chunked(rest, org.m_settings.max_body_bytes, framed, &g.body, unused);
      } else {
        g.body.assign(rest.data(), body_framed);
      }
    }
    conn->consume(h.length + body_framed);
    ++conn->answered;
    HostThrottle::Outcome o;
    o.status = h.status;
    o.first_byte = std::chrono::duration_cast<std::chrono::milliseconds>(*head_at - began);
    if (!h.retry_after.empty()) {
      o.retry_after = parse_retry_after(h.retry_after, std::chrono::system_clock::now());
    }
    org.m_throttle->finish(q.front().ticket, o);
    q.pop_front();
    ++burst_answers;
    last_done = steady::now();
    if (burst_answers == 1) {
      first_answer = last_done;
    }
    if (h.close) {
      reusable = false;
      if (probing && record(org.m_key, Verdict::unknown) == Verdict::broken) {
        org.set_broken(known(org.m_key).why); // three probes cut short by a close
      }
      if (!q.empty()) {
        burst_limit = std::max<unsigned>(1, static_cast<unsigned>(burst_answers));
        end_connection(true, "");
      }
      return false;
    }
    if (q.empty() && probing) {
      probing = false;
      const auto latency = *head_at - began;
      const auto wait = std::clamp<steady::duration>(4 * latency, std::chrono::milliseconds(200),
                                                     org.m_settings.pipelined_stall);
      bool close = false;
      const Verdict v = read_probe(*conn, steady::now() + wait, cancel, close);
      if (v == Verdict::broken) {
        reusable = false;
        org.set_broken("no answer to a pipelined request within " +
                   std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(wait).count()) + " ms");
        return false;
      }
      if (record(org.m_key, v) == Verdict::broken) {
        reusable = false;
        org.set_broken(known(org.m_key).why);
        return false;
      }
      if (v == Verdict::unknown || close) {
        reusable = false;
        return false; // closed: another connection goes on (and probes again if this one could not tell)
      }
    }
    if (q.empty()) {
      pipelining::count_answered(burst_answers);
      // The burst is answered whole: its answers stand. How large the
      // next is: the origin's BurstSizer says.
      burst_limit = org.m_bursts.after(burst_limit, burst_answers, first_answer - burst_sent,
                                       last_done - first_answer, single_bursts);
      fill();
    }
    return true;
  }

  PipelinedOrigin& org;
  std::vector<PipelinedGet>& batch;
  std::vector<bool>& handed_back; // left to the caller, not sent again
  size_t& next;
  unsigned& burst_limit;
  std::unique_ptr<Conn> conn;
  const std::atomic<bool>* cancel;
  std::deque<InFlight> q;
  std::vector<size_t> burst;
  size_t burst_answers = 0;
  std::string out;
  bool probing = false;
  unsigned single_bursts = 0; // bursts of one since the last of two or more
  steady::time_point burst_sent{};
  steady::time_point first_answer{};
  bool reusable = true;
  steady::time_point last_done = steady::now();
};

void PipelinedOrigin::run(std::vector<PipelinedGet>& batch) {
  const std::atomic<bool>* cancel = m_settings.cancel;
  auto cancelled = [&] { return cancel && cancel->load(); };
  std::vector<bool> handed_back(batch.size(), false); // left to the caller, not sent again
  size_t next = 0;
  // Requests go in bursts, and no request is sent until every one before
  // it is answered. HTTP/1.1 does not say which request an answer is for:
  // a server that drops a pipelined request and answers a later one would
  // have that answer taken for the dropped one's. It cannot within a burst
  // answered whole (it cannot answer what was not sent), so a burst's
  // answers stand only once all of them came; a burst cut short is asked
  // again (or left to the caller), never half kept.
  //
  // A server answers a connection's requests one after another, so bursts
  // pay only where answers come fast (a static file: microseconds each);
  // a server that takes milliseconds an answer is asked one request at a
  // time on each connection, as many connections as the window allows, as
  // before pipelining (with 10 ms answers, bursts of 8 on two connections
  // held a server that allows 4 at once to 87 requests/s).
  //
  // A batch starts with the bursts the last one ended with (slow start once
  // an origin, not once a batch: a batch of 32 took bursts of 2, 4, 8, 16
  // and 2, five round trips where two do, 930 resources/s 50 ms away).
  unsigned burst_limit = m_bursts.start();
  while (next < batch.size() && usable() && !cancelled()) {
    auto conn = take();
    if (!conn) {
      break; // unanswered: the ordinary way connects, or says why not
    }
    ConnectionRun(*this, batch, handed_back, next, burst_limit, std::move(conn)).run();
  }
  m_bursts.end(burst_limit);
}

} // namespace tributary::sync

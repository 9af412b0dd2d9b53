#include "common/http/response_out.h"

#include "common/http/text.h"
#include "common/log.h"

#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <mutex>

namespace tributary::http::detail {

using Clock = std::chrono::steady_clock;

Outgoing make_outgoing(const Request& req, Response res, bool& keep_alive, std::string_view server_name,
                       std::string_view date) {
  const bool head = req.method == "HEAD";
  if (res.status == 200 && res.ranges && (res.shared || res.file)) {
    apply_range(req, res);
  }
  const bool no_body = res.status == 304 || res.status == 204 || (res.status >= 100 && res.status < 200);
  if (res.status == 304) {
    // No Content-Length (RFC 9110 allows none), and the connection ends
    // here: a client that reads a body until the connection closes when
    // no length is given (cpp-httplib 0.11's does, and so did every
    // Tributary before its client was fixed) would otherwise wait for the
    // idle timeout on every poll of an unchanged document. Polls are few;
    // a reconnect per 304 costs little.
    keep_alive = false;
  }
  if (no_body) {
    res.body.clear();
    res.shared.reset();
    res.file.reset();
    res.length = 0;
  }
  std::string h;
  h.reserve(256);
  h += "HTTP/1.1 ";
  h += std::to_string(res.status);
  h += ' ';
  h += reason_phrase(res.status);
  h += "\r\nServer: ";
  h += server_name;
  h += "\r\nDate: ";
  h += date;
  h += "\r\n";
  for (const auto& [k, v] : res.headers) {
    if (!is_safe_header_value(v) || k.empty() || !std::all_of(k.begin(), k.end(), is_token_char)) {
      // Never sent: a value that would end the header early (response
      // splitting) is a bug or an upstream's attack; the rest stands.
      log::warn("http", "dropped response header '" + (is_safe_header_value(k) ? k : std::string("?")) +
                            "' for " + req.target + ": CR, LF or NUL in it");
      continue;
    }
    h += k;
    h += ": ";
    h += v;
    h += "\r\n";
  }
  if (!no_body) {
    h += "Content-Length: ";
    h += std::to_string(res.body_size());
    h += "\r\n";
  }
  if (!keep_alive) {
    h += "Connection: close\r\n";
  } else if (req.minor_version == 0) {
    h += "Connection: keep-alive\r\n";
  }
  h += "\r\n";
  Outgoing o;
  o.head = std::move(h);
  o.res = std::move(res);
  o.send_body = !head && !no_body;
  o.close_after = !keep_alive;
  o.what = req.method + " " + req.target.substr(0, 200);
  return o;
}

void apply_range(const Request& req, Response& res) {
  const std::string* range = req.header("range");
  if (!range || req.method != "GET") {
    return;
  }
  if (const std::string* if_range = req.header("if-range")) {
    std::string etag;
    for (const auto& [k, v] : res.headers) {
      if (iequals(k, "ETag")) {
        etag = v;
      }
    }
    if (etag.empty() || *if_range != etag) {
      return; // the client's copy is stale: the whole body
    }
  }
  const size_t size = res.length;
  auto r = parse_range(*range, size);
  if (!r) {
    return;
  }
  if (!r->satisfiable) {
    res.status = 416;
    res.shared.reset();
    res.file.reset();
    res.length = 0;
    res.body.clear();
    res.set_header("Content-Range", "bytes */" + std::to_string(size));
    return;
  }
  res.status = 206;
  res.offset += r->first;
  res.length = r->length;
  res.set_header("Content-Range", "bytes " + std::to_string(r->first) + "-" +
                                      std::to_string(r->first + r->length - 1) + "/" + std::to_string(size));
}


Sent send_some(int fd, Outgoing& o, bool& progressed) {
  for (;;) {
    const size_t body_len = o.body_len();
    if (o.head_sent < o.head.size() || (!o.res.file && o.body_sent < body_len)) {
      iovec iov[2];
      int n_iov = 0;
      if (o.head_sent < o.head.size()) {
        iov[n_iov++] = {o.head.data() + o.head_sent, o.head.size() - o.head_sent};
      }
      if (!o.res.file && o.body_sent < body_len) {
        iov[n_iov++] = {const_cast<char*>(o.body_data()) + o.body_sent, body_len - o.body_sent};
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<size_t>(n_iov);
      // A file body follows: the head waits for its first bytes, as one
      // segment (nginx's tcp_nopush), instead of going out alone.
      const int more = o.res.file && o.body_sent < body_len ? MSG_MORE : 0;
      const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | more);
      if (n < 0) {
        if (errno == EINTR) {
          continue;
        }
        return errno == EAGAIN ? Sent::blocked : Sent::failed;
      }
      progressed = true;
      size_t left = static_cast<size_t>(n);
      const size_t h = std::min(left, o.head.size() - o.head_sent);
      o.head_sent += h;
      left -= h;
      o.body_sent += left;
      continue;
    }
    if (o.res.file && o.body_sent < body_len) {
      off_t off = static_cast<off_t>(o.res.offset + o.body_sent);
      const ssize_t n = ::sendfile(fd, o.res.file->fd, &off, std::min<size_t>(body_len - o.body_sent, 1 << 20));
      if (n < 0) {
        if (errno == EINTR) {
          continue;
        }
        return errno == EAGAIN ? Sent::blocked : Sent::failed;
      }
      if (n == 0) {
        return Sent::failed; // the file shrank under us: the response cannot be completed
      }
      progressed = true;
      o.body_sent += static_cast<size_t>(n);
      continue;
    }
    return Sent::all;
  }
}

void note_slow(const Outgoing& o, const std::string& peer) {
  const auto now = Clock::now();
  const auto took = now - o.parsed_at;
  if (took < std::chrono::seconds(5)) {
    return;
  }
  static std::mutex m;
  static Clock::time_point last_line;
  static uint64_t unlogged = 0;
  std::lock_guard lock(m);
  if (now - last_line < std::chrono::seconds(1)) {
    ++unlogged;
    return;
  }
  last_line = now;
  const double secs = std::chrono::duration<double>(took).count();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", secs);
  log::warn("", "slow response: " + o.what + " (" + std::to_string(o.res.status) + ", " +
                    std::to_string(o.head.size() + o.body_len()) + " B) to " + peer + " took " + buf +
                    " s from request to last byte" +
                    (unlogged ? " (and " + std::to_string(unlogged) + " more since the last line)" : ""));
  unlogged = 0;
}

} // namespace tributary::http::detail

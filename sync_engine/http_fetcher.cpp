#include "sync_engine/fetcher_impl.h"

#include "sync_engine/fetch_error_text.h"
#include "sync_engine/net_policy.h"

#include "common/text.h"
#include "common/thread_name.h"
#include "common/version.h"

#include <httplib.h>

#include <condition_variable>
#include <list>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace tributary::sync {

namespace {

// The library's error in plain words, cause first: a connection's by the
// authority it concerns ("connection refused: 127.0.0.1:47199"), the rest by
// the URL ("read failed for https://…/changelist.xml").
std::string transport_words(httplib::Error err, const Url& u, const std::string& pinned) {
  const std::string at = authority_of(u.host, u.port);
  switch (err) {
  case httplib::Error::Connection:
    // The library does not say why: a fresh attempt does (2 s at most).
    return connect_failure(pinned.empty() ? u.host : pinned, u.port, 2000) + ": " + at;
  case httplib::Error::ConnectionTimeout:
    return "connection timed out: " + at;
  case httplib::Error::SSLConnection:
    return "TLS handshake failed: " + at;
  case httplib::Error::SSLServerVerification:
    return "TLS certificate not trusted: " + at;
  case httplib::Error::SSLLoadingCerts:
    return "TLS certificates could not be loaded (" + at + ")";
  case httplib::Error::Read:
    return "read failed (connection closed or no data in time) for " + u.str();
  case httplib::Error::Write:
    return "send failed (connection closed) for " + u.str();
  case httplib::Error::Compression:
    return "response could not be decompressed for " + u.str();
  case httplib::Error::ExceedRedirectCount:
    return "too many redirects for " + u.str();
  case httplib::Error::Canceled:
    return "cancelled: " + u.str();
  default:
    return "HTTP client error (" + httplib::to_string(err) + ") for " + u.str();
  }
}

// How much of an error response's body is read (and discarded) before the
// request ends with its status.
constexpr uint64_t k_max_error_body = 64 * 1024;

bool is_redirect(int status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

// Watches transfers in flight from a thread of its own and cuts off (by
// shutting the socket down, which cpp-httplib allows from another thread)
// those that are too slow: a response head that has not come within the
// read timeout in all, a body slower than the minimum rate over a window,
// or a fetch whose caller cancelled. cpp-httplib's own timeouts are per
// recv(): a server sending a byte every 59 s would hold a run forever.
class TransferWatch {
public:
  struct Transfer {
    httplib::Client* client = nullptr;
    std::chrono::steady_clock::time_point started;
    std::chrono::steady_clock::duration head_deadline{};
    uint64_t min_rate = 0;
    std::chrono::steady_clock::duration window{};
    const std::atomic<bool>* cancel = nullptr;
    std::atomic<bool> head_done{false};
    std::atomic<uint64_t> bytes{0};
    // Watch thread only, then read after unwatch():
    std::chrono::steady_clock::time_point window_start;
    uint64_t window_bytes = 0;
    std::string cut_off; // why the watch stopped it
  };

  ~TransferWatch() {
    {
      std::lock_guard lock(m_mutex);
      m_stop = true;
    }
    m_cv.notify_all();
    if (m_thread.joinable()) {
      m_thread.join();
    }
  }

  void watch(Transfer& t) {
    std::lock_guard lock(m_mutex);
    t.window_start = t.started;
    m_active.push_back(&t);
    if (!m_thread.joinable()) {
      m_thread = std::thread([this] {
        name_thread("http fetcher");
        run();
      });
    }
  }

  // After this returns the watch no longer touches `t` or its client.
  void unwatch(Transfer& t) {
    std::lock_guard lock(m_mutex);
    m_active.remove(&t);
  }

private:
  void run() {
    std::unique_lock lock(m_mutex);
    while (!m_stop) {
      m_cv.wait_for(lock, std::chrono::milliseconds(200));
      const auto now = std::chrono::steady_clock::now();
      for (Transfer* t : m_active) {
        if (!t->cut_off.empty()) {
          continue;
        }
        if (t->cancel && t->cancel->load()) {
          t->cut_off = "cancelled";
        } else if (!t->head_done.load()) {
          if (now - t->started > t->head_deadline) {
            t->cut_off = "no response within " +
                         std::to_string(std::chrono::duration_cast<std::chrono::seconds>(t->head_deadline).count()) +
                         " s";
          }
        } else if (t->min_rate > 0 && now - t->window_start >= t->window) {
          const uint64_t got = t->bytes.load() - t->window_bytes;
          const auto secs = std::chrono::duration_cast<std::chrono::seconds>(now - t->window_start).count();
          if (got < t->min_rate * static_cast<uint64_t>(std::max<long long>(secs, 1))) {
            t->cut_off = "transfer too slow: " + std::to_string(got) + " bytes in " + std::to_string(secs) +
                         " s, below the minimum of " + std::to_string(t->min_rate) + " bytes/s";
          }
          t->window_start = now;
          t->window_bytes = t->bytes.load();
        }
        if (!t->cut_off.empty()) {
          t->client->stop();
        }
      }
    }
  }

  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::list<Transfer*> m_active;
  std::thread m_thread;
  bool m_stop = false;
};

// cpp-httplib over one client per origin, reused across requests so that
// keep-alive connections survive (a client is not safe for concurrent use:
// idle clients wait in a pool, busy ones are out of it).
//
// Every hop of a redirect chain is a request of its own, checked as the
// first was: http or https only (a redirect to ftp: or file: is refused,
// never handed to a library that may throw on it), the caller's URL policy,
// and the address policy on the address actually connected to. Credentials
// (Authorization, Cookie) go no further than the origin they were meant for.
class HttpFetcher : public Fetcher {
public:
  Result<FetchResponse> fetch(const std::string& url, const FetchOptions& options,
                              const BodySink& sink) override {
    std::string current = url;
    FetchOptions o = options;
    const std::string& m = o.method;
    std::string first_origin;
    for (int hop = 0; hop <= o.max_redirects; ++hop) {
      auto parsed = parse_url(current);
      if (!parsed) {
        return tl::unexpected(parsed.error());
      }
      const std::string via = hop == 0 ? std::string() : " (redirected from " + url + ")";
      if (parsed->scheme != "http" && parsed->scheme != "https") {
        return make_error(ErrorKind::permanent, "refused: only http and https are followed, not " + current + via);
      }
      std::string why;
      if (o.allow_url && !o.allow_url(*parsed, why)) {
        return make_error(ErrorKind::permanent, "refused: " + why + " (" + current + via + ")");
      }
      if (hop == 0) {
        first_origin = parsed->origin();
      } else if (parsed->origin() != first_origin) {
        for (const char* secret : {"Authorization", "Cookie", "Proxy-Authorization"}) {
          for (auto it = o.headers.begin(); it != o.headers.end();) {
            it = to_lower(it->first) == to_lower(secret) ? o.headers.erase(it) : std::next(it);
          }
        }
      }
      bool redirected = false;
      std::string location;
      auto r = fetch_once(*parsed, o, sink, redirected, location);
      if (!r) {
        if (!via.empty() && r.error().message.find(via) == std::string::npos) {
          return make_error(r.error().kind, r.error().message + via);
        }
        return r;
      }
      if (!redirected || m != "GET") {
        r->final_url = current;
        return r;
      }
      if (location.empty()) {
        return make_error(ErrorKind::permanent,
                          "HTTP " + std::to_string(r->status) + " without Location for " + current);
      }
      current = resolve_redirect(*parsed, location);
    }
    return make_error(ErrorKind::permanent,
                      "more than " + std::to_string(o.max_redirects) + " redirects for " + url);
  }

private:
  std::unique_ptr<httplib::Client> take(const Url& u, const FetchOptions& o) {
    const std::string key = u.origin() + (o.verify_tls ? "" : "#noverify");
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      auto& idle = m_idle[key];
      if (!idle.empty()) {
        auto c = std::move(idle.back());
        idle.pop_back();
        return c;
      }
    }
    auto c = std::make_unique<httplib::Client>(u.origin());
    c->set_keep_alive(true);
    c->set_tcp_nodelay(true);
    c->set_follow_location(false);
    c->set_decompress(true);
    c->enable_server_certificate_verification(o.verify_tls);
    return c;
  }

  void give_back(const Url& u, const FetchOptions& o, std::unique_ptr<httplib::Client> c) {
    const std::string key = u.origin() + (o.verify_tls ? "" : "#noverify");
    std::lock_guard<std::mutex> lock(m_mutex);
    auto& idle = m_idle[key];
    if (idle.size() < 16) {
      idle.push_back(std::move(c));
    }
  }

  // The address to connect to for `u` under the policy, resolved at most
  // every 30 s per host (a lookup per request would cost more than a small
  // transfer); empty with `error` set when there is none.
  PickedAddress address_for(const Url& u, const AddressPolicy& policy) {
    using Clock = std::chrono::steady_clock;
    const std::string key = u.host + "\n" + std::to_string(policy.id());
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      if (auto it = m_resolved.find(key); it != m_resolved.end() && Clock::now() < it->second.first) {
        return it->second.second;
      }
    }
    PickedAddress p = pick_address(u.host, policy);
    if (p.resolved) {
      std::lock_guard<std::mutex> lock(m_mutex);
      if (m_resolved.size() > 4096) {
        m_resolved.clear();
      }
      m_resolved[key] = {Clock::now() + std::chrono::seconds(30), p};
    }
    return p;
  }

  // Our User-Agent, and the source's own headers (credentials included).
  static httplib::Headers request_headers(const FetchOptions& o) {
    httplib::Headers headers{{"User-Agent", "tributary/" + std::string(version())}};
    for (const auto& [k, v] : o.headers) {
      headers.emplace(k, v);
    }
    return headers;
  }

  // A client for `u` (an idle one kept for its origin, or a new one),
  // connecting to the address the policy allows, with the request's
  // timeouts; `pinned` is that address (empty without a policy).
  Result<std::unique_ptr<httplib::Client>> client_for(const Url& u, const FetchOptions& o, std::string& pinned) {
    if (o.addresses) {
      PickedAddress a = address_for(u, *o.addresses);
      if (a.address.empty()) {
        return make_error(a.resolved ? ErrorKind::permanent : ErrorKind::transient, a.error + " (" + u.str() + ")");
      }
      pinned = a.address;
    }
    std::unique_ptr<httplib::Client> client;
    try {
      client = take(u, o);
    } catch (const std::exception& e) {
      return make_error(ErrorKind::permanent, std::string(e.what()) + " (" + u.str() + ")");
    }
    if (!pinned.empty()) {
      // Connect to the address just checked, whatever a second lookup
      // would say (TLS still verifies the name).
      client->set_hostname_addr_map({{bare_host(u.host), pinned}});
    }
    const auto ct = std::chrono::duration_cast<std::chrono::microseconds>(o.connect_timeout).count();
    const auto rt = std::chrono::duration_cast<std::chrono::microseconds>(o.read_timeout).count();
    client->set_connection_timeout(static_cast<time_t>(ct / 1000000), static_cast<time_t>(ct % 1000000));
    client->set_read_timeout(static_cast<time_t>(rt / 1000000), static_cast<time_t>(rt % 1000000));
    return client;
  }

  Result<FetchResponse> fetch_once(const Url& u, const FetchOptions& o, const BodySink& sink,
                                   bool& redirected, std::string& location) {
    const std::string& m = o.method;
    std::string pinned;
    auto connected = client_for(u, o, pinned);
    if (!connected) {
      return tl::unexpected(connected.error());
    }
    std::unique_ptr<httplib::Client> client = std::move(*connected);
    using namespace std::chrono;

    const httplib::Headers headers = request_headers(o);
    FetchResponse resp;
    std::string failure;
    bool stream_body = false;
    bool bodiless = false; // a status that has no content (RFC 9110 6.4.1)
    TransferWatch::Transfer t;
    t.client = client.get();
    t.started = steady_clock::now();
    t.head_deadline = o.connect_timeout + o.read_timeout;
    t.min_rate = o.min_bytes_per_second;
    t.window = o.rate_window;
    t.cancel = o.cancel;
    m_watch.watch(t);
    auto on_head = [&](const httplib::Response& r) {
          t.head_done = true;
          resp.status = r.status;
          for (const auto& [k, v] : r.headers) {
            resp.headers[to_lower(k)] = v;
          }
          stream_body = r.status >= 200 && r.status <= 299;
          // 1xx, 204 and 304 have no content whatever the headers say. The
          // client library would read one until the connection closes when
          // no length is given (a 60 s stall per poll against a server that
          // keeps the connection open), so the request ends here.
          bodiless = (r.status >= 100 && r.status <= 199) || r.status == 204 || r.status == 304;
          if (bodiless) {
            stream_body = false;
            return false;
          }
          return true;
        };
    bool error_body_cut = false;
    auto on_body = [&](const char* data, size_t n) {
          resp.body_bytes += n;
          t.bytes.fetch_add(n, std::memory_order_relaxed);
          if (!stream_body) {
            // An error's body is drained and discarded, up to a limit of
            // its own: the status is the answer, whatever the size of the
            // content asked for (a 503 page longer than the resource is
            // still a 503).
            if (resp.body_bytes > k_max_error_body) {
              error_body_cut = true;
              return false;
            }
            return true;
          }
          if (resp.body_bytes > o.max_body_bytes) {
            failure = "body larger than the limit of " + std::to_string(o.max_body_bytes) + " bytes";
            return false;
          }
          if (!sink(data, n)) {
            failure = "aborted by the receiver";
            return false;
          }
          return true;
        };
    // A POST (WebSub) streams its answer through the same bounded receiver
    // as a GET, and never inflates it: nothing reads more of a WebSub answer
    // than its status. Read whole and gunzipped by the library, one answer
    // of 1 MB that inflated to 1 GiB took the daemon from 23 MB to 1.1 GB
    // at each delivery (#35).
    auto post = [&] {
      httplib::Request req;
      req.method = "POST";
      req.path = u.target;
      req.headers = headers;
      req.set_header("Content-Type", o.content_type);
      req.body = o.body;
      req.response_handler = on_head;
      req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) { return on_body(data, n); };
      client->set_decompress(false);
      auto r = client->send(req);
      client->set_decompress(true);
      return r;
    };
    auto res = m == "POST" ? post() : client->Get(u.target, headers, on_head, on_body);
    m_watch.unwatch(t);
    if (!t.cut_off.empty()) {
      // Cut off by the watch: the connection is shut down, not reusable.
      return make_error(ErrorKind::transient, t.cut_off + " for " + u.str());
    }
    if (!res && (bodiless || error_body_cut) && res.error() == httplib::Error::Canceled) {
      return resp; // not given back: the library leaves a cancelled connection in an unknown state
    }
    if (!res) {
      const auto err = res.error();
      if (!failure.empty()) {
        return make_error(ErrorKind::permanent, failure + " for " + u.str());
      }
      // The connection is in an unknown state: do not return it to the pool.
      ErrorKind kind = err == httplib::Error::SSLServerVerification ? ErrorKind::permanent
                                                                      : ErrorKind::transient;
      return make_error(kind, transport_words(err, u, pinned));
    }
    if (resp.status == 0) {
      // The library calls no response handler for a 204 (it reads no body).
      resp.status = res->status;
      for (const auto& [k, v] : res->headers) {
        resp.headers[to_lower(k)] = v;
      }
    }
    give_back(u, o, std::move(client));
    if (is_redirect(resp.status)) {
      redirected = true;
      location = resp.header("location");
    }
    return resp;
  }

  std::mutex m_mutex;
  std::unordered_map<std::string, std::vector<std::unique_ptr<httplib::Client>>> m_idle;
  std::unordered_map<std::string, std::pair<std::chrono::steady_clock::time_point, PickedAddress>> m_resolved;
  TransferWatch m_watch; // last: destroyed (joined) first
};

} // namespace

std::unique_ptr<Fetcher> make_http_fetcher() { return std::make_unique<HttpFetcher>(); }

} // namespace tributary::sync

#include "sync_engine/fetcher_impl.h"

#include "common/text.h"
#include "common/version.h"

#include <httplib.h>

#include <mutex>
#include <unordered_map>
#include <vector>

namespace tributary::sync {

namespace {

bool is_redirect(int status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

// cpp-httplib over one client per origin, reused across requests so that
// keep-alive connections survive (a client is not safe for concurrent use:
// idle clients wait in a pool, busy ones are out of it).
class HttpFetcher : public Fetcher {
public:
  Result<FetchResponse> fetch(const std::string& url, const FetchOptions& options,
                              const BodySink& sink) override {
    std::string current = url;
    for (int hop = 0; hop <= options.max_redirects; ++hop) {
      auto parsed = parse_url(current);
      if (!parsed) {
        return tl::unexpected(parsed.error());
      }
      bool redirected = false;
      std::string location;
      auto r = fetch_once(*parsed, options, sink, redirected, location);
      if (!r) {
        return r;
      }
      if (!redirected) {
        r->final_url = current;
        return r;
      }
      if (location.empty()) {
        return make_error(ErrorKind::permanent,
                          "GET " + current + ": HTTP " + std::to_string(r->status) + " without Location");
      }
      current = resolve_redirect(*parsed, location);
    }
    return make_error(ErrorKind::permanent, "GET " + url + ": more than " +
                                                std::to_string(options.max_redirects) + " redirects");
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

  Result<FetchResponse> fetch_once(const Url& u, const FetchOptions& o, const BodySink& sink,
                                   bool& redirected, std::string& location) {
    auto client = take(u, o);
    using namespace std::chrono;
    const auto ct = duration_cast<microseconds>(o.connect_timeout).count();
    const auto rt = duration_cast<microseconds>(o.read_timeout).count();
    client->set_connection_timeout(static_cast<time_t>(ct / 1000000), static_cast<time_t>(ct % 1000000));
    client->set_read_timeout(static_cast<time_t>(rt / 1000000), static_cast<time_t>(rt % 1000000));

    httplib::Headers headers{{"User-Agent", "tributary/" + std::string(version())}};
    for (const auto& [k, v] : o.headers) {
      headers.emplace(k, v);
    }
    FetchResponse resp;
    std::string failure;
    bool stream_body = false;
    bool bodiless = false; // a status that has no content (RFC 9110 6.4.1)
    auto res = client->Get(
        u.target, headers,
        [&](const httplib::Response& r) {
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
        },
        [&](const char* data, size_t n) {
          resp.body_bytes += n;
          if (resp.body_bytes > o.max_body_bytes) {
            failure = "body larger than the limit of " + std::to_string(o.max_body_bytes) + " bytes";
            return false;
          }
          if (!stream_body) {
            return true; // drain and discard error bodies
          }
          if (!sink(data, n)) {
            failure = "aborted by the receiver";
            return false;
          }
          return true;
        });
    if (!res && bodiless && res.error() == httplib::Error::Canceled) {
      return resp; // not given back: the library leaves a cancelled connection in an unknown state
    }
    if (!res) {
      const auto err = res.error();
      if (!failure.empty()) {
        return make_error(ErrorKind::permanent, "GET " + u.str() + ": " + failure);
      }
      // The connection is in an unknown state: do not return it to the pool.
      ErrorKind kind = err == httplib::Error::SSLServerVerification ? ErrorKind::permanent
                                                                      : ErrorKind::transient;
      return make_error(kind, "GET " + u.str() + ": " + httplib::to_string(err));
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
};

} // namespace

std::unique_ptr<Fetcher> make_http_fetcher() { return std::make_unique<HttpFetcher>(); }

} // namespace tributary::sync

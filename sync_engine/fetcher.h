#pragma once

#include "common/result.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace tributary::sync {

class AddressPolicy;

// The parts of an absolute URL the fetchers need. Parsing is deliberately
// strict: a scheme, `://`, an authority for http(s), then the rest.
struct Url {
  std::string scheme; // lower-cased
  std::string host;   // lower-cased; empty for file:
  int port = 0;       // explicit or the scheme default
  std::string target; // path + query, at least "/"

  // Scheme, host and port: "https://example.org:8443".
  std::string origin() const;
  std::string str() const { return origin() + target; }
};

// Fails with ErrorKind::usage for anything that is not an absolute URL with
// a scheme we can name.
Result<Url> parse_url(std::string_view text);

// Resolves a Location header (absolute, absolute-path or relative) against
// the URL that returned it.
std::string resolve_redirect(const Url& base, std::string_view location);

struct FetchOptions {
  std::chrono::milliseconds connect_timeout{10000};
  std::chrono::milliseconds read_timeout{60000};
  int max_redirects = 5;
  // Bodies larger than this are cut off with an error (the reader has its
  // own limit on the uncompressed XML).
  uint64_t max_body_bytes = 256ull * 1024 * 1024;
  bool verify_tls = true;
  // Extra request headers (If-None-Match, Authorization, ...). Never logged.
  std::map<std::string, std::string> headers;
  // Ceiling on requests per second to the URL's host, and cap on its
  // concurrent requests (used by RetryingFetcher's HostThrottle); 0 = none
  // (the throttle adapts) and 0 = the throttle's default (8).
  double requests_per_second = 0;
  unsigned max_connections = 0;
  // Called before retrying a request whose body had partly reached the
  // sink; return false to give up instead (the default when unset).
  std::function<bool()> restart;
  // Set from another thread to give up: no new attempt or wait starts, a
  // body being received is cut off, and the fetch fails (transient).
  const std::atomic<bool>* cancel = nullptr;
  // Checked before every request, each redirect hop included: false (with
  // `why`) refuses the URL (permanent). Unset: any URL.
  std::function<bool(const Url&, std::string& why)> allow_url;
  // Checked on the addresses a host resolves to; the connection goes to the
  // very address checked (no second lookup for DNS rebinding to answer).
  // Unset: any address.
  std::shared_ptr<const AddressPolicy> addresses;
  // A transfer that, once its response began, receives fewer than this many
  // bytes per second over any `rate_window` is cut off (transient); 0 =
  // never. The response head must come within `read_timeout` in all: a
  // server dripping a byte a minute holds nothing for long.
  uint64_t min_bytes_per_second = 1000;
  std::chrono::seconds rate_window{30};
  // "GET" (the default) or "POST" with `body` as `content_type` (a WebSub
  // request or notification). A POST is never redirected: a 3xx comes back
  // as the response, and the file: scheme refuses it.
  std::string method = "GET";
  std::string body;
  std::string content_type;
};

struct FetchResponse {
  int status = 0;
  std::string final_url; // after redirects
  std::map<std::string, std::string> headers; // names lower-cased
  uint64_t body_bytes = 0;

  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// Receives the body as it arrives; return false to abort the transfer.
using BodySink = std::function<bool(const char* data, size_t size)>;

// Dereferences a URL and streams its body into `sink`. Only 2xx bodies are
// streamed; other statuses are returned as values for the caller to judge
// (304 for conditional requests, 404 for gone resources). Fails with
// `transient` on network errors and timeouts, `usage` for unsupported
// schemes, `permanent` for redirect loops and oversized bodies.
class Fetcher {
public:
  virtual ~Fetcher() = default;
  virtual Result<FetchResponse> fetch(const std::string& url, const FetchOptions& options,
                                      const BodySink& sink) = 0;
};

// Dispatches on the URL scheme: http and https over cpp-httplib (keep-alive,
// gzip, TLS verification on by default), file for local documents. Other
// schemes fail with ErrorKind::usage.
std::unique_ptr<Fetcher> make_default_fetcher();

// The error a non-2xx status means to a caller that wanted the body:
// not_found for 404/410, transient for 5xx and 429, permanent otherwise;
// the message is "GET <url>: HTTP <status>".
Error status_error(const std::string& url, int status);

} // namespace tributary::sync

#pragma once

#include "common/http/client_address.h"
#include "common/result.h"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// A small HTTP/1.1 server on epoll: a few event loops (one per core) answer
// requests whose answer is at hand (cached documents, cached content) without
// a thread switch, and hand anything that may block (a database query) to a
// worker pool. Written because cpp-httplib's thread-per-connection model
// spent 30% of its time switching between 32 keep-alive connection threads
// and reached 0.6x nginx on small content (bench/RESULTS.md); this one has
// keep-alive, pipelining, HEAD, single byte ranges, sendfile for files,
// request size limits and idle/slow-client timeouts.
namespace tributary::http {

struct Request {
  std::string method;
  std::string target;  // as sent, still percent-encoded
  std::string path;    // target up to '?', still percent-encoded
  std::string query;   // after '?', without it
  int minor_version = 1;
  std::vector<std::pair<std::string, std::string>> headers; // names lower-case
  std::string body;
  // The client's address as the socket gives it (behind a reverse proxy,
  // the proxy's). Empty for a request not read from a socket.
  std::string peer;
  // Who the client is, for per-client limits (ProxyTrust::client_of): the
  // peer, or from a trusted proxy the address it forwarded for; an IPv6
  // client as its /64. Empty where `peer` is.
  std::string client;

  // The first header of that (lower-case) name, or nullptr.
  const std::string* header(std::string_view lower_name) const;
  // Its value, or "" when absent.
  std::string header_value(std::string_view lower_name) const;
};

// Keeps a file open while a response streams it.
struct OpenFile {
  int fd = -1;
  explicit OpenFile(int f) : fd(f) {}
  ~OpenFile();
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
};

struct Response {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  // The body is one of: `body`, a shared string (served without a copy), or
  // a file region (sent with sendfile).
  std::string body;
  std::shared_ptr<const std::string> shared;
  std::shared_ptr<const OpenFile> file;
  size_t offset = 0;  // of `shared` or `file`
  size_t length = 0;  // of `shared` or `file`
  // The server answers a single `Range: bytes=` on a 200 of a shared or file
  // body (206/416) when this is set; If-Range is compared with the ETag.
  bool ranges = false;

  void set_header(std::string name, std::string value);
  void set_body(std::string text, std::string content_type);
  void set_shared(std::shared_ptr<const std::string> bytes, std::string content_type);
  // `size` bytes of `f` from `at`.
  void set_file(std::shared_ptr<const OpenFile> f, size_t size, std::string content_type, size_t at = 0);
  // The body length as sent (before HEAD drops it).
  size_t body_size() const;
};

enum class Disposition {
  done,     // `res` holds the answer
  blocking, // call again on a worker thread (only returned when !can_block)
};

// Answers one request. Called on an event loop with can_block = false; may
// return Disposition::blocking to be called again on a worker (can_block =
// true). Must not throw (a throw answers 500).
using Handler = std::function<Disposition(const Request& req, Response& res, bool can_block)>;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;            // 0: any free port (see Server::port())
  int loops = 0;              // event-loop threads; 0: one per core
  int workers = 16;           // threads for handlers that block
  size_t max_header_bytes = 32 * 1024;
  size_t max_body_bytes = 256 * 1024;    // POST, PUT and PATCH only; other methods take none
  size_t max_connections = 10000;
  size_t max_connections_per_client = 512; // per client address; 0: no cap
  std::chrono::seconds idle_timeout{60};    // keep-alive connection with nothing to do
  std::chrono::seconds request_timeout{30}; // to send a whole request once started
  std::chrono::seconds write_timeout{60};   // without any progress writing
  std::string server_name = "tributary";
  // Reverse proxies whose Forwarded / X-Forwarded-For name the client
  // (config `trusted_proxies`); none by default.
  ProxyTrust proxies;
};

class Server {
public:
  Server(ServerOptions options, Handler handler);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds (backlog 1024) and starts the loops and workers; an io error
  // naming the address when it cannot bind. Ignores SIGPIPE process-wide
  // (sendfile would otherwise raise it on a peer that went away).
  Result<void> start();
  int port() const;
  // Stops accepting, lets responses in flight finish (up to 3 s), joins.
  void stop();

private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

// "200 OK" etc.: the reason phrase of a status.
std::string_view reason_phrase(int status);
// An RFC 7231 IMF-fixdate, e.g. "Sun, 06 Nov 1994 08:49:37 GMT".
std::string http_date(std::time_t t);
// Parses an IMF-fixdate; nullopt otherwise.
std::optional<std::time_t> parse_http_date(const std::string& s);

// A single byte range of a body of `size` bytes: nullopt when `value` is not
// one satisfiable-or-not `bytes=` range we answer (then the whole body is
// sent); {0,0,false} when it is unsatisfiable (416).
struct ByteRange {
  size_t first = 0;
  size_t length = 0;
  bool satisfiable = true;
};
std::optional<ByteRange> parse_range(std::string_view value, size_t size);

// Parses one request from the front of `data` (what a connection received,
// from where the last request ended). Returns 0 when a whole request was
// parsed into `req` (`consumed`: its bytes, body included), -1 when more
// bytes are needed, or else the status to refuse it with (400, 413, 431,
// 501, 505). Untrusted input: fuzzed (tests/fuzz).
int parse_request(std::string_view data, size_t max_header_bytes, size_t max_body_bytes, Request& req,
                  size_t& consumed);

} // namespace tributary::http

#pragma once

#include "sync_engine/fetcher.h"
#include "sync_engine/host_throttle.h"
#include "sync_engine/pipeline_bursts.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace tributary::sync {

class AddressPolicy;

// One GET of a pipelined batch, and what came of it.
struct PipelinedGet {
  std::string target; // path and query, as on the request line

  // Set by PipelinedOrigin::run():
  bool answered = false; // a whole response came; otherwise the GET is the caller's to make again
  int status = 0;
  std::string content_type;
  std::string content_encoding; // as sent; empty for none
  std::string body;             // a 2xx answer's content (others are read and dropped)
};

struct PipelineSettings {
  std::chrono::milliseconds connect_timeout{10000};
  std::chrono::milliseconds read_timeout{60000}; // for the next response to begin, or bytes to keep coming
  uint64_t max_body_bytes = 256 * 1024;           // a larger answer ends the batch; its GET goes back
  unsigned depth = 16;                            // requests in flight on one connection at most
  // How long a pipelined request's answer may take to begin after the one
  // before it ended before the origin is taken not to answer pipelined
  // requests (some servers read one request and drop the rest of what came
  // with it); then the request goes the ordinary way, with the full timeout.
  std::chrono::milliseconds pipelined_stall{5000};
  // Request headers besides Host, User-Agent and Accept-Encoding.
  std::vector<std::pair<std::string, std::string>> headers;
  std::shared_ptr<const AddressPolicy> addresses; // unset: any address
  const std::atomic<bool>* cancel = nullptr;
  // The throttle's arguments (see HostThrottle::start).
  unsigned max_connections = 0;
  double requests_per_second = 0;
};

// Small GETs to one plain-http origin over keep-alive connections with
// several requests in flight on each (HTTP/1.1 pipelining, RFC 9112 9.3.2).
// A baseline of small resources spends most of its time in the kernel's
// round trip per request (a send that wakes the server, a poll, a recv,
// on each side); sending the next requests while the first is answered
// lets one send and one recv carry several.
//
// It is a fast path and nothing more: every request whose answer is not a
// whole, well-framed response is handed back unanswered, for the caller to
// make the ordinary way (HttpFetcher), which is what decides errors.
// - Politeness is the throttle's, as for every other request: each GET
//   takes a HostThrottle ticket before it is sent (the first of a batch
//   waits for one, the rest only take those free now) and gives it back
//   with its answer, so the window caps requests in flight across
//   connections exactly as before, and 429/503/Retry-After cut it.
// - A connection the server closes (keepalive_requests, "Connection:
//   close") is replaced and the GETs it left unanswered are sent again
//   (they are idempotent). A server that mis-frames, stalls or drops
//   pipelined requests turns pipelining off for the origin; the
//   requests go the ordinary way from then on.
// - Only identity-coded answers are kept (Accept-Encoding: identity);
//   bodies are bounded by max_body_bytes; the address policy is applied to
//   the address connected to.
class PipelinedOrigin {
public:
  // `origin` is "http://host[:port]"; `throttle_key` the HostThrottle host.
  PipelinedOrigin(Url origin, PipelineSettings settings, std::shared_ptr<HostThrottle> throttle);
  ~PipelinedOrigin();
  PipelinedOrigin(const PipelinedOrigin&) = delete;
  PipelinedOrigin& operator=(const PipelinedOrigin&) = delete;

  // Makes the GETs of `batch` on one connection (an idle one, or a new
  // one). Thread-safe: concurrent calls use different connections.
  void run(std::vector<PipelinedGet>& batch);

  // False once the origin mishandled pipelining (or refused a connection):
  // callers stop offering it work.
  bool usable() const { return !m_broken.load(); }
  // Whether the origin answers fast enough for bursts (see BurstSizer);
  // true until a burst says otherwise.
  bool fast() const { return m_bursts.fast(); }
  // Whether the path to it is long (every burst's round trip 10 ms or
  // more): bursts on two connections are one or two round trips' worth of
  // answers, so a far origin is asked on as many connections as the
  // window allows, each with its bursts.
  bool far() const { return m_bursts.far(); }
  std::string broken_reason() const;

  struct Conn; // one connection and what it received

private:
  class ConnectionRun; // one connection's part of run()
  std::unique_ptr<Conn> take();
  void give_back(std::unique_ptr<Conn> c);
  void set_broken(const std::string& why); // for a day, every run (the process-wide verdict)
  void retire(const std::string& why);     // for this object's life (one run) only

  Url m_origin;
  std::string m_key; // origin(), the throttle's host
  PipelineSettings m_settings;
  std::shared_ptr<HostThrottle> m_throttle;
  std::string m_request_head; // the header lines after the request line
  std::atomic<bool> m_broken{false};
  BurstSizer m_bursts; // how large its bursts are (after m_settings: sized from its depth)
  mutable std::mutex m_mutex;
  std::string m_broken_reason;
  std::vector<std::unique_ptr<Conn>> m_idle;
};

// What the pipelined path did in this process, for /metrics.
struct PipelineStats {
  uint64_t answered = 0;  // GETs whose answers stood (whole bursts)
  uint64_t hosts_on = 0;  // origins found to answer pipelined requests
  uint64_t hosts_off = 0; // origins where pipelining is off (for a day)
};
PipelineStats pipeline_stats();

} // namespace tributary::sync

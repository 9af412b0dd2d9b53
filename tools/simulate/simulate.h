#pragma once

#include "common/result.h"

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>

namespace tributary::agg {

struct SimulateOptions {
  std::string host = "127.0.0.1";
  int port = 8090;             // 0: any free port
  std::string public_url;      // default http://host:port
  uint64_t resources = 1000;   // at the start
  double change_rate = 1;      // changes per second (create, update, delete)
  uint64_t seed = 1;
  size_t size = 1024;          // bytes per resource
  size_t part_size = 1000;     // changes per Change List part; full parts close
  bool mirror = false;         // `duplicate` links to /mirror/... on the same server
  uint64_t max_changes = 0;    // stop changing after this many (0: never stop)
  // A WebSub hub of its own (/hub) for a Change Notification channel the
  // Capability List offers: every change is pushed to the subscribers at
  // once (subscriptions in memory, intent verified, signed when a secret
  // is given). For tests and benchmarks: it calls back any address.
  bool hub = false;
};

// A changing ResourceSync Source held in memory, for demos, tests and
// benchmarks: Source Description, Capability List, Resource List (an index
// past 50,000 entries), a Change List index whose parts close every
// `part_size` changes, a Resource Dump (packages of 10,000, rebuilt at most
// every 30 s) and a Change Dump (a package per closed part), and the
// resources with md5 hashes. Changes happen at
// `change_rate` per second; which resource changes how is a function of the
// seed alone. Documents are written with the resourcesync writer the
// republisher uses.
class Simulator {
public:
  explicit Simulator(SimulateOptions options);
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  Result<void> start();
  int port() const;
  std::string base_url() const;
  // Applies `n` changes now (besides those the rate makes).
  void change(uint64_t n);
  // Changes so far, and resources live now.
  uint64_t changes() const;
  uint64_t live() const;
  void stop();

private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

// `tributary simulate`: runs a Simulator until SIGINT/SIGTERM. Returns 0, or 1
// when it cannot listen.
int run_simulate(const SimulateOptions& options, std::ostream& out, std::ostream& err);

} // namespace tributary::agg

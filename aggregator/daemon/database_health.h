#pragma once

// Whether the daemon can reach its database, as runs and readiness checks
// find it: since when it cannot, and why. Said once in the log when it is
// lost, once a minute while it stays lost, and once when it answers again;
// /readyz, the status API (and so the status page) say since when.

#include "common/result.h"

#include <chrono>
#include <mutex>
#include <optional>
#include <string>

namespace tributary::agg {

class DatabaseHealth {
public:
  using Clock = std::chrono::system_clock;

  // A run or a read found the database unreachable (`why`: its error).
  void lost(const std::string& why);
  // A run or a read reached it. True when it had been lost (the caller
  // runs again what waited for it).
  bool answered();

  struct Outage {
    Clock::time_point since;
    std::string why;
  };
  std::optional<Outage> outage() const;
  // "the database is unreachable since 2026-...Z" (empty when it is not).
  std::string describe() const;
  // An error of a read for a client: `e` itself, or, for one of
  // ErrorKind::database, the outage (recorded with lost()) as describe()
  // says it: the database's own words stay in the log.
  std::string for_client(const Error& e);

private:
  mutable std::mutex m_mutex;
  std::optional<Outage> m_outage;
  std::chrono::steady_clock::time_point m_said{};
};

} // namespace tributary::agg

#include "aggregator/daemon/database_health.h"

#include "common/log.h"
#include "resourcesync/datetime.h"

namespace tributary::agg {

namespace {
constexpr std::chrono::minutes k_repeat{1};

std::string format(DatabaseHealth::Clock::time_point t) {
  return rs::format_w3c_datetime(std::chrono::time_point_cast<std::chrono::microseconds>(t));
}
} // namespace

void DatabaseHealth::lost(const std::string& why) {
  std::lock_guard lock(m_mutex);
  const auto now = std::chrono::steady_clock::now();
  if (!m_outage) {
    m_outage = Outage{Clock::now(), why};
    m_said = now;
    log::warn("", "the database is unreachable: runs wait for it, and start again as soon as it answers",
              {{"error", why}});
    return;
  }
  m_outage->why = why;
  if (now - m_said >= k_repeat) {
    m_said = now;
    log::warn("", "the database is still unreachable", {{"since", format(m_outage->since)}, {"error", why}});
  }
}

bool DatabaseHealth::answered() {
  std::lock_guard lock(m_mutex);
  if (!m_outage) {
    return false;
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - m_outage->since).count();
  log::info("", "the database answers again", {{"unreachable_seconds", std::to_string(seconds)}});
  m_outage.reset();
  return true;
}

std::optional<DatabaseHealth::Outage> DatabaseHealth::outage() const {
  std::lock_guard lock(m_mutex);
  return m_outage;
}

std::string DatabaseHealth::describe() const {
  auto o = outage();
  return o ? "the database is unreachable since " + format(o->since) : std::string();
}

std::string DatabaseHealth::for_client(const Error& e) {
  if (e.kind != ErrorKind::database) {
    return e.message;
  }
  lost(e.message);
  return describe();
}

} // namespace tributary::agg

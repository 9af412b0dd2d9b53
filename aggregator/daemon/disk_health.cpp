#include "aggregator/daemon/disk_health.h"

#include "common/log.h"
#include "resourcesync/datetime.h"

#include <sys/statvfs.h>

#include <algorithm>

namespace tributary::agg {

namespace {
constexpr std::chrono::minutes k_repeat{1};
constexpr std::chrono::seconds k_look_every{1};
constexpr uint64_t k_mib = 1024 * 1024;

std::string format(DiskHealth::Clock::time_point t) {
  return rs::format_w3c_datetime(std::chrono::time_point_cast<std::chrono::microseconds>(t));
}
} // namespace

void DiskHealth::set_dir(std::filesystem::path dir) {
  std::lock_guard lock(m_mutex);
  m_dir = std::move(dir);
}

std::optional<std::pair<uint64_t, uint64_t>> DiskHealth::free_and_size() const {
  struct statvfs st {};
  if (m_dir.empty() || ::statvfs(m_dir.c_str(), &st) != 0) {
    return std::nullopt;
  }
  return std::make_pair(static_cast<uint64_t>(st.f_bavail) * st.f_frsize,
                        static_cast<uint64_t>(st.f_blocks) * st.f_frsize);
}

void DiskHealth::full(const std::string& why) {
  std::lock_guard lock(m_mutex);
  const auto space = free_and_size();
  const auto now = std::chrono::steady_clock::now();
  if (!m_condition) {
    m_condition = Condition{Clock::now(), why, space ? space->first : 0};
    m_free_when_full = space ? space->first : 0;
    m_said = now;
    m_looked = now;
    log::warn("", "the data directory's disk is full: every run is paused until space returns",
              {{"data_dir", m_dir.string()},
               {"free_bytes", std::to_string(m_condition->free_bytes)},
               {"error", why}});
    return;
  }
  m_condition->why = why;
  // A run that filled it again after space returned, just now: what is free now is the new floor.
  m_free_when_full = std::min(m_free_when_full, space ? space->first : 0);
}

bool DiskHealth::space_returned() {
  std::lock_guard lock(m_mutex);
  if (!m_condition) {
    return false;
  }
  const auto now = std::chrono::steady_clock::now();
  if (now - m_looked < k_look_every) {
    return false;
  }
  m_looked = now;
  const auto space = free_and_size();
  if (!space) {
    return false;
  }
  m_condition->free_bytes = space->first;
  const uint64_t margin = std::max<uint64_t>(k_mib, std::min<uint64_t>(64 * k_mib, space->second / 20));
  if (space->first >= m_free_when_full + margin) {
    const double seconds = std::chrono::duration<double>(Clock::now() - m_condition->since).count();
    log::info("", "space returned to the data directory's disk: runs resume",
              {{"free_bytes", std::to_string(space->first)}, {"full_seconds", std::to_string(seconds)}});
    m_condition.reset();
    return true;
  }
  if (now - m_said >= k_repeat) {
    m_said = now;
    log::warn("", "the data directory's disk is still full: runs stay paused",
              {{"since", format(m_condition->since)}, {"free_bytes", std::to_string(space->first)}});
  }
  return false;
}

std::optional<DiskHealth::Condition> DiskHealth::condition() const {
  std::lock_guard lock(m_mutex);
  return m_condition;
}

} // namespace tributary::agg

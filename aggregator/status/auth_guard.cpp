#include "aggregator/status/auth_guard.h"

namespace tributary::agg {

int64_t AuthGuard::blocked_for(const std::string& client, Clock::time_point now) {
  std::lock_guard lock(m_mutex);
  auto it = m_clients.find(client);
  if (it == m_clients.end()) {
    return 0;
  }
  if (now - it->second.since >= m_window) {
    m_clients.erase(it);
    return 0;
  }
  if (it->second.failures < m_max) {
    return 0;
  }
  return std::chrono::duration_cast<std::chrono::seconds>(it->second.since + m_window - now).count() + 1;
}

std::pair<bool, uint32_t> AuthGuard::failed(const std::string& client, Clock::time_point now) {
  std::lock_guard lock(m_mutex);
  if (m_clients.size() >= m_max_clients && !m_clients.count(client)) {
    // Full: forget the windows that have passed; if none has, the oldest.
    for (auto it = m_clients.begin(); it != m_clients.end();) {
      it = now - it->second.since >= m_window ? m_clients.erase(it) : std::next(it);
    }
    if (m_clients.size() >= m_max_clients) {
      auto oldest = m_clients.begin();
      for (auto it = m_clients.begin(); it != m_clients.end(); ++it) {
        if (it->second.since < oldest->second.since) {
          oldest = it;
        }
      }
      m_clients.erase(oldest);
    }
  }
  Count& c = m_clients[client];
  if (c.failures == 0 || now - c.since >= m_window) {
    c = Count{now, 0};
  }
  ++c.failures;
  return {c.failures == 1 || c.failures % 100 == 0, c.failures};
}

} // namespace tributary::agg

#include "sync_engine/log_window.h"

// What a baseline defers while a Change List is followed (log_window.h).
namespace tributary::sync {

bool LogWindow::defer(const store::ChangeRecord& c) {
  if (!c.upstream_datetime || *c.upstream_datetime <= m_after || m_deferred.size() >= m_max) {
    return false;
  }
  m_deferred.push_back(c);
  return true;
}

std::vector<store::ChangeRecord> LogWindow::take() {
  std::vector<store::ChangeRecord> out;
  out.swap(m_deferred);
  return out;
}

} // namespace tributary::sync

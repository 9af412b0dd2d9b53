#include "common/http/router.h"

namespace tributary::http {

void Router::mount(std::string path, Handler handler) { m_mounts.emplace_back(std::move(path), std::move(handler)); }

void Router::fallback(Handler handler) { m_fallback = std::move(handler); }

const Handler* Router::find(const std::string& path) const {
  for (const auto& [mount, handler] : m_mounts) {
    const bool prefix = !mount.empty() && mount.back() == '/';
    if (path == mount || (prefix && path.compare(0, mount.size(), mount) == 0)) {
      return &handler;
    }
  }
  return m_fallback ? &m_fallback : nullptr;
}

Disposition Router::operator()(const Request& req, Response& res, bool can_block) const {
  if (const Handler* h = find(req.path)) {
    return (*h)(req, res, can_block);
  }
  res.status = 404;
  return Disposition::done;
}

} // namespace tributary::http

#pragma once

#include "common/http/server.h"

#include <string>
#include <vector>

namespace tributary::http {

// Several handlers on one server, side by side: the daemon mounts its status
// API beside the republisher's routes. A request goes to the first mount
// whose path is the request's path exactly, or, for a mount path ending in
// '/', a prefix of it; else to the fallback (404 when there is none).
class Router {
public:
  void mount(std::string path, Handler handler);
  void fallback(Handler handler);

  // The handler for one request path (percent-encoded, as sent).
  const Handler* find(const std::string& path) const;
  Disposition operator()(const Request& req, Response& res, bool can_block) const;

private:
  std::vector<std::pair<std::string, Handler>> m_mounts;
  Handler m_fallback;
};

} // namespace tributary::http

#include "common/result.h"

#include <cerrno>
#include <cstring>
#include <string>

namespace tributary {

std::string_view to_string(ErrorKind kind) {
  switch (kind) {
  case ErrorKind::transient:
    return "transient";
  case ErrorKind::permanent:
    return "permanent";
  case ErrorKind::invalid_document:
    return "invalid_document";
  case ErrorKind::not_found:
    return "not_found";
  case ErrorKind::conflict:
    return "conflict";
  case ErrorKind::io:
    return "io";
  case ErrorKind::usage:
    return "usage";
  case ErrorKind::database:
    return "database";
  }
  return "unknown";
}

bool is_disk_full(const Error& e) {
  if (e.kind != ErrorKind::io) {
    return false;
  }
  static const std::string no_space = std::strerror(ENOSPC);
  static const std::string quota = std::strerror(EDQUOT);
  return e.message.find(no_space) != std::string::npos || e.message.find(quota) != std::string::npos;
}

Error Error::with_context(std::string_view context) const {
  Error e = *this;
  e.message = std::string(context) + ": " + message;
  return e;
}

} // namespace tributary

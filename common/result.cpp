#include "common/result.h"

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

Error Error::with_context(std::string_view context) const {
  Error e = *this;
  e.message = std::string(context) + ": " + message;
  return e;
}

} // namespace tributary

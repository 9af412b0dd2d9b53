#pragma once

#include <tl/expected.hpp>

#include <string>
#include <string_view>
#include <utility>

namespace tributary {

// What a caller should do about a failure. Kept small on purpose: each kind
// maps to one decision (retry, give up, report the document, ...).
enum class ErrorKind {
  transient,        // retry later (network error, HTTP 503, lock timeout)
  permanent,        // retrying will not help (HTTP 403, bad configuration)
  invalid_document, // a document or package broke the protocol
  not_found,        // the thing asked for does not exist
  conflict,         // concurrent change or constraint violation
  io,               // local file system or resource failure
  usage,            // the caller asked for something that makes no sense
  database,         // the database could not be reached (connection lost or refused)
};

std::string_view to_string(ErrorKind kind);

struct Error {
  ErrorKind kind = ErrorKind::permanent;
  std::string message;

  // Returns a copy whose message is prefixed with `context: `, used when an
  // error crosses a layer ("source 'arxiv': GET https://...: HTTP 503").
  Error with_context(std::string_view context) const;
};

template <typename T> using Result = tl::expected<T, Error>;

// Whether a local file system error is the disk (or the quota) being full:
// a condition of the node, not of what was being written. The system's own
// text (strerror of ENOSPC or EDQUOT) is in every such message.
bool is_disk_full(const Error& e);

inline tl::unexpected<Error> make_error(ErrorKind kind, std::string message) {
  return tl::unexpected<Error>(Error{kind, std::move(message)});
}

} // namespace tributary

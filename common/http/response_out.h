#pragma once

// A response on its way out of the server (server.cpp): its head made, a
// range applied, and its bytes written as the socket takes them (sendmsg,
// and sendfile for a file body). No event loop here: the loop calls these.
#include "common/http/server.h"

#include <chrono>
#include <string>
#include <string_view>

namespace tributary::http::detail {

// One response on its way out: the serialized head, then the body.
struct Outgoing {
  std::string head;
  Response res;     // holds the body (owned, shared or file)
  bool send_body = true;
  size_t head_sent = 0;
  size_t body_sent = 0;
  bool close_after = false;
  std::chrono::steady_clock::time_point parsed_at; // when its request was read
  std::string what;                                 // "GET /path", for the slow-response log

  const char* body_data() const { return res.shared ? res.shared->data() + res.offset : res.body.data(); }
  size_t body_len() const { return send_body ? res.body_size() : 0; }
};

// `res` made ready to send as the answer to `req`: a single byte range
// applied where the response allows ranges (206, 416), no body where the
// status has none, and the head serialized. `keep_alive` says whether the
// connection may stay open, and becomes false where this response must end
// it (a 304); `close_after` is set from it.
Outgoing make_outgoing(const Request& req, Response res, bool& keep_alive, std::string_view server_name,
                       std::string_view date);

// Applies a `Range: bytes=` request header to a 200 of a shared or file
// body (If-Range compared with the ETag).
void apply_range(const Request& req, Response& res);

enum class Sent {
  all,     // the whole response went out
  blocked, // the socket takes no more now (EAGAIN)
  failed,  // the connection is broken, or the file shrank: close it
};
// Writes what the socket takes of `o`; `progressed` is set when a byte went.
Sent send_some(int fd, Outgoing& o, bool& progressed);

// Logs a response whose last byte went out more than 5 s after its request
// was read (at most one line a second, with how many more).
void note_slow(const Outgoing& o, const std::string& peer);

} // namespace tributary::http::detail

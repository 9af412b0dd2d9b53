#pragma once

#include <string>

// How fetch errors are worded: the kind and cause first, in plain words,
// then what they concern once ("connection refused: 127.0.0.1:47199 (5
// attempts over 12 s)", "HTTP 404 for https://example.org/caps.xml"). The
// CLI, explore, the runs, the API and the page all show these words.
namespace tributary::sync {

// "HTTP 404 for <url>".
std::string http_status_words(int status, const std::string& url);

// Why a TCP connection to `host`:`port` (a name or an address) failed, as
// a fresh attempt finds it within `timeout_ms`: "connection refused", "host
// unreachable", "network unreachable", "connection timed out", or "cannot
// connect" when it now succeeds or fails otherwise. (The HTTP library says
// only "Connection".)
std::string connect_failure(const std::string& host, int port, int timeout_ms);

// "host:port" of an origin, as errors name it ("127.0.0.1:47199",
// "[::1]:8080", "example.org:443").
std::string authority_of(const std::string& host, int port);

} // namespace tributary::sync

// error_kind(): how a source's page groups its errors. The reasons are the
// engine's own words (fetcher, content fetch, dump reader, sync).
#include "aggregator/status_json.h"

#include <doctest/doctest.h>

using tributary::agg::error_kind;

TEST_CASE("error_kind: the engine's reasons fall into the kinds a source's page groups by") {
  CHECK(error_kind("GET http://example.org/a: HTTP 404") == "HTTP 404");
  CHECK(error_kind("http://example.org/a: HTTP 410 (failed before: attempt 2)") == "HTTP 410");
  CHECK(error_kind("GET http://example.org/a: HTTP 503") == "HTTP 503");
  CHECK(error_kind("http://example.org/a: hash mismatch, md5: expected 00, got 11") == "hash mismatch");
  CHECK(error_kind("package hash differs from the dump's rs:md, sha-256: expected 00, got 11") == "hash mismatch");
  CHECK(error_kind("GET http://example.org/a: transfer too slow: 10 bytes in 30 s") == "timeout");
  CHECK(error_kind("GET http://example.org/a: body larger than the limit of 10 bytes") == "too large");
  CHECK(error_kind("GET http://10.0.0.1/a: refused: a private address") == "refused");
  CHECK(error_kind("GET http://example.org/: Connection (after 5 attempts)") == "connection");
  CHECK(error_kind("GET http://nowhere.invalid/: cannot resolve host nowhere.invalid: Name or service not known") ==
        "connection");
  CHECK(error_kind("source 's' is being synced by another run (host pid 1)") == "busy");
  CHECK(error_kind("http://example.org/p.zip: not a readable ZIP file (Not a zip archive)") == "invalid document");
  CHECK(error_kind("http://example.org/cl.xml: the Change Dump starts after the last change applied") == "other");
  CHECK(error_kind("http://example.org/rl.xml: not an absolute URI") == "invalid document");
  CHECK(error_kind("entry rejected (http://example.org/rl.xml line 3): '2026-13' is not a W3C datetime (month)") ==
        "rejected entry");
  CHECK(error_kind("something nobody expected") == "other");
  // A status code inside a URL is not a status.
  CHECK(error_kind("http://example.org/HTTP/404.txt: hash mismatch, md5") == "hash mismatch");
}

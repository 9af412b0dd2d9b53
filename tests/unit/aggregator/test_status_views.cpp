// The status page's judgements: error_kind() (how a source's page groups its
// errors; the reasons are the engine's own words) and sync_state_of() (what
// the summary line counts a source as).
#include "aggregator/status/json.h"

#include <doctest/doctest.h>

using tributary::agg::error_kind;
using tributary::agg::sync_state_of;
namespace agg = tributary::agg;
namespace store = tributary::store;

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
  // The words the fetchers use now: the cause first.
  CHECK(error_kind("HTTP 404 for http://example.org/caps.xml") == "HTTP 404");
  CHECK(error_kind("HTTP 503 for http://example.org/a (5 attempts over 12 s)") == "HTTP 503");
  CHECK(error_kind("connection refused: 127.0.0.1:47199 (5 attempts over 12 s)") == "connection");
  CHECK(error_kind("connection timed out: example.org:443 (3 attempts over 30 s)") == "timeout");
  CHECK(error_kind("TLS certificate not trusted: self-signed.example:443") == "TLS");
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

TEST_CASE("sync_state_of: disabled, failing, lagging for each reason, else in sync") {
  using namespace std::chrono_literals;
  const agg::Time now = std::chrono::system_clock::now();
  tributary::sync::SourceConfig cfg;
  cfg.interval = std::chrono::seconds(600);
  agg::Scheduler::View v;
  v.next_run = now + 300s;
  store::SourceStats st;
  st.last_success = store::RunInfo{};
  CHECK(sync_state_of(v, cfg, &st, 0, now) == std::pair<std::string, std::string>{"in_sync", ""});
  // Overdue by more than its interval, not running: its run waits for a slot.
  v.next_run = now - 601s;
  CHECK(sync_state_of(v, cfg, &st, 0, now).first == "lagging");
  CHECK(sync_state_of(v, cfg, &st, 0, now).second == "overdue by 601 s (its run waits for a free slot)");
  v.running = store::RunMode::incremental; // running: not waiting
  CHECK(sync_state_of(v, cfg, &st, 0, now).first == "in_sync");
  v.next_run = now - 599s;
  v.running.reset();
  CHECK(sync_state_of(v, cfg, &st, 0, now).first == "in_sync"); // late, within its interval
  // A short interval still allows a minute.
  cfg.interval = std::chrono::seconds(1);
  v.next_run = now - 59s;
  CHECK(sync_state_of(v, cfg, &st, 0, now).first == "in_sync");
  v.next_run = now + 1s;
  CHECK(sync_state_of(v, cfg, &st, 7, now).second == "7 change(s) left to apply in the running job");
  st.retrying = 4;
  CHECK(sync_state_of(v, cfg, &st, 0, now).second == "4 resource(s) wait for a retry of their content");
  st.retrying = 0;
  st.last_success.reset();
  CHECK(sync_state_of(v, cfg, &st, 0, now).second == "no successful run yet");
  CHECK(sync_state_of(v, cfg, nullptr, 0, now).second == "no successful run yet");
  v.consecutive_failures = 3;
  CHECK(sync_state_of(v, cfg, &st, 0, now) == std::pair<std::string, std::string>{"failing", "3 failed run(s) in a row"});
  v.state = agg::SourceState::disabled;
  CHECK(sync_state_of(v, cfg, &st, 0, now).first == "disabled");
}

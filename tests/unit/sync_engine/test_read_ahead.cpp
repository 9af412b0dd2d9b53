// The pieces a baseline's pipeline stands on: reading a list one chunk ahead
// of its use, and the set of URIs a run has committed to an empty feed.
#include "sync_engine/read_ahead.h"
#include "sync_engine/uri_bloom.h"

#include "tests/common/scratch_dir.h"

#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

using namespace tributary;
using namespace tributary::sync;

namespace {

// Serves one body for any URL.
class BodyFetcher : public Fetcher {
public:
  explicit BodyFetcher(std::string body) : m_body(std::move(body)) {}
  Result<FetchResponse> fetch(const std::string& url, const FetchOptions&, const BodySink& sink) override {
    FetchResponse r;
    r.status = 200;
    r.final_url = url;
    sink(m_body.data(), m_body.size());
    r.body_bytes = m_body.size();
    return r;
  }

private:
  std::string m_body;
};

// A Resource List of `n` entries; those whose index is in `bad` have no
// usable <loc> (an empty one), so the reader rejects them.
std::string resource_list(int n, const std::vector<int>& bad = {}) {
  std::string xml = R"(<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">
<rs:md capability="resourcelist" at="2026-01-01T00:00:00Z"/>
)";
  for (int i = 0; i < n; ++i) {
    const bool rejected = std::find(bad.begin(), bad.end(), i) != bad.end();
    xml += "<url><loc>" + (rejected ? std::string() : "http://example.org/r/" + std::to_string(i)) +
           "</loc></url>\n";
  }
  return xml + "</urlset>\n";
}

std::unique_ptr<SpooledDocument> spooled(const std::string& body, const std::filesystem::path& dir) {
  BodyFetcher f(body);
  auto doc = spool_document(f, "http://example.org/rl.xml", FetchOptions{}, dir);
  REQUIRE(doc);
  return std::move(*doc);
}

// Records what it was handed, in order; throws at entry `throw_at`.
struct Recorder : rs::DocumentHandler {
  std::vector<std::string> seen; // "e:<loc>" or "r:<line>"
  int throw_at = -1;
  int entries = 0;
  void on_entry(rs::Entry&& e, uint64_t) override {
    if (entries++ == throw_at) {
      throw std::runtime_error("handler failed");
    }
    seen.push_back("e:" + e.loc);
  }
  void on_rejected_entry(rs::Entry&&, uint64_t line, const std::string&) override {
    seen.push_back("r:" + std::to_string(line));
  }
};

} // namespace

TEST_CASE("read_ahead: hands on every entry and rejected entry in document order, as reading directly does") {
  test::ScratchDir dir("read-ahead");
  auto doc = spooled(resource_list(2503, {0, 999, 1000, 2502}), dir.path);
  Recorder direct;
  REQUIRE(doc->read(direct));
  for (size_t chunk : {1, 7, 1000, 5000}) {
    CAPTURE(chunk);
    Recorder ahead;
    auto r = read_ahead(*doc, ahead, chunk, [] { return false; });
    REQUIRE(r);
    CHECK(r->entries == doc->summary().entries);
    CHECK(ahead.seen == direct.seen);
  }
  CHECK(direct.seen.size() == 2503);
}

TEST_CASE("read_ahead: stops after the chunk for which the caller says stop, and passes a handler's exception on") {
  test::ScratchDir dir("read-ahead");
  auto doc = spooled(resource_list(5000), dir.path);
  Recorder h;
  int chunks = 0;
  auto r = read_ahead(*doc, h, 100, [&] { return ++chunks == 3; });
  CHECK_FALSE(r);
  CHECK(h.seen.size() == 300);
  CHECK(h.seen.back() == "e:http://example.org/r/299");

  Recorder failing;
  failing.throw_at = 1234;
  CHECK_THROWS_WITH(read_ahead(*doc, failing, 100, [] { return false; }), "handler failed");
  CHECK(failing.seen.size() == 1234);
}

TEST_CASE("UriBloom: never forgets a URI, and rarely claims one it was not given") {
  UriBloom f;
  CHECK_FALSE(f.maybe_contains("http://example.org/r/0"));
  const int n = 300000; // past several stages
  for (int i = 0; i < n; ++i) {
    f.insert("http://example.org/r/" + std::to_string(i));
  }
  CHECK(f.size() == static_cast<size_t>(n));
  int missing = 0;
  for (int i = 0; i < n; ++i) {
    missing += f.maybe_contains("http://example.org/r/" + std::to_string(i)) ? 0 : 1;
  }
  CHECK(missing == 0);
  int wrong = 0;
  const int probes = 200000;
  for (int i = 0; i < probes; ++i) {
    wrong += f.maybe_contains("http://example.org/other/" + std::to_string(i)) ? 1 : 0;
  }
  MESSAGE(wrong << " of " << probes << " URIs never inserted answered 'perhaps'");
  CHECK(wrong < probes / 200); // under 0.5%
}

TEST_CASE("read_ahead: a smaller first chunk, then full ones, as ChunkHandler::set_first_chunk flushes them") {
  test::ScratchDir dir("read-ahead");
  auto doc = spooled(resource_list(2300), dir.path);
  // The chunks as the handler is handed them: counted at each stop check.
  Recorder h;
  std::vector<size_t> sizes;
  size_t before = 0;
  auto r = read_ahead(*doc, h, 1000, [&] {
    sizes.push_back(h.seen.size() - before);
    before = h.seen.size();
    return false;
  }, 125);
  REQUIRE(r);
  CHECK(sizes == std::vector<size_t>{125, 1000, 1000, 175});
}

TEST_CASE("spool_document: a body restarted midway is spooled as the second transfer gave it, in pieces or whole") {
  // The spool gathers pieces before it writes (spool.cpp): a restart must
  // drop what was gathered, written or not, and the last piece must land.
  struct Restarting : Fetcher {
    std::string body;
    size_t cut = 0;   // the first transfer stops after this many bytes
    size_t piece = 1; // bytes a call of the sink
    Result<FetchResponse> fetch(const std::string& url, const FetchOptions& o, const BodySink& sink) override {
      for (size_t at = 0; at < cut; at += piece) {
        sink(body.data() + at, std::min(piece, cut - at));
      }
      REQUIRE(o.restart);
      REQUIRE(o.restart());
      for (size_t at = 0; at < body.size(); at += piece) {
        sink(body.data() + at, std::min(piece, body.size() - at));
      }
      FetchResponse r;
      r.status = 200;
      r.final_url = url;
      r.body_bytes = body.size();
      return r;
    }
  };
  test::ScratchDir dir("spool-restart");
  const std::string list = resource_list(3000); // about 130 KB
  for (const size_t cut : {size_t{1000}, list.size() - 7}) {
    for (const size_t piece : {size_t{4096}, size_t{300 * 1024}}) {
      Restarting f;
      f.body = list;
      f.cut = cut;
      f.piece = piece;
      auto doc = spool_document(f, "http://example.org/rl.xml", FetchOptions{}, dir.path);
      REQUIRE(doc);
      Recorder seen;
      auto summary = (*doc)->read(seen);
      REQUIRE(summary);
      CHECK(seen.seen.size() == 3000);
      CHECK(seen.seen.back() == "e:http://example.org/r/2999");
    }
  }
}

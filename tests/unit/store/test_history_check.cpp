#include "store/history_check.h"
#include "store/memory_store.h"

#include "history_time.h"

#include <doctest/doctest.h>

// The change log's checker (store/history_check.h) fails on each kind of
// defect, and its repair appends what makes the last entries agree.
using namespace tributary;
using test::at;
using store::HistoryEntry;
using store::UriHistory;

namespace {

HistoryEntry entry(int64_t seq, rs::Change c, std::optional<int> seconds, const std::string& sha) {
  HistoryEntry e;
  e.seq = seq;
  e.change = c;
  e.time = seconds ? std::optional<rs::Timestamp>(at(*seconds)) : std::nullopt;
  if (!sha.empty()) {
    e.blob_sha256 = sha;
  }
  return e;
}

UriHistory held_live(const std::string& sha, std::vector<HistoryEntry> log) {
  UriHistory h;
  h.uri = "http://e.org/x";
  h.log = std::move(log);
  h.held = store::ResourceRecord{};
  h.held->uri = h.uri;
  h.held->blob_sha256 = sha;
  return h;
}

} // namespace

TEST_CASE("history check: a clean history passes") {
  store::HistoryChecker c;
  c.check(held_live("bb", {entry(1, rs::Change::created, 1, "aa"), entry(2, rs::Change::updated, 2, "bb")}));
  CHECK(c.report().ok());
  CHECK(c.report().entries == 2);
}

TEST_CASE("history check: a change logged twice, a time going back, a last entry we do not hold each fail it") {
  SUBCASE("twice") {
    store::HistoryChecker c;
    c.check(held_live("aa", {entry(1, rs::Change::created, 1, "aa"), entry(2, rs::Change::created, 1, "aa")}));
    CHECK(c.report().repeated == 1);
    CHECK_FALSE(c.report().ok());
  }
  SUBCASE("twice, untimed, in a row") {
    store::HistoryChecker c;
    c.check(held_live("aa", {entry(1, rs::Change::created, std::nullopt, "aa"),
                             entry(2, rs::Change::created, std::nullopt, "aa")}));
    CHECK(c.report().repeated == 1);
  }
  SUBCASE("backwards") {
    store::HistoryChecker c;
    c.check(held_live("bb", {entry(1, rs::Change::updated, 5, "aa"), entry(2, rs::Change::updated, 3, "bb")}));
    CHECK(c.report().backwards == 1);
    REQUIRE(c.report().first.size() == 1);
    CHECK(c.report().first[0].uri == "http://e.org/x");
  }
  SUBCASE("the last entry names other bytes") {
    store::HistoryChecker c;
    c.check(held_live("bb", {entry(1, rs::Change::updated, 5, "aa")}));
    CHECK(c.report().disagreeing == 1);
  }
  SUBCASE("the last entry names other bytes by md5 alone (as older versions logged some)") {
    store::HistoryChecker c;
    HistoryEntry e = entry(1, rs::Change::updated, 5, "");
    e.hashes = {{"md5", "aaaa"}};
    UriHistory h = held_live("bb", {e});
    h.held->hashes = {{"md5", "bbbb"}, {"sha-256", "bb"}};
    c.check(h);
    CHECK(c.report().disagreeing == 1);
  }
  SUBCASE("the last entry says deleted, we hold it live; unless a retry waits") {
    store::HistoryChecker c;
    UriHistory h = held_live("bb", {entry(1, rs::Change::deleted, 5, "")});
    c.check(h);
    CHECK(c.report().disagreeing == 1);
    h.retrying = true;
    c.check(h);
    CHECK(c.report().disagreeing == 1);
    CHECK(c.report().waiting == 1);
  }
}

TEST_CASE("history check: repair appends one corrective change per URI that disagrees, through the rule") {
  store::MemoryStore s;
  const int64_t source = *s.ensure_source("src", "http://e.org/");
  const int64_t feed = *s.ensure_feed(source, "http://e.org/caps.xml");
  store::ResourceRecord v2;
  v2.uri = "http://e.org/x";
  v2.blob_sha256 = "bb";
  v2.change_datetime = at(5);
  store::ResourceRecord v1 = v2;
  v1.blob_sha256 = "aa";
  v1.change_datetime = at(3);
  // Held v2, while the log's last entry says v1 (the store logs what its
  // rule admits: a first entry, then nothing older).
  store::Batch b;
  b.feed_id = feed;
  b.upserts = {v2};
  b.changes = {store::ChangeRecord{rs::Change::created, at(3), v1}};
  REQUIRE(s.apply(b));
  auto checked = store::check_history(s, {feed}, true);
  REQUIRE(checked);
  CHECK(checked->report.disagreeing == 1);
  CHECK(checked->corrected == 1);
  auto again = store::check_history(s, {feed}, false);
  REQUIRE(again);
  CHECK(again->report.ok());
  auto log = s.changes({feed}, 0, 10);
  REQUIRE(log->size() == 2);
  CHECK(log->at(1).change == rs::Change::updated);
  CHECK(log->at(1).upstream_datetime == at(5));
  CHECK(log->at(1).resource.blob_sha256 == "bb");
}

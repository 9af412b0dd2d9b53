#include "store/history_rule.h"

#include "history_time.h"

#include <doctest/doctest.h>

// The change log's one rule (store/history_rule.h), case by case.
using namespace tributary;
using test::at;
using store::ChangeRecord;
using store::LogHead;

namespace {

ChangeRecord change(const std::string& uri, rs::Change kind, std::optional<int> seconds, const std::string& sha) {
  ChangeRecord c;
  c.change = kind;
  c.upstream_datetime = seconds ? std::optional<rs::Timestamp>(at(*seconds)) : std::nullopt;
  c.resource.uri = uri;
  c.resource.state = kind == rs::Change::deleted ? store::ResourceState::deleted : store::ResourceState::live;
  if (!sha.empty()) {
    c.resource.hashes = {{"sha-256", sha}};
  }
  return c;
}

std::vector<ChangeRecord> admit(std::unordered_map<std::string, LogHead>& heads, const std::vector<ChangeRecord>& in,
                                const std::vector<store::ResourceRecord>& stored = {}) {
  std::unordered_map<std::string, const store::ResourceRecord*> held;
  for (const auto& r : stored) {
    held.emplace(r.uri, &r);
  }
  return store::admit_all(heads, in, held);
}

} // namespace

TEST_CASE("history rule: a change read again, or older than the log's last entry, is not logged") {
  std::unordered_map<std::string, LogHead> heads;
  auto first = admit(heads, {change("u", rs::Change::created, 1, "aa"), change("u", rs::Change::updated, 5, "bb")});
  CHECK(first.size() == 2);
  // The overlap reads both again, then an old update between them.
  CHECK(admit(heads, {change("u", rs::Change::created, 1, "aa"), change("u", rs::Change::updated, 5, "bb")}).empty());
  CHECK(admit(heads, {change("u", rs::Change::updated, 3, "cc")}).empty());
  // A newer one is logged, with its own time.
  auto next = admit(heads, {change("u", rs::Change::updated, 7, "dd")});
  REQUIRE(next.size() == 1);
  CHECK(next[0].upstream_datetime == at(7));
}

TEST_CASE("history rule: a deletion of what the log says is deleted moves nothing, a re-creation does") {
  std::unordered_map<std::string, LogHead> heads;
  CHECK(admit(heads, {change("u", rs::Change::created, 1, "aa"), change("u", rs::Change::deleted, 2, "")}).size() == 2);
  CHECK(admit(heads, {change("u", rs::Change::deleted, 4, "")}).empty());
  CHECK(admit(heads, {change("u", rs::Change::updated, 1, "aa")}).empty()); // the old update again
  CHECK(admit(heads, {change("u", rs::Change::created, 6, "aa")}).size() == 1);
}

TEST_CASE("history rule: two changes in one tick of the Source's clock are both logged, times never going back") {
  std::unordered_map<std::string, LogHead> heads;
  auto out = admit(heads, {change("u", rs::Change::updated, 3, "aa"), change("u", rs::Change::updated, 3, "bb")});
  REQUIRE(out.size() == 2);
  CHECK(out[1].upstream_datetime > out[0].upstream_datetime);
  // Read again: nothing.
  CHECK(admit(heads, {change("u", rs::Change::updated, 3, "aa"), change("u", rs::Change::updated, 3, "bb")}).empty());
}

TEST_CASE("history rule: an untimed entry (a Resource List without lastmod) logs only a new state") {
  std::unordered_map<std::string, LogHead> heads;
  CHECK(admit(heads, {change("u", rs::Change::created, std::nullopt, "aa")}).size() == 1);
  CHECK(admit(heads, {change("u", rs::Change::updated, std::nullopt, "aa")}).empty());
  CHECK(admit(heads, {change("u", rs::Change::updated, std::nullopt, "bb")}).size() == 1);
  // A timed change with other bytes cannot be ordered against it: logged.
  CHECK(admit(heads, {change("u", rs::Change::updated, 5, "cc")}).size() == 1);
  CHECK(admit(heads, {change("u", rs::Change::updated, 4, "bb")}).empty()); // and then ordered by its time
}

TEST_CASE("history rule: a state we stored that the log does not say is logged just after the log's last entry") {
  std::unordered_map<std::string, LogHead> heads;
  CHECK(admit(heads, {change("u", rs::Change::updated, 9, "aa")}).size() == 1);
  // A Source whose clock went back: bytes stored now, dated before.
  ChangeRecord c = change("u", rs::Change::updated, 4, "bb");
  store::ResourceRecord held = c.resource;
  held.blob_sha256 = "bb";
  c.resource.blob_sha256 = "bb";
  auto out = admit(heads, {c}, {held});
  REQUIRE(out.size() == 1);
  CHECK(out[0].upstream_datetime == at(9) + std::chrono::microseconds(1));
  // Not stored: an old change stays out.
  CHECK(admit(heads, {change("u", rs::Change::updated, 5, "cc")}).empty());
}

TEST_CASE("history rule: a later change to the bytes the log names is logged (it happened upstream)") {
  std::unordered_map<std::string, LogHead> heads;
  CHECK(admit(heads, {change("u", rs::Change::created, 1, "aa")}).size() == 1);
  CHECK(admit(heads, {change("u", rs::Change::updated, 2, "aa")}).size() == 1);
  CHECK(admit(heads, {change("u", rs::Change::updated, 2, "aa")}).empty());
}

TEST_CASE("history rule: a batch is admitted the same whether or not the heads are kept after it") {
  // PgStore reads the heads anew for every batch and asks admit_each to keep
  // only those a later change of the batch needs; what it admits, and the
  // times it logs them with, must not change.
  const std::vector<ChangeRecord> batch = {
      change("a", rs::Change::created, 5, "aa"), change("b", rs::Change::created, 5, "bb"),
      change("a", rs::Change::updated, 5, "aa"), // same state, same tick: not logged
      change("a", rs::Change::updated, 5, "a2"), // new state in the same tick: just after
      change("b", rs::Change::deleted, 4, ""),   // older than b's head, a new state: just after
      change("c", rs::Change::updated, std::nullopt, "cc"), change("a", rs::Change::updated, 6, "a2"),
  };
  std::unordered_map<std::string, const store::ResourceRecord*> held;
  std::unordered_map<std::string, LogHead> kept;
  std::unordered_map<std::string, LogHead> scratch;
  const auto all = store::admit_each(kept, batch, held, /*keep_heads=*/true);
  const auto lean = store::admit_each(scratch, batch, held, /*keep_heads=*/false);
  REQUIRE(all.size() == lean.size());
  for (size_t i = 0; i < all.size(); ++i) {
    CHECK(all[i].change == lean[i].change);
    CHECK(all[i].time == lean[i].time);
  }
  CHECK(all.size() == 5);
  // Kept: the new last entry of every URI. Lean: none of the last ones.
  CHECK(kept.size() == 3);
  CHECK(kept.at("a").hashes.front().hex == "a2");
  CHECK(scratch.count("c") == 0);
}

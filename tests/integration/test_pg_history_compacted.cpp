// The change log's rule for a URI whose entries retention compacted away:
// with no entry left to compare with, the state we hold (written before
// the compaction) stands for its last entry, so that a change read again,
// or an older one, is not logged as if the URI were new.

#include "pg_feed_store.h"

#include "resourcesync/datetime.h"
#include "resourcesync/hash.h"

#include <pqxx/pqxx>

#include <string>

using namespace tributary;
using namespace tributary::store;

namespace {

rs::Timestamp t(const char* s) { return *rs::parse_w3c_datetime(s); }

ResourceRecord version(const std::string& uri, const std::string& bytes, rs::Timestamp when) {
  ResourceRecord r;
  r.uri = uri;
  r.change_datetime = when;
  r.length = bytes.size();
  r.hashes = {{"md5", rs::hash_hex(rs::HashAlgorithm::md5, bytes)}};
  r.type = "text/plain";
  return r;
}

// The change log's entries of `uri`, as "change@md5" in order.
std::string logged(const std::string& conninfo, const std::string& uri) {
  pqxx::connection c(conninfo);
  pqxx::read_transaction tx(c);
  std::string out;
  for (const auto& row :
       tx.exec_params("SELECT change, coalesce(md5, '-') FROM change_log WHERE uri = $1 ORDER BY seq", uri)) {
    out += (out.empty() ? "" : " ") + row[0].as<std::string>() + "@" + row[1].as<std::string>().substr(0, 6);
  }
  return out;
}

} // namespace

TEST_CASE("PgStore: a URI whose log entries retention compacted is held against the state we hold: the same change "
          "again, or an older one, logs nothing, and a newer one is logged") {
  test::FeedStore fs("http://up.example.org/");
  auto& store = *fs.store;
  const std::string uri = "http://up.example.org/a";
  const std::string other = "http://up.example.org/b";
  const auto v1 = version(uri, "one", t("2026-01-01T10:00:00Z"));
  auto apply = [&](const std::vector<ResourceRecord>& upserts, const std::vector<ChangeRecord>& changes) {
    Batch b;
    b.feed_id = fs.feed;
    b.upserts = upserts;
    b.changes = changes;
    REQUIRE(store.apply(b));
  };
  apply({v1, version(other, "b", t("2026-01-01T10:00:00Z"))},
        {ChangeRecord{rs::Change::created, v1.change_datetime, v1},
         ChangeRecord{rs::Change::created, t("2026-01-01T10:00:00Z"), version(other, "b", t("2026-01-01T10:00:00Z"))}});
  const std::string md5_one = rs::hash_hex(rs::HashAlgorithm::md5, "one").substr(0, 6);
  REQUIRE(logged(fs.db.conninfo(), uri) == "created@" + md5_one);
  // Retention compacts the set's first part: both entries go.
  auto seq = store.last_seq();
  REQUIRE(seq);
  REQUIRE(store.compact_change_log({Compaction{"example", {fs.feed}, 2, 1, *seq, t("2026-01-01T10:00:00Z")}},
                                   {{"example", {fs.feed}}}));
  REQUIRE(logged(fs.db.conninfo(), uri).empty());

  SUBCASE("the same change read again (a baseline, a repair): nothing") {
    apply({v1}, {ChangeRecord{rs::Change::updated, v1.change_datetime, v1}});
    CHECK(logged(fs.db.conninfo(), uri).empty());
  }
  SUBCASE("an older version (a dump made before it): nothing") {
    const auto v0 = version(uri, "zero", t("2026-01-01T09:00:00Z"));
    apply({}, {ChangeRecord{rs::Change::updated, v0.change_datetime, v0}});
    CHECK(logged(fs.db.conninfo(), uri).empty());
  }
  SUBCASE("a deletion of what is held live, later: logged") {
    auto gone = v1;
    gone.state = ResourceState::deleted;
    gone.hashes.clear();
    apply({gone}, {ChangeRecord{rs::Change::deleted, t("2026-01-01T11:00:00Z"), gone}});
    CHECK(logged(fs.db.conninfo(), uri) == "deleted@-");
  }
  SUBCASE("a newer version: logged") {
    const auto v2 = version(uri, "two", t("2026-01-01T11:00:00Z"));
    apply({v2}, {ChangeRecord{rs::Change::updated, v2.change_datetime, v2}});
    CHECK(logged(fs.db.conninfo(), uri) == "updated@" + rs::hash_hex(rs::HashAlgorithm::md5, "two").substr(0, 6));
  }
}

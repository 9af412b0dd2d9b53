#include "store/pg/pg_store.h"
#include "store/blob/garbage.h"
#include "store/pg/pg_status_store.h"

#include "pg_feed_store.h"
#include "pg_fixture.h"

#include "resourcesync/reader.h"
#include "resourcesync/writer.h"

#include <map>

#include <atomic>
#include <thread>

using namespace tributary;
using namespace tributary::store;
using tributary::test::FeedStore;

namespace {

rs::Timestamp t(const char* s) { return *rs::parse_w3c_datetime(s); }

ResourceRecord resource(const std::string& uri, int n) {
  ResourceRecord r;
  r.uri = uri;
  r.lastmod = t("2013-01-03T11:00:00Z") + std::chrono::seconds(n);
  r.change_datetime = t("2013-01-03T12:00:00.123456Z");
  r.length = 100 + static_cast<uint64_t>(n);
  r.hashes = {{"md5", rs::hash_hex(rs::HashAlgorithm::md5, uri)},
              {"sha-256", rs::hash_hex(rs::HashAlgorithm::sha256, uri)}};
  r.type = "text/html";
  rs::Link dup{.rel = "duplicate", .href = uri + "?mirror", .pri = 2};
  dup.modified = t("2013-01-01T00:00:00Z");
  dup.hash = {{"md5", rs::hash_hex(rs::HashAlgorithm::md5, "x")}};
  r.links = {dup, rs::Link{.rel = "via", .href = "http://original.example.org/x"}};
  r.blob_sha256 = rs::hash_hex(rs::HashAlgorithm::sha256, uri);
  r.fetched_at = t("2026-11-21T00:00:00Z");
  r.fetched_from = uri;
  return r;
}

} // namespace

TEST_CASE("Migrations: the pinned version matches the embedded files") {
  REQUIRE_FALSE(migrations().empty());
  CHECK(migrations().back().version == expected_schema_version());
  for (size_t i = 0; i < migrations().size(); ++i) {
    CHECK(migrations()[i].version == static_cast<int>(i + 1));
  }
}

TEST_CASE("Migrations: apply from scratch, then nothing, and a behind or ahead schema is refused") {
  test::TempDatabase db;
  auto before = check_schema(db.conninfo());
  REQUIRE_FALSE(before);
  CHECK(before.error().message ==
        "the database schema is at version 0, this Tributary needs " + std::to_string(expected_schema_version()) +
            ": run `tributary migrate --config FILE` first");
  CHECK_FALSE(PgStore::open(db.conninfo()));

  auto first = migrate(db.conninfo());
  REQUIRE(first);
  CHECK(first->from_version == 0);
  CHECK(first->to_version == expected_schema_version());
  CHECK(first->applied.size() == migrations().size());
  CHECK(check_schema(db.conninfo()));

  auto second = migrate(db.conninfo());
  REQUIRE(second);
  CHECK(second->applied.empty());
  CHECK(*schema_version(db.conninfo()) == expected_schema_version());

  {
    pqxx::connection c(db.conninfo());
    pqxx::work tx(c);
    tx.exec0("INSERT INTO schema_version (version, name) VALUES (999, '0999_future.sql')");
    tx.commit();
  }
  auto ahead = check_schema(db.conninfo());
  REQUIRE_FALSE(ahead);
  CHECK(ahead.error().message.find("newer than this Tributary") != std::string::npos);
  auto m = migrate(db.conninfo());
  REQUIRE_FALSE(m);
  CHECK(m.error().kind == ErrorKind::conflict);
}

TEST_CASE("Migrations: retry entries kept as XML before 0018 become records, each field kept, and are retried") {
  test::TempDatabase db;
  const std::string uri = "http://up.example/res/1";
  // A database at version 17 holding one retry row in the old form: the
  // upstream's entry as a one-entry urlset (base64 and unknown hashes, a
  // mirror, an extension element), and one whose text was edited.
  rs::Document old;
  old.header.md = rs::Metadata{};
  old.header.md->capability = "resourcelist";
  auto parsed = rs::parse_document(
      R"(<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"
 xmlns:dc="http://purl.org/dc/elements/1.1/"><rs:md capability="resourcelist" at="2026-11-01T00:00:00Z"/>
<url><loc>http://up.example/res/1</loc><lastmod>2026-11-02T10:00:00Z</lastmod>
<rs:md hash="md5:1e0PFZ3WFsZ8ZDBVhvT+2w== blake3:abcd" length="8876" type="text/html"/>
<rs:ln rel="duplicate" href="http://mirror.example/res/1" pri="1"/><dc:creator>A. Author</dc:creator></url></urlset>)");
  REQUIRE(parsed.document.entries.size() == 1);
  const rs::Entry published = parsed.document.entries[0];
  old.entries.push_back(published);
  {
    pqxx::connection c(db.conninfo());
    pqxx::work tx(c);
    tx.exec0("CREATE TABLE schema_version (version integer PRIMARY KEY, name text NOT NULL, "
             "applied_at timestamptz NOT NULL DEFAULT now())");
    for (const auto& m : migrations()) {
      if (m.version <= 17) {
        tx.exec0(m.sql);
        tx.exec_params("INSERT INTO schema_version (version, name) VALUES ($1, $2)", m.version, m.name);
      }
    }
    tx.exec0("INSERT INTO source (name, url) VALUES ('up', 'http://up.example/')");
    tx.exec0("INSERT INTO feed (source_id, capability_list_url) VALUES (1, 'http://up.example/caps.xml')");
    tx.exec_params("INSERT INTO retry (feed_id, uri, entry, reason, next_attempt_at) VALUES (1, $1, $2, 'HTTP 503', "
                   "'2026-11-01T00:00:00Z')",
                   uri, rs::write_document(old));
    tx.exec0("INSERT INTO retry (feed_id, uri, entry, reason, next_attempt_at) VALUES (1, 'http://up.example/res/2', "
             "'<not xml', 'HTTP 503', '2026-11-01T00:00:00Z')");
    tx.commit();
  }
  auto migrated = migrate(db.conninfo());
  REQUIRE(migrated);
  CHECK(migrated->from_version == 17);
  CHECK(migrated->to_version == expected_schema_version());
  auto s = PgStore::open(db.conninfo());
  REQUIRE(s);
  auto due = (*s)->due_retries(1, t("2026-11-02T00:00:00Z"), 10);
  REQUIRE(due);
  REQUIRE(due->size() == 2);
  std::map<std::string, RetryRecord> by_uri;
  for (auto& r : *due) {
    by_uri[r.uri] = r;
  }
  const rs::Entry& kept = by_uri.at(uri).entry;
  CHECK(kept == published);
  REQUIRE(kept.md);
  CHECK(kept.md->hash.size() == published.md->hash.size());
  CHECK(kept.links.size() == 1);
  CHECK(kept.extensions.size() == 1);
  // The edited row still names its resource: fetched, unverified.
  CHECK(by_uri.at("http://up.example/res/2").entry.loc == "http://up.example/res/2");
  CHECK_FALSE(by_uri.at("http://up.example/res/2").entry.md);
  // Stored as a record now: no XML left in the table.
  pqxx::connection c(db.conninfo());
  pqxx::read_transaction tx(c);
  CHECK(tx.exec1("SELECT data_type FROM information_schema.columns WHERE table_name = 'retry' AND "
                 "column_name = 'entry'")[0]
            .as<std::string>() == "jsonb");
  CHECK(tx.exec1("SELECT entry->>'loc' FROM retry WHERE uri = '" + uri + "'")[0].as<std::string>() == uri);
}

TEST_CASE("PgStore: a batch commits resources, change log, watermark and counters together") {
  test::TempDatabase db;
  REQUIRE(migrate(db.conninfo()));
  auto store = PgStore::open(db.conninfo());
  REQUIRE(store);
  PgStore& s = **store;
  auto source = s.ensure_source("example", "http://example.org/");
  REQUIRE(source);
  CHECK(*s.ensure_source("example", "http://example.org/") == *source);
  auto feed = s.ensure_feed(*source, "http://example.org/caps.xml");
  REQUIRE(feed);
  CHECK(*s.ensure_feed(*source, "http://example.org/caps.xml") == *feed);
  auto run = s.begin_run(*source, RunMode::baseline);
  REQUIRE(run);

  Batch b;
  b.feed_id = *feed;
  b.run_id = *run;
  b.upserts = {resource("http://example.org/a", 1), resource("http://example.org/b'\"\\,{}", 2)};
  b.changes = {ChangeRecord{rs::Change::created, t("2013-01-03T12:00:00Z"), b.upserts[0]},
               ChangeRecord{rs::Change::created, t("2013-01-03T12:00:01Z"), b.upserts[1]}};
  b.seen = {b.upserts[0].uri, b.upserts[1].uri};
  Watermark w;
  w.baseline_at = t("2013-01-03T09:00:00Z");
  w.change_list_url = "http://example.org/changelist.xml";
  w.last_time = t("2013-01-03T12:00:01Z");
  w.last_uri = b.upserts[1].uri;
  w.last_position = 3;
  b.watermark = w;
  b.counters.created = 2;
  b.counters.bytes = 203;
  REQUIRE(s.apply(b));

  auto got = s.resources(*feed, {b.upserts[0].uri, b.upserts[1].uri, "http://example.org/none"});
  REQUIRE(got);
  REQUIRE(got->size() == 2);
  CHECK(got->at(b.upserts[0].uri) == b.upserts[0]);
  CHECK(got->at(b.upserts[1].uri) == b.upserts[1]);
  CHECK(*s.watermark(*feed) == w);
  auto info = s.run(*run);
  REQUIRE(info);
  CHECK(info->counters.created == 2);
  CHECK(info->counters.bytes == 203);
  CHECK(info->status == RunStatus::running);

  pqxx::connection c(db.conninfo());
  {
    pqxx::read_transaction tx(c);
    auto r = tx.exec("SELECT uri, change FROM change_log ORDER BY seq");
    REQUIRE(r.size() == 2);
    CHECK(r[0][0].as<std::string>() == "http://example.org/a");
    CHECK(r[1][1].as<std::string>() == "created");
  }

  SUBCASE("a failing batch leaves nothing behind") {
    Batch bad;
    bad.feed_id = *feed;
    bad.run_id = *run;
    bad.upserts = {resource("http://example.org/c", 3)};
    bad.changes = {ChangeRecord{rs::Change::created, std::nullopt, bad.upserts[0]}};
    bad.counters.created = 1;
    Watermark overflow = w;
    overflow.last_position = int64_t(1) << 40; // out of range for the column: fails last
    bad.watermark = overflow;
    auto r = s.apply(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("apply batch") == 0);
    CHECK(s.resources(*feed, {"http://example.org/c"})->empty());
    CHECK(*s.watermark(*feed) == w);
    CHECK(s.run(*run)->counters.created == 2);
    pqxx::read_transaction tx(c);
    CHECK(tx.exec1("SELECT count(*) FROM change_log")[0].as<int>() == 2);
  }

  SUBCASE("resources a baseline did not see are deleted and logged") {
    auto run2 = s.begin_run(*source, RunMode::baseline);
    REQUIRE(run2);
    Batch seen;
    seen.feed_id = *feed;
    seen.run_id = *run2;
    seen.seen = {"http://example.org/a"};
    REQUIRE(s.apply(seen));
    auto n = s.delete_unseen(*feed, *run2, std::nullopt, 0.5);
    REQUIRE(n);
    CHECK(n->deleted == 1);
    auto after = s.resources(*feed, {b.upserts[0].uri, b.upserts[1].uri});
    CHECK(after->at(b.upserts[0].uri).state == ResourceState::live);
    CHECK(after->at(b.upserts[1].uri).state == ResourceState::deleted);
    CHECK(s.run(*run2)->counters.deleted == 1);
    REQUIRE(s.finish_run(*run2, RunStatus::succeeded, "ok", RunMode::baseline));
    CHECK(s.run(*run2)->status == RunStatus::succeeded);
    pqxx::read_transaction tx(c);
    auto r = tx.exec("SELECT uri, change FROM change_log ORDER BY seq DESC LIMIT 1");
    CHECK(r[0][0].as<std::string>() == b.upserts[1].uri);
    CHECK(r[0][1].as<std::string>() == "deleted");
  }
}

TEST_CASE("PgStore: a batch of new resources is copied in with its seen marks, and where the hint is wrong, a retry is "
          "pending or a listed URI is not written, the ordinary way") {
  FeedStore fs("http://example.org/");
  PgStore& s = *fs.store;
  pqxx::connection c(fs.db.conninfo());
  auto seen_run = [&](const std::string& uri) {
    pqxx::read_transaction tx(c);
    auto r = tx.exec_params1("SELECT coalesce(last_seen_run, 0) FROM resource WHERE feed_id = $1 AND uri = $2", fs.feed,
                             uri);
    return r[0].as<int64_t>();
  };
  auto scalar = [&](const std::string& sql) {
    pqxx::read_transaction tx(c);
    return tx.exec1(sql)[0].as<int64_t>();
  };
  const std::string a = "http://example.org/a", b = "http://example.org/b\t'\"", cu = "http://example.org/c";
  // A batch of `run` hinted new (upserts_new): `records`, each listed, and
  // logged as `kinds` (none: not logged).
  auto hinted_new = [&](int64_t run, std::vector<ResourceRecord> records, std::vector<rs::Change> kinds = {}) {
    Batch batch;
    batch.feed_id = fs.feed;
    batch.run_id = run;
    batch.upserts = std::move(records);
    for (size_t i = 0; i < batch.upserts.size(); ++i) {
      batch.seen.push_back(batch.upserts[i].uri);
      if (i < kinds.size()) {
        batch.changes.push_back(ChangeRecord{kinds[i], std::nullopt, batch.upserts[i]});
      }
    }
    batch.upserts_new = true;
    return batch;
  };

  auto run1 = s.begin_run(fs.source, RunMode::baseline);
  REQUIRE(run1);
  Batch first = hinted_new(*run1, {resource(a, 1), resource(b, 2)}, {rs::Change::created, rs::Change::created});
  first.counters.created = 2;
  REQUIRE(s.apply(first));
  auto got = s.resources(fs.feed, {a, b});
  REQUIRE(got);
  REQUIRE(got->size() == 2);
  CHECK(got->at(a) == first.upserts[0]);
  CHECK(got->at(b) == first.upserts[1]);
  CHECK(seen_run(a) == *run1);
  CHECK(seen_run(b) == *run1);
  CHECK(scalar("SELECT live FROM feed_stats") == 2);
  CHECK(scalar("SELECT count(*) FROM change_log") == 2);
  CHECK(s.run(*run1)->counters.created == 2);

  // The hint is wrong (another writer stored a): nothing fails, a is updated.
  auto run2 = s.begin_run(fs.source, RunMode::baseline);
  REQUIRE(run2);
  ResourceRecord a_again = resource(a, 7);
  a_again.length = 7777;
  a_again.hashes = {{"md5", rs::hash_hex(rs::HashAlgorithm::md5, "a, again")}}; // other bytes: an update to log
  Batch wrong = hinted_new(*run2, {resource(cu, 3), a_again}, {rs::Change::created, rs::Change::updated});
  REQUIRE(s.apply(wrong));
  CHECK(s.resources(fs.feed, {a})->at(a).length == 7777u);
  CHECK(s.resources(fs.feed, {cu})->at(cu) == wrong.upserts[0]);
  CHECK(seen_run(a) == *run2);
  CHECK(seen_run(cu) == *run2);
  CHECK(seen_run(b) == *run1);
  CHECK(scalar("SELECT live FROM feed_stats") == 3);
  CHECK(scalar("SELECT count(*) FROM change_log") == 4);

  // A retry is pending for d: storing d clears it.
  const std::string d = "http://example.org/d";
  Batch failed;
  failed.feed_id = fs.feed;
  failed.run_id = *run2;
  rs::Entry entry;
  entry.loc = d;
  failed.retries = {RetryRecord{d, entry, std::nullopt, std::nullopt, "503", 1, t("2026-11-21T00:00:00Z")}};
  failed.seen = {d};
  REQUIRE(s.apply(failed));
  CHECK(scalar("SELECT count(*) FROM retry") == 1);
  Batch stored = hinted_new(*run2, {resource(d, 4)});
  REQUIRE(s.apply(stored));
  CHECK(scalar("SELECT count(*) FROM retry") == 0);
  CHECK(seen_run(d) == *run2);

  // A listed URI this batch does not write (unchanged) still gets its mark.
  auto run3 = s.begin_run(fs.source, RunMode::baseline);
  REQUIRE(run3);
  const std::string e = "http://example.org/e";
  Batch mixed = hinted_new(*run3, {resource(e, 5)});
  mixed.seen.push_back(b);
  REQUIRE(s.apply(mixed));
  CHECK(seen_run(e) == *run3);
  CHECK(seen_run(b) == *run3);
  CHECK(seen_run(a) == *run2);
  CHECK(scalar("SELECT live FROM feed_stats") == 5);
}

TEST_CASE("PgStore: COPY keeps every byte of every field, over many rows, both ways in and in the change log") {
  FeedStore fs("http://example.org/");
  PgStore& s = *fs.store;
  pqxx::connection c(fs.db.conninfo());
  // Values with every character COPY's text format escapes, a value that
  // reads like NULL, and links whose JSON carries escapes of its own.
  auto odd = [](int n, uint64_t length) {
    ResourceRecord r = resource("http://example.org/odd/" + std::to_string(n) + "\t", n);
    r.type = std::string("text/x\\y\tz\n\r\b\f\v") + std::to_string(n);
    r.encoding = "\\N";
    r.fetched_from = r.uri + "\r\n\\.";
    r.links[1].href = "http://original.example.org/x\t" + std::to_string(n);
    r.length = length;
    return r;
  };
  constexpr int k_rows = 3000; // past the 64 KiB a COPY is handed at a time
  auto run = s.begin_run(fs.source, RunMode::baseline);
  REQUIRE(run);
  Batch first;
  first.feed_id = fs.feed;
  first.run_id = *run;
  first.upserts_new = true; // the first baseline's way: one COPY into resource
  std::vector<std::string> uris;
  for (int i = 0; i < k_rows; ++i) {
    first.upserts.push_back(odd(i, 10));
    first.seen.push_back(first.upserts.back().uri);
    first.changes.push_back(ChangeRecord{rs::Change::created, t("2020-01-01T00:00:00Z"), first.upserts.back()});
    uris.push_back(first.upserts.back().uri);
  }
  REQUIRE(s.apply(first));
  auto got = s.resources(fs.feed, uris);
  REQUIRE(got);
  REQUIRE(got->size() == static_cast<size_t>(k_rows));
  for (const auto& r : first.upserts) {
    CHECK(got->at(r.uri) == r);
  }
  // The ordinary way: staged, then upserted.
  Batch second;
  second.feed_id = fs.feed;
  second.run_id = *run;
  for (int i = 0; i < k_rows; i += 2) {
    second.upserts.push_back(odd(i, 20));
    second.upserts.back().hashes = {{"md5", rs::hash_hex(rs::HashAlgorithm::md5, "again " + std::to_string(i))}};
    second.seen.push_back(second.upserts.back().uri);
    second.changes.push_back(ChangeRecord{rs::Change::updated, t("2020-01-02T00:00:00Z"), second.upserts.back()});
  }
  REQUIRE(s.apply(second));
  got = s.resources(fs.feed, uris);
  REQUIRE(got);
  for (const auto& r : second.upserts) {
    CHECK(got->at(r.uri) == r);
  }
  CHECK(got->at(odd(1, 10).uri) == odd(1, 10));
  pqxx::read_transaction tx(c);
  CHECK(tx.exec1("SELECT count(*) FROM change_log")[0].as<int64_t>() == k_rows + k_rows / 2);
  const ResourceRecord seven = odd(7, 10);
  auto row = tx.exec_params1("SELECT type, encoding, links::text, " + std::string("change") +
                                 " FROM change_log WHERE uri = $1",
                             seven.uri);
  CHECK(row[0].as<std::string>() == *seven.type);
  CHECK(row[1].as<std::string>() == *seven.encoding);
  // The link's href as JSON writes a tab: an escape inside the value.
  CHECK(row[2].as<std::string>().find("original.example.org/x\\t7") != std::string::npos);
  CHECK(row[3].as<std::string>() == "created");
}

TEST_CASE("PgStore: for_each_resource pages through large feeds in URI order") {
  FeedStore fs("http://big.example.org/");
  Batch b;
  b.feed_id = fs.feed;
  for (int i = 0; i < 25000; ++i) {
    ResourceRecord r;
    r.uri = "http://big.example.org/r" + std::to_string(i);
    b.upserts.push_back(std::move(r));
  }
  REQUIRE(fs.store->apply(b));
  size_t n = 0;
  std::string prev;
  bool ordered = true;
  REQUIRE(fs.store->for_each_resource(fs.feed, [&](const ResourceRecord& r) {
    ordered = ordered && (n == 0 || prev < r.uri);
    prev = r.uri;
    ++n;
  }));
  CHECK(n == 25000);
  CHECK(ordered);
}

#include "../common/store_contract.h"

TEST_CASE("PgStore: the store contract") {
  test::TempDatabase db;
  REQUIRE(migrate(db.conninfo()));
  test::store_contract([&]() -> std::unique_ptr<Store> {
    auto s = PgStore::open(db.conninfo());
    REQUIRE(s);
    return std::move(*s);
  });
}

TEST_CASE("PgStore: run retention removes old runs and their errors, keeping each source's newest success and failure") {
  tributary::test::TempDatabase db;
  REQUIRE(migrate(db.conninfo()));
  auto opened = PgStore::open(db.conninfo());
  REQUIRE(opened);
  PgStore& s = **opened;
  std::vector<int64_t> runs;
  for (const char* name : {"a", "b"}) {
    const int64_t source = *s.ensure_source(name, std::string("http://") + name + ".example/");
    for (int i = 0; i < 6; ++i) {
      const int64_t run = *s.begin_run(source, RunMode::incremental);
      REQUIRE(s.record_error(run, "http://x/", "boom"));
      REQUIRE(s.finish_run(run, i % 3 == 0 ? RunStatus::failed : RunStatus::succeeded, "m", RunMode::incremental));
      runs.push_back(run);
    }
  }
  {
    pqxx::connection c(db.conninfo());
    pqxx::work tx(c);
    // Every run of 'a' and the first four of 'b' finished 40 days ago.
    tx.exec0("UPDATE sync_run SET finished_at = now() - interval '40 days' WHERE id <= " + std::to_string(runs[9]));
    tx.commit();
  }
  const auto month = std::chrono::seconds(30 * 86400);
  auto first = s.prune_runs(month, 3); // in slices
  REQUIRE(first);
  CHECK(*first == 3);
  auto rest = s.prune_runs(month, 100);
  REQUIRE(rest);
  // 'a': 6 old, its newest success (run 5) and failure (run 3) stay: 4 go;
  // 'b': 4 old, its newest failure (run 3 of b) stays (its newest success is
  // recent): 3 go.
  CHECK(*first + *rest == 4 + 3);
  CHECK(*s.prune_runs(month, 100) == 0);
  pqxx::connection c(db.conninfo());
  pqxx::read_transaction tx(c);
  std::vector<int64_t> left;
  for (const auto& row : tx.exec("SELECT id FROM sync_run ORDER BY id")) {
    left.push_back(row[0].as<int64_t>());
  }
  CHECK(left == std::vector<int64_t>{runs[3], runs[5], runs[9], runs[10], runs[11]});
  CHECK(tx.exec1("SELECT count(*) FROM sync_error")[0].as<int>() == 5); // the errors went with their runs
}

TEST_CASE("Garbage collection: blobs named nowhere go a grace period after they were condemned, never one a writer "
          "reused or the database names again") {
  tributary::test::TempDatabase db;
  REQUIRE(migrate(db.conninfo()));
  auto opened = PgStore::open(db.conninfo());
  REQUIRE(opened);
  PgStore& s = **opened;
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("tributary-gc-" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  auto blobs_opened = BlobStore::open(root, /*pack_bytes=*/1024); // two records a pack
  REQUIRE(blobs_opened);
  BlobStore& blobs = **blobs_opened;
  const int64_t feed = *s.ensure_feed(*s.ensure_source("src", "http://example.org/"), "http://example.org/caps.xml");
  const int64_t run = *s.begin_run(1, RunMode::baseline);
  auto stored = [&](const std::string& body) { return blobs.put(body + std::string(300, '.'))->sha256; };
  auto commit = [&](const std::string& uri, const std::string& sha, rs::Change change) {
    ResourceRecord r = resource(uri, 1);
    r.blob_sha256 = sha;
    r.state = change == rs::Change::deleted ? ResourceState::deleted : ResourceState::live;
    Batch b;
    b.feed_id = feed;
    b.run_id = run;
    b.upserts = {r};
    b.changes = {ChangeRecord{change, t("2026-01-01T00:00:00Z"), r}};
    REQUIRE(s.apply(b));
  };
  const std::string live = stored("live");        // a live resource's content
  const std::string old = stored("old");          // replaced: only the change log names it
  const std::string gone = stored("gone");        // a deleted resource's, its changes compacted away
  const std::string stray = stored("stray");      // stored, never named
  const std::string reused = stored("reused");    // condemned, then reused by a writer
  const std::string renamed = stored("renamed");  // condemned, then named by a resource again
  commit("http://example.org/a", old, rs::Change::created);
  commit("http://example.org/a", live, rs::Change::updated);
  commit("http://example.org/g", gone, rs::Change::created);
  commit("http://example.org/g", gone, rs::Change::deleted);
  {
    pqxx::connection c(db.conninfo());
    pqxx::work tx(c);
    tx.exec0("DELETE FROM change_log WHERE uri = 'http://example.org/g'"); // behind the retention horizon
    tx.commit();
  }
  const int64_t t0 = 1'800'000'000;
  GcOptions o;
  o.grace = std::chrono::hours(1);
  o.repack_below = 0; // no rewriting yet

  auto dry = collect_garbage(s, blobs, GcOptions{o.grace, 0, true}, t0);
  REQUIRE(dry);
  CHECK(dry->garbage == 4); // gone, stray, reused, renamed
  CHECK(blobs.condemned()->empty());

  auto first = collect_garbage(s, blobs, o, t0);
  REQUIRE(first);
  CHECK(first->stored == 6);
  CHECK(first->referenced == 2); // live, old
  CHECK(first->missing == 0);
  CHECK(first->condemned == 4);
  CHECK(first->removed.blobs == 0);

  // Within the grace period: a writer reuses one, a resource names another.
  REQUIRE(blobs.retain(reused));
  commit("http://example.org/r", renamed, rs::Change::created);
  auto early = collect_garbage(s, blobs, o, t0 + 1800);
  REQUIRE(early);
  CHECK(early->removed.blobs == 0);
  CHECK(early->pardoned == 1); // renamed
  CHECK(early->waiting == 3);  // gone, stray (marked at t0), reused (marked again now)

  auto due = collect_garbage(s, blobs, o, t0 + 3600);
  REQUIRE(due);
  CHECK(due->removed.blobs == 2); // gone and stray; reused was marked again only at t0 + 1800
  for (const auto& kept : {live, old, reused, renamed}) {
    CHECK(blobs.read(kept));
  }
  for (const auto& collected : {gone, stray}) {
    CHECK(blobs.locate(collected).error().kind == ErrorKind::not_found);
  }
  auto later = collect_garbage(s, blobs, o, t0 + 1800 + 3600);
  REQUIRE(later);
  CHECK(later->removed.blobs == 1); // reused, named nowhere still
  CHECK(blobs.read(live));

  // Repack gives the space back and the live content stays readable.
  const auto packs_bytes = [&] {
    uint64_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(root / "packs")) {
      n += e.file_size();
    }
    return n;
  };
  const uint64_t before = packs_bytes();
  o.repack_below = 0.9;
  auto repacked = collect_garbage(s, blobs, o, t0 + 3 * 3600);
  REQUIRE(repacked);
  CHECK(repacked->repacked.packs >= 1);
  CHECK(packs_bytes() < before);
  for (const auto& kept : {live, old, renamed}) {
    CHECK(blobs.read(kept));
  }
  CHECK(blobs.check(false)->problems.empty());
  std::filesystem::remove_all(root);
}

TEST_CASE("Status history: two daemons sampling one database count each run's changes once, a baseline's apart, "
          "keep the lag last sampled, and drop buckets past the retention") {
  test::TempDatabase db;
  REQUIRE(migrate(db.conninfo()));
  auto a = PgStatusStore::open(db.conninfo());
  auto b = PgStatusStore::open(db.conninfo());
  REQUIRE(a);
  REQUIRE(b);
  pqxx::connection c(db.conninfo());
  auto sql = [&](const std::string& q) {
    pqxx::work tx(c);
    tx.exec0(q);
    tx.commit();
  };
  sql("INSERT INTO source (name, url) VALUES ('one', 'http://one.example/'), ('two', 'http://two.example/')");
  sql("INSERT INTO feed (source_id, capability_list_url) SELECT id, url || 'caps' FROM source");
  // Both sample while runs keep ending on both, from threads of their own.
  std::atomic<bool> done{false};
  auto sampler = [&](PgStatusStore& s, double lag) {
    while (!done) {
      CHECK(s.sample({{"one", lag, false}, {"two", std::nullopt, true}}, std::chrono::hours(24)));
    }
  };
  std::thread ta(sampler, std::ref(**a), 10.0);
  std::thread tb(sampler, std::ref(**b), 10.0);
  for (int i = 0; i < 10; ++i) {
    // Each run is counted by the daemon that ran it, once.
    CHECK((*a)->record_run("one", false, 50));
    CHECK((*b)->record_run("one", false, 50));
    CHECK((*a)->record_run("two", false, 7));
    CHECK((*b)->record_run("two", false, 7));
  }
  CHECK((*b)->record_run("two", true, 3000)); // a baseline: apart from the changes
  CHECK((*b)->record_run("two", false, 0));
  done = true;
  ta.join();
  tb.join();
  REQUIRE((*a)->sample({{"one", 42.0, false}}, std::chrono::hours(24)));
  auto h = (*a)->history(rs::Timestamp(std::chrono::microseconds(0)), "");
  REQUIRE(h);
  REQUIRE(h->size() == 2);
  uint64_t one = 0;
  uint64_t two = 0;
  uint64_t two_baseline = 0;
  for (const auto& p : (*h)[0].points) {
    one += p.changes;
  }
  for (const auto& p : (*h)[1].points) {
    two += p.changes;
    two_baseline += p.baseline;
  }
  CHECK((*h)[0].source == "one");
  CHECK(one == 1000);
  CHECK(two == 140);
  CHECK(two_baseline == 3000);
  CHECK((*h)[0].points.back().lag_seconds == 42.0);
  CHECK((*h)[1].points.back().failing);
  // Only one source's history when asked.
  auto only = (*a)->history(rs::Timestamp(std::chrono::microseconds(0)), "two");
  REQUIRE(only);
  REQUIRE(only->size() == 1);
  CHECK(only->front().source == "two");
  // A bucket older than the retention goes at the next sample.
  sql("INSERT INTO source_history (source_id, bucket, changes) SELECT id, now() - interval '3 days', 5 FROM source");
  REQUIRE((*a)->sample({}, std::chrono::hours(48)));
  pqxx::read_transaction tx(c);
  CHECK(tx.exec1("SELECT count(*) FROM source_history WHERE bucket < now() - interval '2 days'")[0].as<int>() == 0);
}

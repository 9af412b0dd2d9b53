// The S3 content tier against a real S3 server: the throwaway Ceph RADOS
// Gateway deploy/test.sh starts (TRIBUTARY_TEST_S3_*). Each test has a
// bucket of its own. Tests fail, never skip, when the server is missing.
#include "../common/scratch_dir.h"
#include "daemon_client.h"
#include "http_get.h"
#include "process.h"
#include "s3_fixture.h"
#include "sync_fixture.h"

#include "republisher/url_scheme.h"
#include "resourcesync/reader.h"
#include "common/url_resolve.h"
#include "store/pg/pg_object_index.h"

#include "store/s3/object_tier.h"
#include "store/s3/s3_client.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <tuple>

using namespace tributary;
using namespace tributary::test;


TEST_CASE("S3 client: signed requests to a real RGW make a bucket, PUT, HEAD, read a Range and DELETE, and a wrong "
          "secret is refused with the server's reason") {
  store::S3Client s3(s3_config());
  REQUIRE(s3.create_bucket());
  REQUIRE(s3.create_bucket()); // ours already: fine
  const std::string body = "0123456789abcdefghij";
  REQUIRE(s3.put("packs/x", body, rs::hash_hex(rs::HashAlgorithm::sha256, body)));
  auto size = s3.head("packs/x");
  REQUIRE(size);
  CHECK(*size == std::optional<uint64_t>(20));
  CHECK(get_all(s3, "packs/x", 10, 5) == "abcde");
  CHECK(get_all(s3, "packs/x", 0, 20) == body);
  // Bytes that do not match the announced SHA-256 are refused by the server.
  auto lied = s3.put("packs/y", body, rs::hash_hex(rs::HashAlgorithm::sha256, "other"));
  CHECK_FALSE(lied);
  CHECK(s3.head("packs/y").value() == std::nullopt);
  auto missing = s3.get("packs/none", 0, 4, [](const char*, size_t) { return true; });
  REQUIRE_FALSE(missing);
  CHECK(missing.error().kind == ErrorKind::not_found);
  CHECK(missing.error().message.find("NoSuchKey") != std::string::npos);
  REQUIRE(s3.remove("packs/x"));
  CHECK(s3.head("packs/x").value() == std::nullopt);
  REQUIRE(s3.remove("packs/x")); // gone already: fine

  auto wrong = s3_config();
  wrong.bucket = s3.config().bucket;
  wrong.secret_key = "not-the-secret";
  store::S3Client bad(wrong);
  auto refused = bad.put("packs/z", body, rs::hash_hex(rs::HashAlgorithm::sha256, body));
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message.find("HTTP 403 SignatureDoesNotMatch") != std::string::npos);
}

TEST_CASE("S3 content: a sync puts its blobs in the bucket in pack objects before the database names them, and a "
          "node with an empty data_dir reads every one") {
  Upstream up;
  Site site(up);
  site.put_numbered(120);
  site.put("/big.bin", std::string(3u << 20, 'b')); // over k_pack_max: an object of its own
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  SyncEnv env;
  auto tier = store::ObjectTier::open(s3_config(), std::make_shared<store::PgObjectIndex>(env.db.conninfo()));
  REQUIRE_MESSAGE(tier, (tier ? std::string() : tier.error().message));
  env.blobs->set_remote(*tier);
  auto r = env.run(SyncEnv::source(up.url("/")), store::RunMode::baseline);
  REQUIRE(r.status == store::RunStatus::succeeded);
  CHECK(r.counters.created == 121);
  // Every blob the database names is in the bucket; small ones share pack
  // objects (batches of 50 here: 3 of them), the large one stands alone.
  const auto conninfo = env.db.conninfo();
  CHECK(count(conninfo, "SELECT count(*) FROM resource r WHERE NOT EXISTS "
                        "(SELECT 1 FROM content_object o WHERE o.sha256 = r.blob_sha256)") == 0);
  CHECK(count(conninfo, "SELECT count(*) FROM content_object") == 121);
  CHECK(count(conninfo, "SELECT count(DISTINCT object) FROM content_object WHERE object LIKE 'packs/%'") <= 4);
  CHECK(count(conninfo, "SELECT count(*) FROM content_object WHERE object LIKE 'blobs/%'") == 1);
  const auto c = (*tier)->counters();
  CHECK(c.blobs_uploaded == 121);
  CHECK(c.objects_put <= 5);

  // Another machine: its own data_dir, the same database and bucket.
  const auto other = std::filesystem::path(env.data.string() + "-other");
  std::filesystem::remove_all(other);
  auto blobs = store::BlobStore::open(other);
  REQUIRE(blobs);
  auto tier2 = store::ObjectTier::open((*tier)->client().config(), std::make_shared<store::PgObjectIndex>(conninfo));
  REQUIRE(tier2);
  (*blobs)->set_remote(*tier2);
  std::map<std::string, std::string> read;
  {
    pqxx::connection db(conninfo);
    pqxx::read_transaction tx(db);
    for (const auto& row : tx.exec("SELECT uri, blob_sha256 FROM resource WHERE state = 'live'")) {
      auto bytes = (*blobs)->read(row[1].as<std::string>());
      REQUIRE_MESSAGE(bytes, (bytes ? std::string() : bytes.error().message));
      read[row[0].as<std::string>()] = *bytes;
    }
  }
  CHECK(read.size() == 121);
  CHECK(read[up.url("/res/7.txt")] == "resource 7");
  CHECK(read[up.url("/big.bin")] == std::string(3u << 20, 'b'));
  // One GET per pack object (the first miss reads and keeps all of its
  // blobs), one for the large blob: not one per blob.
  const long objects = count(conninfo, "SELECT count(DISTINCT object) FROM content_object");
  CHECK((*tier2)->counters().ranges_read == static_cast<uint64_t>(objects));
  // Kept as a cache: read again, nothing is fetched.
  CHECK((*blobs)->read(rs::hash_hex(rs::HashAlgorithm::sha256, "resource 7")).value() == "resource 7");
  CHECK((*tier2)->counters().ranges_read == static_cast<uint64_t>(objects));
  // A name the bucket lacks is not found, on either node.
  auto none = (*blobs)->read(rs::hash_hex(rs::HashAlgorithm::sha256, "never stored"));
  REQUIRE_FALSE(none);
  CHECK(none.error().kind == ErrorKind::not_found);
  std::filesystem::remove_all(other);
}

TEST_CASE("S3 content: when the bucket refuses an upload the batch fails and the database names nothing, and the next "
          "run, with the bucket back, applies it") {
  Upstream up;
  Site site(up);
  site.put_numbered(20);
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  SyncEnv env;
  auto good = s3_config();
  auto bad = good;
  bad.secret_key = "not-the-secret";
  {
    store::S3Client s3(good);
    REQUIRE(s3.create_bucket());
  }
  auto refused = store::ObjectTier::open(bad, std::make_shared<store::PgObjectIndex>(env.db.conninfo()));
  REQUIRE_FALSE(refused); // the bucket check at open already says so
  CHECK(refused.error().message.find("SignatureDoesNotMatch") != std::string::npos);
  auto tier = store::ObjectTier::open(good, std::make_shared<store::PgObjectIndex>(env.db.conninfo()));
  REQUIRE(tier);
  // Credentials revoked after start: every PUT is refused.
  (*tier)->client().set_credentials(bad.access_key, bad.secret_key);
  env.blobs->set_remote(*tier);
  auto r = env.run(SyncEnv::source(up.url("/")), store::RunMode::baseline);
  CHECK(r.status != store::RunStatus::succeeded);
  REQUIRE_FALSE(r.errors.empty());
  CHECK(r.errors.front().find("SignatureDoesNotMatch") != std::string::npos);
  CHECK(count(env.db.conninfo(), "SELECT count(*) FROM resource WHERE state = 'live'") == 0);
  CHECK(count(env.db.conninfo(), "SELECT count(*) FROM content_object") == 0);
  (*tier)->client().set_credentials(good.access_key, good.secret_key);
  r = env.run(SyncEnv::source(up.url("/")), store::RunMode::baseline);
  CHECK(r.status == store::RunStatus::succeeded);
  CHECK(count(env.db.conninfo(), "SELECT count(*) FROM resource WHERE state = 'live'") == 20);
  CHECK(count(env.db.conninfo(), "SELECT count(*) FROM content_object") == 20);
}

TEST_CASE("S3 content: `tributary sync` on one machine, `tributary serve` on another (its own data_dir, the same "
          "database and bucket) serves every resource and Resource Dump package, and a third syncs from its dump") {
  Upstream up;
  Site site(up);
  site.put_numbered(29, "/res/r", "bytes ");
  // A resource whose URI, decoded in our URL of it, reads like a dump
  // package path: served as the resource it is.
  site.put("/changedump/1.zip", "bytes 29");
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  TempDatabase db;
  ScratchDir dir("s3");
  const auto s3 = s3_config();
  const int port = free_port();
  auto config = [&](const std::string& node) {
    return write_config(dir / (node + ".json"), {{"database", db.conninfo()},
                                                 {"data_dir", (dir / node).string()},
                                                 {"listen", "127.0.0.1:" + std::to_string(port)},
                                                 {"dump_package_size", 10},
                                                 {"content", s3_content(s3)},
                                                 {"sources", {{{"name", "up"}, {"url", up.url("/")}}}}});
  };
  const std::string a = config("a"), b = config("b");
  REQUIRE(run_tributary("migrate --config " + a).status == 0);
  auto synced = run_tributary("sync --config " + a + " --incremental");
  INFO(synced.out);
  REQUIRE(synced.status == 0);
  site.put("/res/r3.txt", "bytes 3, changed");
  site.publish_change_list("/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt,
                           {change_entry(up.url("/res/r3.txt"), rs::Change::updated, ts("2026-01-02T00:00:00Z"),
                                         "bytes 3, changed")});
  synced = run_tributary("sync --config " + a + " --incremental");
  REQUIRE(synced.status == 0);
  CHECK(count(db.conninfo(), "SELECT count(*) FROM content_object") == 31);

  pid_t serve = spawn_tributary({"serve", "--config", b}, (dir / "serve.log").string());
  REQUIRE(serve > 0);
  ProcessGuard guard(serve);
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  pub::UrlScheme urls(base);
  REQUIRE(eventually_says(urls.capability_list("up"), "resourcedump.xml"));
  // Every entry of a listing served, with the bytes its strongest hash says.
  auto served_as_listed = [&](const std::string& listing, size_t entries) {
    CAPTURE(listing);
    auto doc = rs::parse_document(http_get(listing).body);
    REQUIRE(doc.summary.valid());
    CHECK(doc.document.entries.size() == entries);
    for (const auto& e : doc.document.entries) {
      Got got = http_get(e.loc);
      CHECK(got.status == 200);
      const rs::HashValue* h = rs::strongest_hash(e.md->hash);
      REQUIRE(h);
      CHECK(rs::hash_hex(*h->known(), got.body) == h->hex);
    }
  };
  served_as_listed(urls.resource_list("up"), 30);
  served_as_listed(urls.resource_dump("up"), 3); // packages of 10
  // A third node follows b by its Resource Dump, content into the bucket.
  SyncEnv env;
  auto tier = store::ObjectTier::open(s3, std::make_shared<store::PgObjectIndex>(env.db.conninfo()));
  REQUIRE(tier);
  env.blobs->set_remote(*tier);
  auto src = SyncEnv::source(base + "/", "b");
  src.strategy = "dumps";
  auto r = env.run(src, store::RunMode::baseline);
  REQUIRE(r.status == store::RunStatus::succeeded);
  CHECK(has_note(r, "baselined from the Resource Dump"));
  CHECK(r.counters.created == 30);
  CHECK(env.live()[urls.resource("up", up.url("/res/r3.txt"))] == "bytes 3, changed");
  // Its own database: its own content_object rows, every one in the bucket.
  CHECK((*tier)->counters().blobs_uploaded == 30);
  CHECK(count(env.db.conninfo(), "SELECT count(*) FROM content_object") == 30);
}

TEST_CASE("tributary migrate-blobs: a local store goes into the bucket, packed, and a second run finds nothing "
          "left to do, and a node of the s3 store then reads every blob") {
  Upstream up;
  Site site(up);
  site.put_numbered(25, "/res/m", "migrated ");
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  TempDatabase db;
  ScratchDir dir("migrate");
  const auto s3 = s3_config();
  json config{{"database", db.conninfo()},
              {"data_dir", (dir / "data").string()},
              {"sources", {{{"name", "up"}, {"url", up.url("/")}}}}};
  const std::string local = write_config(dir / "local.json", config);
  config["content"] = s3_content(s3);
  const std::string remote = write_config(dir / "s3.json", config);
  REQUIRE(run_tributary("migrate --config " + local).status == 0);
  REQUIRE(run_tributary("sync --config " + local + " --baseline").status == 0);
  auto refused = run_tributary("migrate-blobs --config " + local);
  CHECK(refused.status == 2);
  CHECK(refused.out.find("content.store is \"local\"") != std::string::npos);

  auto first = run_tributary("migrate-blobs --config " + remote);
  INFO(first.out);
  CHECK(first.status == 0);
  CHECK(first.out.find("named by the database, not placed in the bucket: 25 blobs") != std::string::npos);
  CHECK(first.out.find("uploaded: 25 blobs") != std::string::npos);
  CHECK(first.out.find("in 1 objects") != std::string::npos); // one pack object
  CHECK(count(db.conninfo(), "SELECT count(*) FROM content_object") == 25);
  auto again = run_tributary("migrate-blobs --config " + remote);
  CHECK(again.status == 0);
  CHECK(again.out.find("not placed in the bucket: 0 blobs") != std::string::npos);
  CHECK(again.out.find("uploaded: 0 blobs") != std::string::npos);

  std::vector<std::string> migrated;
  for (int i = 0; i < 25; ++i) {
    migrated.push_back("migrated " + std::to_string(i));
  }
  read_back(dir / "other", s3, db.conninfo(), migrated);
}

TEST_CASE("S3 content: a blob left here by a batch whose upload failed, then named by a later change through "
          "deduplication, goes to the bucket before the database names it") {
  Upstream up;
  Site site(up);
  site.put("/a.txt", "alpha");
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  SyncEnv env;
  const auto good = s3_config();
  auto tier = store::ObjectTier::open(good, std::make_shared<store::PgObjectIndex>(env.db.conninfo()));
  REQUIRE(tier);
  env.blobs->set_remote(*tier);
  REQUIRE(env.run(SyncEnv::source(up.url("/")), store::RunMode::baseline).status == store::RunStatus::succeeded);
  // b.txt is fetched and stored here, but its upload is refused: its batch
  // fails and nothing names it.
  site.put("/b.txt", "shared bytes");
  site.publish_change_list("/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt,
                           {change_entry(up.url("/b.txt"), rs::Change::created, ts("2026-01-02T00:00:00Z"),
                                         "shared bytes")});
  (*tier)->client().set_credentials(good.access_key, "not-the-secret");
  CHECK(env.run(SyncEnv::source(up.url("/")), store::RunMode::incremental).status != store::RunStatus::succeeded);
  const std::string shared = rs::hash_hex(rs::HashAlgorithm::sha256, "shared bytes");
  CHECK(env.blobs->contains(shared)); // here, named nowhere
  CHECK(count(env.db.conninfo(), "SELECT count(*) FROM content_object WHERE sha256 = '" + shared + "'") == 0);
  // Then c.txt, announced with its sha-256, has the same bytes: it is taken
  // from the store without fetching, and uploaded before it is named.
  (*tier)->client().set_credentials(good.access_key, good.secret_key);
  site.put("/c.txt", "shared bytes");
  rs::Entry c = change_entry(up.url("/c.txt"), rs::Change::created, ts("2026-01-03T00:00:00Z"), "shared bytes");
  c.md->hash = {rs::HashValue{"sha-256", shared}};
  site.publish_change_list("/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt, {c});
  auto r = env.run(SyncEnv::source(up.url("/")), store::RunMode::incremental);
  CHECK(r.status == store::RunStatus::succeeded);
  CHECK(up.requests("/c.txt") == 0); // deduplicated
  CHECK(env.live()[up.url("/c.txt")] == "shared bytes");
  CHECK(count(env.db.conninfo(), "SELECT count(*) FROM resource r WHERE NOT EXISTS "
                                 "(SELECT 1 FROM content_object o WHERE o.sha256 = r.blob_sha256)") == 0);
}

TEST_CASE("S3 content: `tributary run` with the s3 store counts its uploads on /metrics") {
  Upstream up;
  Site site(up);
  site.put_numbered(12, "/res/d", "daemon ");
  site.put("/big.bin", std::string(2u << 20, 'x'));
  site.put("/big2.bin", std::string(2u << 20, 'y'));
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  TempDatabase db;
  ScratchDir dir("s3-run");
  const auto s3 = s3_config();
  const int port = free_port();
  const std::string cfg =
      write_config(dir / "run.json", {{"database", db.conninfo()},
                                      {"data_dir", (dir / "data").string()},
                                      {"listen", "127.0.0.1:" + std::to_string(port)},
                                      {"content", s3_content(s3)},
                                      {"sources", {{{"name", "up"}, {"url", up.url("/")}, {"interval", "1s"}}}}});
  REQUIRE(run_tributary("migrate --config " + cfg).status == 0);
  pid_t daemon = spawn_tributary({"run", "--config", cfg}, (dir / "run.log").string());
  REQUIRE(daemon > 0);
  ProcessGuard guard(daemon);
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  REQUIRE(wait_for(base, [](const json& st) { return in_sync(st, "up", 14); }, 30));
  // The 14 resources, and whatever the republisher kept meanwhile (the
  // Resource List Archive's first snapshot is taken when the list is first
  // published, which may come before or after the sources are in sync): each
  // blob uploaded is one content_object row, and no more were uploaded.
  long rows = 0;
  Got metrics;
  CHECK(eventually([&] {
    metrics = http_get(base + "/metrics");
    rows = count(db.conninfo(), "SELECT count(*) FROM content_object");
    return metrics.body.find("tributary_s3_blobs_uploaded_total " + std::to_string(rows) + "\n") != std::string::npos;
  }));
  INFO(metrics.body);
  CHECK(rows >= 14);
  CHECK(metrics.body.find("# TYPE tributary_s3_ranges_read_total counter") != std::string::npos);
  CHECK(count(db.conninfo(), "SELECT count(*) FROM content_object WHERE object LIKE 'blobs/%'") == 2);
}

TEST_CASE("tributary gc with the s3 store: past content.cache_bytes, copies the bucket holds are removed from this "
          "node, and every blob is then read back from the bucket") {
  Upstream up;
  Site site(up);
  site.put_numbered(40, "/res/c", std::string(200, 'c'));
  site.put("/big.bin", std::string(2u << 20, 'g')); // a file blob of its own
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  TempDatabase db;
  ScratchDir dir("cache");
  const auto s3 = s3_config();
  json content = s3_content(s3);
  content["cache_bytes"] = 4096;
  const std::string cfg = write_config(dir / "c.json", {{"database", db.conninfo()},
                                                        {"data_dir", (dir / "data").string()},
                                                        {"content", content},
                                                        {"sources", {{{"name", "up"}, {"url", up.url("/")}}}}});
  REQUIRE(run_tributary("migrate --config " + cfg).status == 0);
  REQUIRE(run_tributary("sync --config " + cfg + " --baseline").status == 0);
  const auto stored_bytes = [&] {
    auto blobs = store::BlobStore::open(dir / "data");
    REQUIRE(blobs);
    uint64_t n = 0;
    REQUIRE((*blobs)->for_each_blob([&](const store::BlobName&, uint64_t length) { n += length; }));
    return n;
  };
  CHECK(stored_bytes() > (2u << 20));
  auto gc = run_tributary("gc --config " + cfg);
  INFO(gc.out);
  CHECK(gc.status == 0);
  CHECK(gc.out.find("evicted: ") != std::string::npos);
  CHECK(gc.out.find("this node's cache keeps at most 4096 bytes") != std::string::npos);
  CHECK(stored_bytes() <= 4096 / 10 * 9);
  auto again = run_tributary("gc --config " + cfg);
  CHECK(again.out.find("in the bucket only") != std::string::npos);
  CHECK(again.out.find("not in the store") == std::string::npos);
  // Nothing is lost: every blob is read back from the bucket.
  std::vector<std::string> contents;
  for (const auto& [path, bytes] : site.content) {
    contents.push_back(bytes);
  }
  read_back(dir / "data", s3, db.conninfo(), contents);
}

TEST_CASE("tributary gc with the s3 store: rows of blobs named nowhere go a grace period after they are marked, "
          "then the objects they leave empty, and a blob named again meanwhile is uploaded again and kept") {
  Upstream up;
  Site site(up);
  site.put_numbered(20, "/res/g", "garbage ");
  site.put("/big.bin", std::string(2u << 20, 'z'));
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  TempDatabase db;
  ScratchDir dir("bucket-gc");
  const auto s3 = s3_config();
  const std::string cfg = write_config(dir / "c.json", {{"database", db.conninfo()},
                                                        {"data_dir", (dir / "data").string()},
                                                        {"content", s3_content(s3)},
                                                        {"sources", {{{"name", "up"}, {"url", up.url("/")}}}}});
  REQUIRE(run_tributary("migrate --config " + cfg).status == 0);
  REQUIRE(run_tributary("sync --config " + cfg + " --baseline").status == 0);
  const std::string conninfo = db.conninfo();
  const auto sql = [&](const std::string& statement) {
    pqxx::connection c(conninfo);
    pqxx::work tx(c);
    tx.exec0(statement);
    tx.commit();
  };
  const auto scalar = [&](const std::string& query) {
    pqxx::connection c(conninfo);
    pqxx::read_transaction tx(c);
    return tx.exec1(query)[0].as<std::string>();
  };
  CHECK(count(conninfo, "SELECT count(*) FROM content_object") == 21);
  const std::string first_pack = scalar("SELECT min(object) FROM content_object WHERE object LIKE 'packs/%'");
  const std::string big = "blobs/" + rs::hash_hex(rs::HashAlgorithm::sha256, std::string(2u << 20, 'z'));
  store::S3Client client(s3);
  REQUIRE(client.head(big).value().has_value());
  // g10..g19 and the large one named nowhere any more (as if deleted
  // upstream, and their changes gone with the change log's retention).
  sql("DELETE FROM change_log");
  sql("UPDATE resource SET state = 'deleted' WHERE uri ~ '/res/g1[0-9]\\.txt$' OR uri LIKE '%/big.bin'");
  auto gc = run_tributary("gc --config " + cfg + " --grace 0s");
  INFO(gc.out);
  CHECK(gc.status == 0);
  CHECK(gc.out.find("bucket: 21 blobs placed; 11 newly marked, 11 waiting out the grace period") !=
        std::string::npos);
  CHECK(count(conninfo, "SELECT count(*) FROM content_object") == 21); // marked, not yet removed

  // Meanwhile g10's bytes are stored again, by a writer: the marked row
  // counts as absent, so they go up again (a pack of their own) and the
  // mark is cleared; then a resource names them.
  const std::string g10 = rs::hash_hex(rs::HashAlgorithm::sha256, "garbage 10");
  {
    auto blobs = store::BlobStore::open(dir / "other");
    REQUIRE(blobs);
    auto tier = store::ObjectTier::open(s3, std::make_shared<store::PgObjectIndex>(conninfo));
    REQUIRE(tier);
    (*blobs)->set_remote(*tier);
    REQUIRE((*blobs)->put("garbage 10"));
    CHECK((*tier)->counters().blobs_uploaded == 1);
  }
  CHECK(count(conninfo, "SELECT count(*) FROM content_object WHERE sha256 = '" + g10 + "' AND condemned_at IS NULL") ==
        1);
  CHECK(scalar("SELECT object FROM content_object WHERE sha256 = '" + g10 + "'") != first_pack);
  sql("UPDATE resource SET state = 'live' WHERE uri LIKE '%/res/g10.txt'");

  auto second = run_tributary("gc --config " + cfg + " --grace 0s");
  INFO(second.out);
  CHECK(second.out.find("removed 10 (2097242 bytes); objects deleted: 1") != std::string::npos);
  CHECK(count(conninfo, "SELECT count(*) FROM content_object") == 11);
  CHECK_FALSE(client.head(big).value().has_value()); // its only blob went
  CHECK(client.head(first_pack).value().has_value()); // g0..g9 are still in it

  // Then g0..g9 too: two collections later their pack object is gone; g10
  // is read from its own.
  sql("UPDATE resource SET state = 'deleted' WHERE uri ~ '/res/g[0-9]\\.txt$'");
  REQUIRE(run_tributary("gc --config " + cfg + " --grace 0s").status == 0);
  auto third = run_tributary("gc --config " + cfg + " --grace 0s");
  INFO(third.out);
  CHECK(third.out.find("objects deleted: 1") != std::string::npos);
  CHECK_FALSE(client.head(first_pack).value().has_value());
  CHECK(count(conninfo, "SELECT count(*) FROM content_object") == 1);
  auto tier = store::ObjectTier::open(s3, std::make_shared<store::PgObjectIndex>(conninfo));
  REQUIRE(tier);
  std::string bytes;
  REQUIRE((*tier)->download(g10, [&](const char* d, size_t n) {
    bytes.append(d, n);
    return true;
  }));
  CHECK(bytes == "garbage 10");
}

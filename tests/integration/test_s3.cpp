// The S3 content tier against a real S3 server: the throwaway Ceph RADOS
// Gateway deploy/test.sh starts (TRIBUTARY_TEST_S3_*). Each test has a
// bucket of its own. Tests fail, never skip, when the server is missing.
#include "../common/scratch_dir.h"
#include "daemon_client.h"
#include "http_get.h"
#include "process.h"
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

namespace {

store::S3Config s3_config() {
  const char* endpoint = std::getenv("TRIBUTARY_TEST_S3_ENDPOINT");
  REQUIRE_MESSAGE(endpoint != nullptr, "TRIBUTARY_TEST_S3_ENDPOINT is not set: run the tests through deploy/test.sh");
  static std::atomic<int> n{0};
  store::S3Config c;
  c.endpoint = endpoint;
  c.bucket = "t" + std::to_string(::getpid()) + "-" + std::to_string(n++);
  c.access_key = std::getenv("TRIBUTARY_TEST_S3_ACCESS_KEY") ? std::getenv("TRIBUTARY_TEST_S3_ACCESS_KEY") : "";
  c.secret_key = std::getenv("TRIBUTARY_TEST_S3_SECRET_KEY") ? std::getenv("TRIBUTARY_TEST_S3_SECRET_KEY") : "";
  return c;
}

std::string get_all(store::S3Client& s3, const std::string& key, uint64_t offset, uint64_t length) {
  std::string out;
  auto r = s3.get(key, offset, length, [&](const char* d, size_t n) {
    out.append(d, n);
    return true;
  });
  REQUIRE_MESSAGE(r, (r ? std::string() : r.error().message));
  return out;
}

// A config's "content" for the test bucket, its keys read from the
// environment deploy/test.sh sets.
json s3_content(const store::S3Config& s3) {
  return {{"store", "s3"},
          {"endpoint", s3.endpoint},
          {"bucket", s3.bucket},
          {"access_key_env", "TRIBUTARY_TEST_S3_ACCESS_KEY"},
          {"secret_key_env", "TRIBUTARY_TEST_S3_SECRET_KEY"}};
}

std::string write_config(const std::filesystem::path& path, const json& config) {
  std::ofstream(path) << config.dump(2);
  return path.string();
}

// Reads each of `contents` through a blob store at `root` (empty or not)
// with the test bucket's tier: what it lacks comes from the bucket.
void read_back(const std::filesystem::path& root, const store::S3Config& s3, const std::string& conninfo,
               const std::vector<std::string>& contents) {
  auto blobs = store::BlobStore::open(root);
  REQUIRE(blobs);
  auto tier = store::ObjectTier::open(s3, std::make_shared<store::PgObjectIndex>(conninfo));
  REQUIRE(tier);
  (*blobs)->set_remote(*tier);
  for (const auto& bytes : contents) {
    auto got = (*blobs)->read(rs::hash_hex(rs::HashAlgorithm::sha256, bytes));
    REQUIRE_MESSAGE(got, (got ? std::string() : got.error().message));
    CHECK(*got == bytes);
  }
}

long count(const std::string& conninfo, const std::string& sql) {
  pqxx::connection c(conninfo);
  pqxx::read_transaction tx(c);
  return tx.exec1(sql)[0].as<long>();
}

} // namespace

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

namespace {

// One address in front of several nodes, as a load balancer: each request
// goes to the next node in turn, and to the one after when a node does not
// answer (a node killed midway).
class Rotator {
public:
  explicit Rotator(std::vector<std::string> nodes) : m_nodes(std::move(nodes)) {
    m_server.Get(".*", [this](const httplib::Request& req, httplib::Response& res) { forward(req, res); });
    m_running = std::make_unique<ServerThread>(m_server);
  }
  ~Rotator() { m_running.reset(); } // stopped while what forward() uses is still here
  std::string base() const { return m_running->base(); }
  // Requests each node answered.
  std::vector<size_t> answered() const {
    std::lock_guard lock(m_mutex);
    return m_answered;
  }

private:
  void forward(const httplib::Request& req, httplib::Response& res) {
    httplib::Headers headers;
    for (const auto& [name, value] : req.headers) {
      if (name != "Host" && name != "REMOTE_ADDR" && name != "REMOTE_PORT" && name != "LOCAL_ADDR" &&
          name != "LOCAL_PORT") {
        headers.emplace(name, value);
      }
    }
    const size_t first = m_next++;
    for (size_t k = 0; k < m_nodes.size(); ++k) {
      const size_t i = (first + k) % m_nodes.size();
      httplib::Client c(m_nodes[i]);
      c.set_connection_timeout(1);
      c.set_read_timeout(30);
      auto r = c.Get(req.target, headers);
      if (!r) {
        continue;
      }
      {
        std::lock_guard lock(m_mutex);
        ++m_answered[i];
      }
      res.status = r->status;
      for (const auto& [name, value] : r->headers) {
        if (name != "Content-Length" && name != "Transfer-Encoding" && name != "Connection" &&
            name != "Keep-Alive") {
          res.headers.emplace(name, value);
        }
      }
      res.body = std::move(r->body);
      return;
    }
    res.status = 502;
  }

  std::vector<std::string> m_nodes;
  httplib::Server m_server;
  std::unique_ptr<ServerThread> m_running;
  std::atomic<size_t> m_next{0};
  mutable std::mutex m_mutex;
  std::vector<size_t> m_answered = std::vector<size_t>(m_nodes.size());
};

// A change as a log holds it: the resource, the change, the sha-256 of the
// bytes (empty for a deletion).
using Logged = std::tuple<std::string, std::string, std::string>;

// The changes a database logged for the source named `source` after its
// first `skip` (the baseline's creations), sorted; a deletion without the
// hash of what it deleted.
std::vector<Logged> logged_changes(const std::string& conninfo, const std::string& source, size_t skip) {
  pqxx::connection c(conninfo);
  pqxx::read_transaction tx(c);
  std::vector<Logged> out;
  size_t n = 0;
  for (const auto& row : tx.exec_params("SELECT l.uri, l.change, CASE WHEN l.change = 'deleted' THEN '' "
                                        "ELSE l.sha256 END FROM change_log l JOIN feed f ON f.id = l.feed_id "
                                        "JOIN source s ON s.id = f.source_id WHERE s.name = $1 ORDER BY l.seq",
                                        source)) {
    if (n++ >= skip) {
      out.emplace_back(row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::string>());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Live resources of `source`: URI -> sha-256 of the bytes held.
std::map<std::string, std::string> live_of(const std::string& conninfo, const std::string& source) {
  pqxx::connection c(conninfo);
  pqxx::read_transaction tx(c);
  std::map<std::string, std::string> out;
  for (const auto& row : tx.exec_params("SELECT r.uri, r.blob_sha256 FROM resource r JOIN feed f ON f.id = r.feed_id "
                                        "JOIN source s ON s.id = f.source_id WHERE s.name = $1 AND r.state = 'live'",
                                        source)) {
    out[row[0].as<std::string>()] = row[1].as<std::string>();
  }
  return out;
}

} // namespace

TEST_CASE("S3 content: three `tributary run` nodes on one database and bucket follow 6 changing sources, one is "
          "killed midway, and a Tributary following them through one address in rotation ends identical to the "
          "sources, with no change lost or repeated") {
  // Six sources of 30 resources. Once everything is followed, each source
  // makes 50 changes over 20 rounds: a creation, an update and (in the
  // first 10 rounds) a deletion a round, each to a resource of its own, so
  // no two changes can fold into one.
  constexpr int k_sources = 6, k_rounds = 20;
  std::vector<std::unique_ptr<Upstream>> ups;
  std::vector<std::unique_ptr<Site>> sites;
  std::vector<std::pair<std::string, std::string>> sources;
  for (int i = 0; i < k_sources; ++i) {
    ups.push_back(std::make_unique<Upstream>());
    sites.push_back(std::make_unique<Site>(*ups.back()));
    sites.back()->put_numbered(30, "/res/", "source " + std::to_string(i) + " resource ");
    sites.back()->publish_start(ts("2026-01-01T00:00:00Z"));
    ups.back()->set_delay(std::chrono::milliseconds(20)); // runs last, so a kill finds one in progress
    sources.emplace_back("s" + std::to_string(i), ups.back()->url("/"));
  }
  TempDatabase db;
  const auto s3 = s3_config();
  ScratchDir dir("three");
  // The nodes, each with its own data_dir (its own machine), behind one
  // address that all of them publish as theirs.
  struct Node {
    std::string cfg, log, base;
    pid_t pid = 0;
  };
  std::vector<Node> nodes(3);
  std::vector<int> ports;
  std::vector<std::string> bases;
  for (size_t k = 0; k < nodes.size(); ++k) {
    ports.push_back(free_port());
    bases.push_back("http://127.0.0.1:" + std::to_string(ports.back()));
  }
  Rotator rotator(bases);
  for (size_t k = 0; k < nodes.size(); ++k) {
    const auto node_dir = dir / ("node" + std::to_string(k));
    std::filesystem::create_directories(node_dir);
    std::ofstream(node_dir / "token") << "token\n";
    json config = json::parse(config_text(db.conninfo(), node_dir, ports[k], sources));
    config["public_url"] = rotator.base();
    config["change_list_part_size"] = 40; // parts close, and Change Dump packages are built and shared
    config["content"] = s3_content(s3);
    nodes[k].cfg = write_config(node_dir / "tributary.json", config);
    nodes[k].log = (node_dir / "run.log").string();
    nodes[k].base = bases[k];
  }
  REQUIRE(run_tributary("migrate --config " + nodes[0].cfg).status == 0);
  for (auto& n : nodes) {
    n.pid = spawn_tributary({"run", "--config", n.cfg}, n.log);
  }
  struct Guards {
    std::vector<Node>& nodes;
    ~Guards() {
      for (auto& n : nodes) {
        ProcessGuard g(n.pid);
      }
    }
  } guards{nodes};
  for (int i = 0; i < k_sources; ++i) {
    CHECK(wait_for(nodes[1].base, [&](const json& st) { return in_sync(st, "s" + std::to_string(i), 30); }, 60));
  }

  // The follower: a Tributary of its own (its own database, the local
  // store), each of the three's sets a source of it, through the rotator.
  pub::UrlScheme published(rotator.base());
  std::vector<std::pair<std::string, std::string>> followed;
  for (int i = 0; i < k_sources; ++i) {
    followed.emplace_back("s" + std::to_string(i), published.capability_list("s" + std::to_string(i)));
  }
  TestDaemon follower(followed);
  follower.start();
  for (int i = 0; i < k_sources; ++i) {
    CHECK(wait_for(follower.base, [&](const json& st) { return in_sync(st, "s" + std::to_string(i), 30); }, 60));
  }

  // The changes, and the kill of node 0 in the middle of a run of its.
  const rs::Timestamp t0 = ts("2026-01-01T00:00:00Z");
  std::vector<std::vector<rs::Entry>> change_lists(k_sources);
  std::vector<std::vector<Logged>> made(k_sources);
  long long killed_at = 0;
  for (int round = 0; round < k_rounds; ++round) {
    for (int i = 0; i < k_sources; ++i) {
      Site& site = *sites[i];
      const auto at = [&](int k) { return t0 + std::chrono::seconds(60 * round + k + 1); };
      const std::string created = "/res/new" + std::to_string(round) + ".txt";
      const std::string updated = "/res/" + std::to_string(round) + ".txt";
      const std::string bytes_c = "source " + std::to_string(i) + " created in round " + std::to_string(round);
      const std::string bytes_u = "source " + std::to_string(i) + " updated in round " + std::to_string(round);
      site.put(created, bytes_c);
      site.put(updated, bytes_u);
      change_lists[i].push_back(change_entry(ups[i]->url(created), rs::Change::created, at(0), bytes_c));
      change_lists[i].push_back(change_entry(ups[i]->url(updated), rs::Change::updated, at(1), bytes_u));
      made[i].emplace_back(ups[i]->url(created), "created", rs::hash_hex(rs::HashAlgorithm::sha256, bytes_c));
      made[i].emplace_back(ups[i]->url(updated), "updated", rs::hash_hex(rs::HashAlgorithm::sha256, bytes_u));
      if (round < 10) {
        const std::string deleted = "/res/" + std::to_string(29 - round) + ".txt";
        site.erase(deleted);
        change_lists[i].push_back(change_entry(ups[i]->url(deleted), rs::Change::deleted, at(2)));
        made[i].emplace_back(ups[i]->url(deleted), "deleted", "");
      }
      site.publish_change_list("/cl.xml", t0, std::nullopt, change_lists[i]);
    }
    if (round == k_rounds / 2) {
      const bool holding = [&] {
        for (int tries = 0; tries < 300; ++tries) {
          if (holds_running_lease(db.conninfo(), nodes[0].pid)) {
            return true;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return false;
      }();
      CHECK(holding);
      killed_at = count(db.conninfo(), "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint");
      ::kill(nodes[0].pid, SIGKILL);
      ::waitpid(nodes[0].pid, nullptr, 0);
      nodes[0].pid = 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }

  // Every source is taken over within a bounded time: a run started after
  // the kill succeeded for each.
  const auto taken_over = [&] {
    return count(db.conninfo(), "SELECT count(DISTINCT source_id) FROM sync_run WHERE status = 'succeeded' AND "
                                "started_at > to_timestamp(" + std::to_string(killed_at) + " / 1000000.0)");
  };
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (taken_over() < k_sources && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(taken_over() == k_sources);

  // The three end with each source as it is, and logged each change once.
  for (int i = 0; i < k_sources; ++i) {
    const std::string name = "s" + std::to_string(i);
    CAPTURE(name);
    std::map<std::string, std::string> expected;
    for (const auto& [path, bytes] : sites[i]->content) {
      expected[ups[i]->url(path)] = rs::hash_hex(rs::HashAlgorithm::sha256, bytes);
    }
    CHECK(wait_for(nodes[1].base, [&](const json& st) { return in_sync(st, name, expected.size()); }, 30));
    CHECK(live_of(db.conninfo(), name) == expected);
    std::sort(made[i].begin(), made[i].end());
    CHECK(logged_changes(db.conninfo(), name, 30) == made[i]);

    // The follower too, under the names the three publish.
    std::map<std::string, std::string> republished;
    for (const auto& [uri, sha] : expected) {
      republished[published.resource(name, uri)] = sha;
    }
    std::vector<Logged> followed_changes;
    for (const auto& [uri, change, sha] : made[i]) {
      followed_changes.emplace_back(published.resource(name, uri), change, sha);
    }
    std::sort(followed_changes.begin(), followed_changes.end());
    // The follower's rotation still names the killed node: a run that hits it
    // fails and backs off, so on a loaded 2-core host it may take longer than
    // the nodes themselves (one CI run: 46 s for this case, 14 s alone).
    CHECK(wait_for(follower.base, [&](const json& st) { return in_sync(st, name, expected.size()); }, 90));
    CHECK(live_of(follower.db.conninfo(), name) == republished);
    CHECK(logged_changes(follower.db.conninfo(), name, 30) == followed_changes);
  }
  // Each set's dumps, read through the one address: every package a
  // document lists (whichever node answered for it) is served, by
  // whichever node answers for that, with the bytes its hash says.
  CHECK(count(db.conninfo(), "SELECT count(*) FROM shared_dump") == k_sources);
  CHECK(count(db.conninfo(), "SELECT count(DISTINCT set_name) FROM shared_dump_file WHERE part IS NOT NULL") ==
        k_sources);
  for (int i = 0; i < k_sources; ++i) {
    const std::string name = "s" + std::to_string(i);
    for (const std::string& dump : {published.resource_dump(name), published.change_dump(name)}) {
      for (int again = 0; again < 3; ++again) {
        CAPTURE(dump);
        Got listing = http_get(dump);
        REQUIRE(listing.status == 200);
        auto doc = rs::parse_document(listing.body);
        REQUIRE(doc.summary.valid());
        REQUIRE_FALSE(doc.document.entries.empty());
        for (const auto& e : doc.document.entries) {
          for (int node = 0; node < 2; ++node) {
            Got zip = http_get(e.loc);
            CHECK(zip.status == 200);
            CHECK(rs::hash_hex(rs::HashAlgorithm::sha256, zip.body) == e.md->hash[0].hex);
          }
        }
      }
    }
  }
  // Every node answered through the one address, and the follower's runs
  // never fell back from a document one node offered and another lacked.
  for (size_t answered : rotator.answered()) {
    CHECK(answered > 0);
  }
  CHECK(count(follower.db.conninfo(), "SELECT count(*) FROM sync_run WHERE status IN ('failed', 'partial')") == 0);
  CHECK(follower.log_text().find("unusable") == std::string::npos);
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

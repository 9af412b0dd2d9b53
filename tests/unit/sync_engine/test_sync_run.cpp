// The sync run's logic without PostgreSQL or a network: the in-memory store
// and an upstream of files (file:// URLs), written with our own writer in
// the shapes real Sources publish. The PostgreSQL runs stay in the
// integration tests.
#include "../../common/documents.h"
#include "resourcesync/hash.h"
#include "resourcesync/writer.h"
#include "sync_engine/fetcher.h"
#include "store/blob/blob_store.h"
#include "store/memory_store.h"
#include "sync_engine/sync.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

using namespace tributary;
namespace fs = std::filesystem;

namespace {

using test::ts;

// A Source in a folder: caps.xml, rl.xml, cl.xml and res/<name>.
struct FileSource {
  fs::path dir;
  std::map<std::string, std::string> content; // name -> bytes

  // A Source holding `initial`, first seen with its Resource List at
  // 2026-01-01 and a Change List from then with no change yet.
  explicit FileSource(const std::map<std::string, std::string>& initial) : FileSource() {
    for (const auto& [name, bytes] : initial) {
      put(name, bytes);
    }
    publish_resource_list(ts("2026-01-01T00:00:00Z"));
    publish_change_list(ts("2026-01-01T00:00:00Z"), {});
  }
  FileSource() {
    dir = fs::temp_directory_path() / ("tributary-sync-run-" + std::to_string(::getpid()) + "-" +
                                       std::to_string(counter()++));
    fs::remove_all(dir);
    fs::create_directories(dir / "res");
    rs::Document caps = test::make_doc("capabilitylist");
    caps.entries.push_back(test::cap_entry(url("rl.xml"), "resourcelist"));
    caps.entries.push_back(test::cap_entry(url("cl.xml"), "changelist"));
    write("caps.xml", caps);
  }
  ~FileSource() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  static int& counter() {
    static int n = 0;
    return n;
  }

  std::string url(const std::string& rel) const { return "file://" + (dir / rel).string(); }
  void write(const std::string& rel, const rs::Document& d) const {
    std::ofstream(dir / rel, std::ios::binary) << rs::write_document(d);
  }
  void put(const std::string& name, const std::string& bytes) {
    content[name] = bytes;
    std::ofstream(dir / "res" / name, std::ios::binary) << bytes;
  }
  void erase(const std::string& name) {
    content.erase(name);
    fs::remove(dir / "res" / name);
  }
  rs::Entry entry(const std::string& name, const std::string& bytes) const {
    rs::Entry e{.loc = url("res/" + name)};
    e.md = rs::Metadata{};
    e.md->hash = {{"md5", rs::hash_hex(rs::HashAlgorithm::md5, bytes)}};
    e.md->length = bytes.size();
    return e;
  }
  // The Resource List of what `content` holds, at `when` (none: no `at`).
  void publish_resource_list(std::optional<rs::Timestamp> when) const {
    rs::Document d = test::make_doc("resourcelist");
    d.header.md->at = when;
    for (const auto& [name, bytes] : content) {
      d.entries.push_back(entry(name, bytes));
    }
    write("rl.xml", d);
  }
  struct Change {
    std::string name;
    rs::Change kind;
    rs::Timestamp time;
  };
  void publish_change_list(rs::Timestamp from, const std::vector<Change>& changes) const {
    rs::Document d = test::make_doc("changelist");
    d.header.md->from = from;
    for (const auto& c : changes) {
      rs::Entry e = c.kind == rs::Change::deleted ? rs::Entry{.loc = url("res/" + c.name)}
                                                  : entry(c.name, content.at(c.name));
      if (!e.md) {
        e.md = rs::Metadata{};
      }
      e.md->change = c.kind;
      e.md->datetime = c.time;
      d.entries.push_back(e);
    }
    write("cl.xml", d);
  }
};

// The engine over a MemoryStore and a blob store in a temporary folder.
struct Engine {
  FileSource& source;
  fs::path data;
  std::shared_ptr<store::MemoryStore> memory = std::make_shared<store::MemoryStore>();
  std::shared_ptr<store::BlobStore> blobs;
  std::unique_ptr<sync::SyncEngine> engine;

  explicit Engine(FileSource& s) : source(s), data(s.dir.string() + "-data") {
    fs::create_directories(data / "tmp");
    blobs = *store::BlobStore::open(data / "blobs");
    engine = std::make_unique<sync::SyncEngine>(memory, blobs, sync::make_default_fetcher(),
                                                std::make_shared<sync::HostThrottle>(), data / "tmp");
  }
  ~Engine() {
    std::error_code ec;
    fs::remove_all(data, ec);
  }

  sync::SourceConfig config() const {
    sync::SourceConfig c;
    c.name = "files";
    c.url = source.url("caps.xml");
    return c;
  }
  sync::SourceReport run(store::RunMode mode, bool repair = false) {
    sync::RunOptions o;
    o.mode = mode;
    o.repair = repair;
    o.refetch_backoff = std::chrono::seconds(0); // retries are due at once
    o.retry.max_attempts = 1;
    return engine->run(config(), o);
  }
  int64_t feed() {
    auto f = memory->feeds();
    REQUIRE(f);
    REQUIRE(f->size() == 1);
    return f->front().feed_id;
  }
  // What we hold live: name -> bytes, read back from the blob store.
  std::map<std::string, std::string> held() {
    std::map<std::string, std::string> out;
    const std::string prefix = source.url("res/");
    auto live = memory->live_resources(feed(), "", 1000);
    REQUIRE(live);
    for (const auto& r : *live) {
      auto bytes = blobs->read(*r.blob_sha256);
      REQUIRE(bytes);
      out[r.uri.substr(prefix.size())] = *bytes;
    }
    return out;
  }
  // The change log: "created a", "deleted b", ...
  std::vector<std::string> log() {
    std::vector<std::string> out;
    const std::string prefix = source.url("res/");
    auto changes = memory->changes({feed()}, 0, 1000);
    REQUIRE(changes);
    for (const auto& c : *changes) {
      out.push_back(std::string(rs::to_string(c.change)) + " " + c.resource.uri.substr(prefix.size()));
    }
    return out;
  }
};

bool has_note(const sync::SourceReport& r, const std::string& part) {
  for (const auto& n : r.notes) {
    if (n.find(part) != std::string::npos) {
      return true;
    }
  }
  return false;
}

} // namespace

TEST_CASE("sync run: a baseline holds what the Resource List names, and deletes what it no longer names") {
  FileSource src({{"a", "alpha"}, {"b", "bravo"}, {"c", "charlie"}});
  Engine e(src);
  auto r = e.run(store::RunMode::baseline);
  REQUIRE(r.status == store::RunStatus::succeeded);
  CHECK(r.counters.created == 3);
  CHECK(e.held() == src.content);
  CHECK(e.memory->watermark(e.feed())->baseline_at == ts("2026-01-01T00:00:00Z"));

  src.erase("c");
  src.put("a", "alpha v2");
  src.publish_resource_list(ts("2026-01-02T00:00:00Z"));
  r = e.run(store::RunMode::baseline);
  REQUIRE(r.status == store::RunStatus::succeeded);
  CHECK(r.counters.updated == 1);
  CHECK(r.counters.deleted == 1);
  CHECK(r.counters.unchanged == 1);
  CHECK(e.held() == src.content);
}

TEST_CASE("sync run: incremental applies each change after the watermark once, in order") {
  FileSource src({{"a", "alpha"}, {"b", "bravo"}});
  Engine e(src);
  auto r = e.run(store::RunMode::incremental); // never synced: baselines first
  REQUIRE(r.status == store::RunStatus::succeeded);
  CHECK(has_note(r, "never synced"));

  src.put("a", "alpha v2");
  src.put("d", "delta");
  src.erase("b");
  src.publish_change_list(ts("2026-01-01T00:00:00Z"), {{"a", rs::Change::updated, ts("2026-01-02T00:00:00Z")},
                                                       {"d", rs::Change::created, ts("2026-01-02T00:00:01Z")},
                                                       {"b", rs::Change::deleted, ts("2026-01-02T00:00:02Z")}});
  r = e.run(store::RunMode::incremental);
  REQUIRE(r.status == store::RunStatus::succeeded);
  CHECK(r.counters.created == 1);
  CHECK(r.counters.updated == 1);
  CHECK(r.counters.deleted == 1);
  CHECK(e.held() == src.content);
  CHECK(e.memory->watermark(e.feed())->last_time == ts("2026-01-02T00:00:02Z"));

  // The same Change List again: nothing after the watermark.
  r = e.run(store::RunMode::incremental);
  REQUIRE(r.status == store::RunStatus::succeeded);
  CHECK(r.counters.created + r.counters.updated + r.counters.deleted == 0);
  CHECK(e.log() == std::vector<std::string>{"created a", "created b", "updated a", "created d", "deleted b"});
}

TEST_CASE("sync run: a Change List that starts after the watermark re-baselines and says so") {
  FileSource src(std::map<std::string, std::string>{{"a", "alpha"}});
  Engine e(src);
  REQUIRE(e.run(store::RunMode::incremental).status == store::RunStatus::succeeded);

  // Changes in between rolled off upstream: the list now starts later.
  src.put("b", "bravo");
  src.put("c", "charlie");
  src.publish_resource_list(ts("2026-03-01T00:00:00Z"));
  src.publish_change_list(ts("2026-02-01T00:00:00Z"), {{"c", rs::Change::created, ts("2026-02-15T00:00:00Z")}});
  auto r = e.run(store::RunMode::incremental);
  REQUIRE(r.status == store::RunStatus::succeeded);
  CHECK(has_note(r, "re-baselined"));
  CHECK(e.held() == src.content);
}

TEST_CASE("sync run: content that does not verify is kept to retry, and stored as the change it was once it does") {
  FileSource src({{"a", "alpha"}, {"b", "bravo"}});
  std::ofstream(src.dir / "res" / "b", std::ios::binary) << "BRAVO"; // not what the list's md5 says
  Engine e(src);
  auto r = e.run(store::RunMode::baseline);
  CHECK(r.status == store::RunStatus::partial);
  CHECK(r.counters.failed == 1);
  CHECK(e.held() == std::map<std::string, std::string>{{"a", "alpha"}});
  auto due = e.memory->due_retries(e.feed(), ts("2100-01-01T00:00:00Z"), 10);
  REQUIRE(due->size() == 1);
  CHECK(due->front().entry == src.entry("b", "bravo")); // the entry itself, hash and all

  // Still wrong. The Change List is read again from before the list's `at`
  // (the overlap), so its creation of b is tried again beside the retry.
  r = e.run(store::RunMode::incremental);
  CHECK(r.counters.failed >= 1);
  CHECK(e.memory->due_retries(e.feed(), ts("2100-01-01T00:00:00Z"), 10)->size() == 1);

  src.put("b", "bravo"); // fixed upstream
  r = e.run(store::RunMode::incremental);
  REQUIRE(r.status == store::RunStatus::succeeded);
  // Stored by the change read again in the overlap, or by the retry: once.
  CHECK(e.held() == src.content);
  CHECK(e.memory->due_retries(e.feed(), ts("2100-01-01T00:00:00Z"), 10)->empty());
  CHECK(e.log() == std::vector<std::string>{"created a", "created b"});
}

TEST_CASE("sync run: an audit counts what differs from the Resource List, and repair makes it equal") {
  FileSource src({{"a", "alpha"}, {"b", "bravo"}, {"c", "charlie"}});
  Engine e(src);
  REQUIRE(e.run(store::RunMode::baseline).status == store::RunStatus::succeeded);

  src.put("a", "alpha v2"); // changed
  src.erase("b");           // extra (we still hold it)
  src.put("d", "delta");    // missing
  src.publish_resource_list(ts("2026-01-02T00:00:00Z"));
  auto r = e.run(store::RunMode::audit);
  REQUIRE(r.status == store::RunStatus::succeeded);
  CHECK(r.audit.in_sync == 1);
  CHECK(r.audit.changed == 1);
  CHECK(r.audit.extra == 1);
  CHECK(r.audit.missing == 1);
  CHECK(e.held() != src.content); // counting changes nothing

  r = e.run(store::RunMode::audit, /*repair=*/true);
  REQUIRE(r.status == store::RunStatus::succeeded);
  CHECK(has_note(r, "repair"));
  CHECK(e.held() == src.content);
  r = e.run(store::RunMode::audit);
  CHECK(r.audit.in_sync == 3);
  CHECK(r.audit.missing + r.audit.extra + r.audit.changed == 0);
}

TEST_CASE("sync run: a Resource List without 'at' baselines, and the next run applies every change the Change List holds") {
  FileSource src;
  src.put("a", "alpha");
  src.put("b", "bravo");
  src.publish_resource_list(std::nullopt); // as Timbuctoo and older resync publish them
  // Changes older than the list (already in it) and one after it: which is
  // which cannot be told without 'at'.
  src.publish_change_list(ts("2026-01-01T00:00:00Z"), {{"a", rs::Change::created, ts("2026-01-01T00:00:00Z")},
                                                       {"b", rs::Change::created, ts("2026-01-01T00:00:01Z")}});
  Engine e(src);
  auto r = e.run(store::RunMode::baseline);
  REQUIRE(r.status == store::RunStatus::succeeded);
  CHECK(has_note(r, "has no 'at'"));
  CHECK(e.memory->watermark(e.feed())->baseline_at.has_value()); // baselined: not "never synced" again
  CHECK_FALSE(e.memory->watermark(e.feed())->last_time.has_value());

  src.put("c", "charlie");
  src.publish_change_list(ts("2026-01-01T00:00:00Z"), {{"a", rs::Change::created, ts("2026-01-01T00:00:00Z")},
                                                       {"b", rs::Change::created, ts("2026-01-01T00:00:01Z")},
                                                       {"c", rs::Change::created, ts("2026-01-01T00:00:02Z")}});
  r = e.run(store::RunMode::incremental);
  REQUIRE(r.status == store::RunStatus::succeeded);
  CHECK_FALSE(has_note(r, "never synced"));
  CHECK(r.counters.created == 1);
  CHECK(r.counters.unchanged == 2);
  CHECK(e.held() == src.content);
  // The changes the baseline already showed log nothing again.
  CHECK(e.log() == std::vector<std::string>{"created a", "created b", "created c"});
}

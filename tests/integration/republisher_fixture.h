// What the republisher's integration tests share: a store filled by a real
// sync and served (Published), another republisher beside it (Beside), and
// readers that hold or count what goes through them.
#pragma once

#include "../common/scratch_dir.h"
#include "http_get.h"
#include "process.h"
#include "sync_fixture.h"

#include "republisher/server.h"
#include "store/pg/pg_aux_store.h"
#include "store/pg/pg_store.h"

#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

namespace tributary::test {

using store::RunMode;
using store::RunStatus;

// Every request of these tests is answered; one that is not ends the test.
inline Got get(const std::string& url, const httplib::Headers& headers = {}, bool head = false) {
  Got g = http_get(url, headers, head);
  REQUIRE(g.status != 0);
  return g;
}

inline int get_status(const std::string& url) {
  return http_get(url, {}, false, 2).status;
}

// The dump is built in the background; the Capability List then offers it.
inline bool resource_dump_offered(const pub::UrlScheme& urls) {
  return eventually_says(urls.capability_list("up"), "resourcedump.xml", 5);
}

inline std::string header(const Got& g, const char* name) {
  auto it = g.headers.find(name);
  return it == g.headers.end() ? "" : it->second;
}

struct Published {
  Upstream up;
  Site site{up};
  SyncEnv env;
  std::unique_ptr<pub::Republisher> server;
  std::unique_ptr<http::Server> http; // stopped before the republisher goes
  std::string base;

  // `dumps`: also publish Resource Dumps (packages of `package_entries`).
  // `extra`: more resources (path -> bytes).
  explicit Published(bool dumps = false, size_t package_entries = 10000, size_t change_list_part = 10000,
                     const std::map<std::string, std::string>& extra = {}, uint64_t package_bytes = 1ull << 30,
                     std::chrono::milliseconds resource_list_min_interval = std::chrono::milliseconds(0),
                     bool archives = false, size_t oai_page_size = 100) {
    for (const auto& [path, bytes] : extra) {
      site.put(path, bytes);
    }
    site.put("/res/a.txt", "alpha");
    site.put("/res/b.txt", "bravo bravo");
    site.put("/res/c.txt", "charlie");
    site.publish_start(ts("2026-01-01T00:00:00Z"));
    REQUIRE(env.run(SyncEnv::source(up.url("/")), RunMode::incremental).status == RunStatus::succeeded);
    site.erase("/res/c.txt");
    site.publish_change_list("/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt,
                             {change_entry(up.url("/res/c.txt"), rs::Change::deleted, ts("2026-01-02T00:00:00Z"))});
    REQUIRE(env.run(SyncEnv::source(up.url("/")), RunMode::incremental).status == RunStatus::succeeded);
    pub::PublishOptions o;
    const int port = free_port();
    o.public_url = "http://127.0.0.1:" + std::to_string(port) + "/";
    o.change_list_part = change_list_part;
    o.document_dir = env.data / "documents";
    o.resource_list_min_interval = resource_list_min_interval;
    o.oai.page_size = oai_page_size;
    if (dumps) {
      o.dump_dir = env.data / "dumps";
      o.dump_package_entries = package_entries;
      o.dump_package_bytes = package_bytes;
    }
    if (archives) {
      auto aux = store::PgAuxStore::open(env.db.conninfo());
      REQUIRE(aux);
      o.archive = std::shared_ptr<store::PgAuxStore>(std::move(*aux));
    }
    server = std::make_unique<pub::Republisher>(env.store, env.blobs, o);
    REQUIRE(server->start());
    http::ServerOptions so;
    so.port = port;
    http = std::make_unique<http::Server>(so, server->handler());
    REQUIRE(http->start());
    base = "http://127.0.0.1:" + std::to_string(port);
  }

  // Retention past `until`: the `parts` closed Change List parts up to it
  // go into the archives, then out of the change log.
  void compact_through(rs::Timestamp until, long parts) {
    const auto plan = server->compactable(until + std::chrono::microseconds(1));
    REQUIRE(plan.compact.size() == 1);
    REQUIRE(server->archive(plan.compact));
    REQUIRE(server->archive(plan.compact)); // again: nothing more to do
    REQUIRE(*env.store->compact_change_log(plan.compact, plan.published) == parts);
    server->refresh_soon();
  }

  // The upstream updates a.txt, creates d.txt and deletes b.txt; this
  // Tributary applies them.
  void change_upstream() {
    site.put("/res/a.txt", "alpha v2");
    site.put("/res/d.txt", "delta");
    site.erase("/res/b.txt");
    site.publish_change_list(
        "/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt,
        {change_entry(up.url("/res/c.txt"), rs::Change::deleted, ts("2026-01-02T00:00:00Z")),
         change_entry(up.url("/res/a.txt"), rs::Change::updated, ts("2026-01-03T00:00:00Z"), "alpha v2"),
         change_entry(up.url("/res/d.txt"), rs::Change::created, ts("2026-01-03T00:00:01Z"), "delta"),
         change_entry(up.url("/res/b.txt"), rs::Change::deleted, ts("2026-01-03T00:00:02Z"))});
    REQUIRE(env.run(SyncEnv::source(up.url("/")), RunMode::incremental).status == RunStatus::succeeded);
  }
};

// Another republisher over a Published's store, on a port of its own:
// documents read through `reader`, content lookups and Resource Lists
// through `lookups` (nullptr: `reader`); `public_url` empty: its own
// address. Stopped (server first) when it goes.
struct Beside {
  int port = free_port();
  std::string base = "http://127.0.0.1:" + std::to_string(port);
  pub::UrlScheme urls;
  std::unique_ptr<pub::Republisher> server;
  std::unique_ptr<http::Server> http;

  Beside(Published& p, std::shared_ptr<store::StoreReader> reader, std::shared_ptr<store::StoreReader> lookups,
         const std::string& folder, size_t change_list_part = 10000, const std::string& public_url = "",
         std::chrono::milliseconds poll_interval = std::chrono::milliseconds(1000))
      : urls(public_url.empty() ? base + "/" : public_url) {
    pub::PublishOptions o;
    o.public_url = urls.base() + "/";
    o.poll_interval = poll_interval;
    o.change_list_part = change_list_part;
    o.document_dir = p.env.data / folder;
    server = std::make_unique<pub::Republisher>(std::move(reader), p.env.blobs, o, std::move(lookups));
    REQUIRE(server->start());
    http::ServerOptions so;
    so.port = port;
    http = std::make_unique<http::Server>(so, server->handler());
    REQUIRE(http->start());
  }
  ~Beside() {
    http->stop();
    server->stop();
  }
};

// Tributary B holds what A's upstream holds, under A's URLs, and `path`'s
// via link names the original URI.
// A's upstream content under A's URLs: what a Tributary following A holds.
inline std::map<std::string, std::string> mirrored(Published& a, const pub::UrlScheme& urls) {
  std::map<std::string, std::string> out;
  for (const auto& [p, bytes] : a.site.content) {
    out[urls.resource("up", a.up.url(p))] = bytes;
  }
  return out;
}

inline void check_second_level(Published& a, SyncEnv& b, const pub::UrlScheme& urls, const std::string& path) {
  CHECK(b.live() == mirrored(a, urls));
  auto held = b.store->resources(1, {urls.resource("up", a.up.url(path))});
  REQUIRE(held);
  REQUIRE(held->size() == 1);
  const rs::Link* via = nullptr;
  for (const auto& l : held->begin()->second.links) {
    via = l.rel == "via" ? &l : via;
  }
  REQUIRE(via);
  CHECK(via->href == a.up.url(path));
}

// The main reader, held: what the daemon's one connection looks like while
// the sync engine commits a batch (every call waits for the gate).
struct GatedReader : store::StoreReader {
  std::shared_ptr<store::StoreReader> inner;
  std::shared_mutex gate;
  explicit GatedReader(std::shared_ptr<store::StoreReader> i) : inner(std::move(i)) {}
  template <typename F> auto through(F&& f) {
    std::shared_lock lock(gate);
    return f(*inner);
  }
  Result<std::vector<store::FeedInfo>> feeds() override {
    return through([](auto& r) { return r.feeds(); });
  }
  Result<std::vector<store::ResourceRecord>> live_resources(int64_t f, const std::string& a, size_t n) override {
    return through([&](auto& r) { return r.live_resources(f, a, n); });
  }
  Result<std::optional<store::ResourceRecord>> resource(int64_t f, const std::string& uri) override {
    return through([&](auto& r) { return r.resource(f, uri); });
  }
  Result<std::vector<store::LoggedChange>> changes(const std::vector<int64_t>& f, int64_t a, size_t n) override {
    return through([&](auto& r) { return r.changes(f, a, n); });
  }
  Result<std::vector<store::ChangedKey>> changed_keys(const std::vector<int64_t>& f, int64_t a, int64_t u,
                                                      size_t n) override {
    return through([&](auto& r) { return r.changed_keys(f, a, u, n); });
  }
  Result<int64_t> last_seq() override {
    return through([](auto& r) { return r.last_seq(); });
  }
  Result<std::vector<int64_t>> changed_feeds(int64_t a, int64_t u) override {
    return through([&](auto& r) { return r.changed_feeds(a, u); });
  }
  Result<std::vector<store::SourceStats>> source_stats() override {
    return through([](auto& r) { return r.source_stats(); });
  }
  Result<std::vector<store::RunInfo>> recent_runs(const std::string& n, size_t l) override {
    return through([&](auto& r) { return r.recent_runs(n, l); });
  }
};

// Counts the change-log reads per set of feeds (what rendering a set's
// Change List costs).
struct CountingReader : GatedReader {
  std::mutex m;
  std::map<std::vector<int64_t>, int> reads;
  using GatedReader::GatedReader;
  Result<std::vector<store::LoggedChange>> changes(const std::vector<int64_t>& f, int64_t a, size_t n) override {
    {
      std::lock_guard lock(m);
      ++reads[f];
    }
    return GatedReader::changes(f, a, n);
  }
  int of(const std::vector<int64_t>& f) {
    std::lock_guard lock(m);
    return reads[f];
  }
};

} // namespace tributary::test

#pragma once

// Shared set-up for sync tests: a fresh database, a data directory, the
// engine, and helpers that build upstream documents with Tributary's own
// writer and read back what the store holds.
#include "../common/documents.h"
#include "pg_fixture.h"
#include "upstream.h"

#include "resourcesync/hash.h"
#include "store/pg/pg_store.h"
#include "sync_engine/sync.h"

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <unistd.h>

namespace tributary::test {

// An entry describing `content` at `loc`.
inline rs::Entry resource_entry(const std::string& loc, const std::string& content,
                                std::optional<rs::Timestamp> lastmod = std::nullopt) {
  rs::Entry e{.loc = loc};
  e.lastmod = lastmod;
  e.md = rs::Metadata{};
  e.md->hash = {{"md5", rs::hash_hex(rs::HashAlgorithm::md5, content)}};
  e.md->length = content.size();
  e.md->type = "text/plain";
  return e;
}

// A change entry; 1.1 style (datetime) unless `v10`, which uses lastmod.
inline rs::Entry change_entry(const std::string& loc, rs::Change change, rs::Timestamp t,
                              const std::string& content = "", bool v10 = false) {
  rs::Entry e{.loc = loc};
  e.md = rs::Metadata{};
  e.md->change = change;
  if (v10) {
    e.lastmod = t;
  } else {
    e.md->datetime = t;
    e.lastmod = t;
  }
  if (change != rs::Change::deleted) {
    e.md->hash = {{"md5", rs::hash_hex(rs::HashAlgorithm::md5, content)}};
    e.md->length = content.size();
  }
  return e;
}

// A Source at `up`: Source Description, one Capability List, resources.
struct Site {
  Upstream& up;
  std::map<std::string, std::string> content; // path -> bytes, served as text/plain

  explicit Site(Upstream& u) : up(u) {
    rs::Document sd = make_doc("description");
    sd.entries.push_back(cap_entry(up.url("/caps.xml"), "capabilitylist"));
    up.set_document("/.well-known/resourcesync", sd);
    rs::Document caps = make_doc("capabilitylist");
    caps.header.links.push_back(rs::Link{.rel = "up", .href = up.url("/.well-known/resourcesync")});
    caps.entries.push_back(cap_entry(up.url("/rl.xml"), "resourcelist"));
    caps.entries.push_back(cap_entry(up.url("/cl.xml"), "changelist"));
    up.set_document("/caps.xml", caps);
  }

  void put(const std::string& path, const std::string& bytes) {
    content[path] = bytes;
    up.set(path, bytes, "text/plain");
  }
  // `count` resources: <prefix><i>.txt holding "<body><i>".
  void put_numbered(int count, const std::string& prefix = "/res/", const std::string& body = "resource ") {
    for (int i = 0; i < count; ++i) {
      put(prefix + std::to_string(i) + ".txt", body + std::to_string(i));
    }
  }
  void erase(const std::string& path) {
    content.erase(path);
    up.remove(path);
  }
  // Publishes the Resource List of everything in `content`, snapshot at `at`.
  void publish_resource_list(rs::Timestamp at) {
    rs::Document rl = make_doc("resourcelist");
    rl.header.md->at = at;
    rl.header.links.push_back(rs::Link{.rel = "up", .href = up.url("/caps.xml")});
    for (const auto& [path, bytes] : content) {
      rl.entries.push_back(resource_entry(up.url(path), bytes));
    }
    up.set_document("/rl.xml", rl);
  }
  // A Source as first seen: its Resource List at `at`, and a Change List
  // from then with no change yet.
  void publish_start(rs::Timestamp at) {
    publish_resource_list(at);
    publish_change_list("/cl.xml", at, std::nullopt, {});
  }
  // `from` may be absent, as resync-simulator leaves it when its oldest
  // change is a deletion.
  void publish_change_list(const std::string& path, std::optional<rs::Timestamp> from,
                           std::optional<rs::Timestamp> until, const std::vector<rs::Entry>& entries) {
    rs::Document cl = make_doc("changelist");
    cl.header.md->from = from;
    cl.header.md->until = until;
    cl.header.links.push_back(rs::Link{.rel = "up", .href = up.url("/caps.xml")});
    cl.entries = entries;
    up.set_document(path, cl);
  }
};

// Sources s0, s1, ... of `resources` numbered resources each, every request
// slowed by `delay` so that runs last and overlap (several daemons on one
// database; a kill then finds a run in progress). `body(i)` starts each
// resource's body of source i.
struct SlowSources {
  std::vector<std::unique_ptr<Upstream>> ups;
  std::vector<std::unique_ptr<Site>> sites;
  std::vector<std::pair<std::string, std::string>> sources; // name, URL
  SlowSources(int count, int resources, std::chrono::milliseconds delay,
              const std::function<std::string(int)>& body = [](int) { return std::string("resource "); }) {
    for (int i = 0; i < count; ++i) {
      ups.push_back(std::make_unique<Upstream>());
      sites.push_back(std::make_unique<Site>(*ups.back()));
      sites.back()->put_numbered(resources, "/res/", body(i));
      sites.back()->publish_start(ts("2026-01-01T00:00:00Z"));
      ups.back()->set_delay(delay);
      sources.emplace_back("s" + std::to_string(i), ups.back()->url("/"));
    }
  }
};

struct SyncEnv {
  TempDatabase db;
  std::filesystem::path data;
  std::shared_ptr<store::PgStore> store;
  std::shared_ptr<store::BlobStore> blobs;
  std::unique_ptr<sync::SyncEngine> engine;
  std::shared_ptr<sync::HostThrottle> throttle = std::make_shared<sync::HostThrottle>();

  SyncEnv() {
    static int n = 0;
    data = std::filesystem::temp_directory_path() /
           ("tributary-sync-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    std::filesystem::remove_all(data);
    REQUIRE(store::migrate(db.conninfo()));
    auto s = store::PgStore::open(db.conninfo());
    REQUIRE(s);
    store = std::shared_ptr<store::PgStore>(std::move(*s));
    auto b = store::BlobStore::open(data);
    REQUIRE(b);
    blobs = *b;
    engine = std::make_unique<sync::SyncEngine>(store, blobs, sync::make_default_fetcher(), throttle,
                                                data / "tmp");
  }
  ~SyncEnv() { std::filesystem::remove_all(data); }

  static sync::SourceConfig source(const std::string& url, const std::string& name = "up") {
    sync::SourceConfig s;
    s.name = name;
    s.url = url;
    return s;
  }

  std::chrono::seconds refetch_backoff{60}; // before a failed resource is tried again
  size_t batch_size = 50;                   // small: batches' edges are where bugs hide

  // Runs with a short retry policy, so that tests of failures are quick;
  // `default_retries` keeps the product's.
  sync::SourceReport run(const sync::SourceConfig& s, store::RunMode mode, bool repair = false,
                         bool default_retries = false) {
    sync::RunOptions o;
    o.mode = mode;
    o.refetch_backoff = refetch_backoff;
    o.repair = repair;
    o.batch_size = batch_size;
    if (!default_retries) {
      o.retry.max_attempts = 2;
      o.retry.initial_backoff = std::chrono::milliseconds(5);
    }
    auto r = engine->run(s, o);
    std::string errors;
    for (const auto& e : r.errors) {
      errors += "\n  " + e;
    }
    MESSAGE(r.source << ": " << store::to_string(r.status) << ": " << sync::format_counters(r.counters) << errors);
    return r;
  }

  // uri -> blob bytes for live resources.
  std::map<std::string, std::string> live() {
    std::map<std::string, std::string> out;
    pqxx::connection c(db.conninfo());
    pqxx::read_transaction tx(c);
    for (const auto& row : tx.exec("SELECT uri, blob_sha256 FROM resource WHERE state = 'live'")) {
      auto bytes = blobs->read(row[1].as<std::string>());
      out[row[0].as<std::string>()] = bytes ? *bytes : "<missing blob>";
    }
    return out;
  }
  std::set<std::string> deleted() {
    std::set<std::string> out;
    pqxx::connection c(db.conninfo());
    pqxx::read_transaction tx(c);
    for (const auto& row : tx.exec("SELECT uri FROM resource WHERE state = 'deleted'")) {
      out.insert(row[0].as<std::string>());
    }
    return out;
  }
  // "change uri" lines of the change log, in order.
  std::vector<std::string> log() {
    std::vector<std::string> out;
    pqxx::connection c(db.conninfo());
    pqxx::read_transaction tx(c);
    for (const auto& row : tx.exec("SELECT change, uri FROM change_log ORDER BY seq")) {
      out.push_back(row[0].as<std::string>() + " " + row[1].as<std::string>());
    }
    return out;
  }
  // Whether the counts the triggers keep (feed_stats) equal a count of
  // every resource.
  bool stats_consistent() {
    pqxx::connection c(db.conninfo());
    pqxx::read_transaction tx(c);
    return tx.exec1("SELECT count(*) FROM (SELECT feed_id, live, deleted, bytes FROM feed_stats "
                    "WHERE live <> 0 OR deleted <> 0 OR bytes <> 0 "
                    "EXCEPT SELECT feed_id, count(*) FILTER (WHERE state = 'live'), "
                    "count(*) FILTER (WHERE state = 'deleted'), "
                    "coalesce(sum(length) FILTER (WHERE state = 'live'), 0) FROM resource GROUP BY feed_id) d")[0]
                   .as<int>() == 0 &&
           tx.exec1("SELECT count(*) FROM (SELECT feed_id FROM resource GROUP BY feed_id EXCEPT "
                    "SELECT feed_id FROM feed_stats) m")[0]
                   .as<int>() == 0;
  }
  // uri -> attempts of the resources waiting to be fetched again.
  std::map<std::string, int> retries() {
    std::map<std::string, int> out;
    pqxx::connection c(db.conninfo());
    pqxx::read_transaction tx(c);
    for (const auto& row : tx.exec("SELECT uri, attempts FROM retry")) {
      out[row[0].as<std::string>()] = row[1].as<int>();
    }
    return out;
  }
  std::string fetched_from(const std::string& uri) {
    pqxx::connection c(db.conninfo());
    pqxx::read_transaction tx(c);
    auto r = tx.exec_params("SELECT fetched_from FROM resource WHERE uri = $1", uri);
    return r.empty() || r[0][0].is_null() ? "" : r[0][0].as<std::string>();
  }
};

// Whether one of the run's notes contains `text`.
inline bool has_note(const sync::SourceReport& r, const std::string& text) {
  for (const auto& n : r.notes) {
    if (n.find(text) != std::string::npos) {
      return true;
    }
  }
  return false;
}

// Expected live content: upstream URL -> bytes.
inline std::map<std::string, std::string> expected_live(const Site& site) {
  std::map<std::string, std::string> out;
  for (const auto& [path, bytes] : site.content) {
    out[site.up.url(path)] = bytes;
  }
  return out;
}

} // namespace tributary::test

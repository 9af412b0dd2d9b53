#pragma once

// Simulator::Impl: the simulated Source's state, shared by its documents
// (simulated_source.cpp), its hub (simulated_hub.cpp) and the wiring
// (simulate.cpp). Not for use outside tools/simulate/.

#include "tools/simulate/simulate.h"

#include "common/http/server.h"

#include "republisher/package_writer.h"
#include "resourcesync/datetime.h"
#include "resourcesync/hash.h"
#include "resourcesync/reader.h"
#include "resourcesync/websub.h"
#include "resourcesync/writer.h"
#include "sync_engine/fetcher.h"
#include "sync_engine/net_policy.h"

#include <csignal>
#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <ostream>
#include <random>
#include <set>
#include <thread>

namespace tributary::agg {

namespace simulate_detail {

constexpr uint64_t k_none = ~0ull;

inline rs::Timestamp now_us() {
  return std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
}

inline uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

} // namespace simulate_detail

// The names of simulate_detail the class below uses.
using simulate_detail::k_none;

struct Simulator::Impl {
  SimulateOptions options;
  std::string base;
  std::unique_ptr<http::Server> server;

  struct Resource {
    uint32_t version = 0;
    bool live = false;
    rs::Timestamp lastmod{};
    std::string md5;
  };
  struct ChangeRecord {
    uint64_t id;
    uint32_t version;
    rs::Change kind;
    rs::Timestamp at;
  };

  mutable std::mutex mutex;
  std::vector<Resource> resources;  // by id
  std::vector<uint64_t> live_ids;   // for picking one at random
  std::vector<uint64_t> live_pos;   // id -> index in live_ids, or k_none
  std::vector<ChangeRecord> log;
  std::mt19937_64 rng;
  rs::Timestamp started{};
  rs::Timestamp last_time{};

  // Rendered documents: closed Change List parts once; the rest when the
  // state moved on (the Resource List at most once a second).
  std::map<size_t, std::shared_ptr<const std::string>> closed_parts;
  std::map<std::string, std::shared_ptr<const std::string>> resource_list_docs;
  std::chrono::steady_clock::time_point resource_list_rendered{};
  uint64_t resource_list_stamp = k_none;

  // Dumps: the Resource Dump rebuilt at most every 30 s when asked for, a
  // Change Dump package per closed Change List part (kept).
  std::map<std::string, std::shared_ptr<const std::string>> resource_dump_docs;
  std::map<std::string, std::shared_ptr<const std::string>> previous_dump_docs; // downloads in progress finish
  std::chrono::steady_clock::time_point resource_dump_built{};
  uint64_t resource_dump_stamp = k_none;
  std::map<size_t, std::shared_ptr<const std::string>> change_packages;       // part -> ZIP
  std::map<size_t, std::shared_ptr<const std::string>> change_manifests;      // part -> manifest

  // The hub (options.hub): subscribers by callback, each with how far into
  // the log it was sent; guarded by `mutex`, woken through `pushed`.
  struct Subscriber {
    std::string secret;
    std::chrono::steady_clock::time_point expires;
    size_t sent = 0;
    std::chrono::steady_clock::time_point retry_at{};
  };
  std::map<std::string, Subscriber> subscribers;
  std::condition_variable pushed;
  std::deque<std::map<std::string, std::string>> intents; // subscription requests to verify
  std::thread pusher;
  std::atomic<bool> push_stop{false}; // not `stopping`: the ticker takes stop_mutex before `mutex`
  std::shared_ptr<sync::Fetcher> client;

  std::thread ticker;
  std::mutex stop_mutex;
  std::condition_variable stop_cv;
  bool stopping = false;

  explicit Impl(SimulateOptions o) : options(std::move(o)), rng(options.seed) {}

  // The bytes of a resource version: a function of (seed, id, version).
  std::string content(uint64_t id, uint32_t version) const;

  rs::Timestamp next_time();

  void set_live(uint64_t id, bool live);

  void write_version(uint64_t id, rs::Timestamp at);

  // One change, chosen by the seeded generator: 20% create, 15% delete
  // (while more than one is live), else update.
  void change_one();

  std::string url(const std::string& path) const { return base + path; }

  rs::Entry entry_of(uint64_t id, const Resource& r) const;

  rs::DocumentHeader header(const char* capability, rs::RootElement root = rs::RootElement::urlset) const;

  std::string source_description() const;

  std::string capability_list() const;

  std::string topic() const { return url("/notification/changelist"); }

  // The Resource List (an index of parts past 50,000 entries); caller locks.
  void render_resource_list();

  rs::Timestamp part_from(size_t k) const;

  std::string change_part(size_t k) const;

  // One change as the Change List (and a notification) shows it.
  rs::Entry change_entry(const ChangeRecord& c) const;

  // ---- the hub ------------------------------------------------------------

  // A test tool's hub, bounded all the same (#35): at most this many
  // subscribers and pending intents (503 past them), callbacks on public or
  // loopback addresses only (never a private network or the metadata
  // service), answers read up to 64 KiB.
  static constexpr size_t k_max_subscribers = 100;
  static constexpr size_t k_max_intents = 100;
  const std::shared_ptr<const sync::AddressPolicy> callback_policy =
      std::make_shared<const sync::AddressPolicy>(std::set<std::string>{"127.0.0.1", "::1"});

  sync::FetchOptions callback_options() const;

  void hub_request(const http::Request& req, http::Response& res);

  // Verifies intents and pushes changes, on a thread of its own.
  void push_loop();

  void verify(const std::map<std::string, std::string>& form);

  bool post(const std::string& callback, const std::string& secret, const std::string& body);

  std::string change_index() const;

  // A ZIP of manifest.xml and `files` (name -> bytes), in memory.
  static std::string zip_of(const std::string& manifest, const std::vector<std::pair<std::string, std::string>>& files);

  rs::Entry package_entry(const std::string& path, const std::string& zip) const;

  // The Resource Dump: packages of 10,000 live resources; caller locks.
  void render_resource_dump();

  // Change Dump package k (0-based) of a closed part; caller locks.
  void render_change_package(size_t k);

  std::string change_dump();

  // The document at `path`, or nullptr.
  std::shared_ptr<const std::string> document(const std::string& path);

  http::Disposition handle(const http::Request& req, http::Response& res, bool can_block);

  void tick();
};

} // namespace tributary::agg

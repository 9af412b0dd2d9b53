#pragma once

// Room tools/simulate/simulated_source: the simulated Source's resources
// and documents. Its changes (seeded: which resource changes how is a
// function of the seed alone), and the Source Description, Capability
// List, Resource List, Change Lists, Resource Dump and Change Dump rendered
// from memory with the writer the republisher uses; the resources' bytes.
// Owns its state and its lock.

#include "tools/simulate/simulate.h"

#include "common/http/server.h"
#include "resourcesync/datetime.h"
#include "resourcesync/model.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

namespace tributary::agg {

namespace simulate_detail {

inline constexpr uint64_t k_none = ~0ull;

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

class SimulatedSource {
public:
  // `options` must outlive this (the simulator owns it).
  explicit SimulatedSource(const SimulateOptions& options) : m_options(options), m_rng(options.seed) {}

  // The resources at the start, served under `base`.
  void start(std::string base);
  // Applies `n` changes now.
  void change(uint64_t n);
  // Changes so far, and resources live now.
  uint64_t changes() const;
  uint64_t live() const;

  // A resource (or its mirror copy) or a document of ours; `blocking` when
  // it must render and `can_block` is false.
  http::Disposition serve(const std::string& path, http::Response& res, bool can_block);

  std::string url(const std::string& path) const { return m_base + path; }
  std::string topic() const { return url("/notification/changelist"); }
  // A notification of the changes from the `from`th on (at most `max`):
  // its body, and how far into the log it goes; nullopt when there are
  // none.
  std::optional<std::pair<std::string, size_t>> notification(size_t from, size_t max) const;

private:
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

  // The bytes of a resource version: a function of (seed, id, version).
  std::string content(uint64_t id, uint32_t version) const;
  rs::Timestamp next_time();
  void set_live(uint64_t id, bool live);
  void write_version(uint64_t id, rs::Timestamp at);
  // One change, chosen by the seeded generator: 20% create, 15% delete
  // (while more than one is live), else update.
  void change_one();
  rs::Entry entry_of(uint64_t id, const Resource& r) const;
  rs::DocumentHeader header(const char* capability, rs::RootElement root = rs::RootElement::urlset) const;
  std::string source_description() const;
  std::string capability_list() const;
  // The Resource List (an index of parts past 50,000 entries); caller locks.
  void render_resource_list();
  rs::Timestamp part_from(size_t k) const;
  std::string change_part(size_t k) const;
  // One change as the Change List (and a notification) shows it.
  rs::Entry change_entry(const ChangeRecord& c) const;
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

  const SimulateOptions& m_options;
  std::string m_base; // set by start()

  mutable std::mutex m_mutex; // guards what follows
  std::vector<Resource> m_resources; // by id
  std::vector<uint64_t> m_live_ids;  // for picking one at random
  std::vector<uint64_t> m_live_pos;  // id -> index in m_live_ids, or k_none
  std::vector<ChangeRecord> m_log;
  std::mt19937_64 m_rng;
  rs::Timestamp m_started{};
  rs::Timestamp m_last_time{};
  // Rendered documents: closed Change List parts once; the rest when the
  // state moved on (the Resource List at most once a second).
  std::map<size_t, std::shared_ptr<const std::string>> m_closed_parts;
  std::map<std::string, std::shared_ptr<const std::string>> m_resource_list_docs;
  std::chrono::steady_clock::time_point m_resource_list_rendered{};
  uint64_t m_resource_list_stamp = simulate_detail::k_none;
  // Dumps: the Resource Dump rebuilt at most every 30 s when asked for, a
  // Change Dump package per closed Change List part (kept).
  std::map<std::string, std::shared_ptr<const std::string>> m_resource_dump_docs;
  std::map<std::string, std::shared_ptr<const std::string>> m_previous_dump_docs; // downloads in progress finish
  std::chrono::steady_clock::time_point m_resource_dump_built{};
  uint64_t m_resource_dump_stamp = simulate_detail::k_none;
  std::map<size_t, std::shared_ptr<const std::string>> m_change_packages;  // part -> ZIP
  std::map<size_t, std::shared_ptr<const std::string>> m_change_manifests; // part -> manifest
};

} // namespace tributary::agg

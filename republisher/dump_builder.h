#pragma once

// Room republisher/dump_builder: each set's Resource Dump and Change Dump.
// A thread of its own builds the Resource Dumps that are missing or due and
// a Change Dump package for every closed Change List part not yet packed
// (from the closed parts the document renderer published), locally or
// shared through the database and the bucket; puts what it built on the
// shelf, and serves the packages and manifests. Owns its thread and the
// dumps' state.

#include "common/http/server.h"
#include "common/log.h"
#include "republisher/dumps.h"
#include "republisher/server.h"
#include "republisher/shelf.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace tributary::pub {

class DumpBuilder {
public:
  // `options`, `urls` and `shelf` must outlive this (the republisher owns
  // them all). `changed` is called when a dump changed (the Capability
  // Lists offer it).
  DumpBuilder(const PublishOptions& options, std::shared_ptr<store::StoreReader> reader,
              std::shared_ptr<store::BlobStore> blobs, const UrlScheme& urls, Shelf& shelf,
              std::function<void()> changed);
  ~DumpBuilder(); // stops
  DumpBuilder(const DumpBuilder&) = delete;
  DumpBuilder& operator=(const DumpBuilder&) = delete;

  // Builds every 2 s on a thread of its own (with a dump_dir and a
  // resource_dump_interval; else nothing).
  void start();
  void stop();
  // One pass: the Resource Dumps that are missing or due, and the Change
  // Dump packages of closed parts not yet packed.
  void build_due();

  // A dump package or manifest: this node's file, else (with shared dumps)
  // the one another node built.
  http::Disposition serve_file(http::Response& res, const Route& route, bool can_block) const;

  // The Resource Dump or Change Dump of a set when another node's
  // Capability List offered it and this one has not taken it up yet (its
  // builder looks every 2 s): read from the database, so that a client
  // behind a load balancer finds what one node offered on any other.
  // nullopt: `route` is neither.
  std::optional<http::Disposition> serve_shared_document(http::Response& res, const Route& route,
      bool can_block) const;

private:
  // Puts the dumps and the files they name on the shelf.
  void publish();

  // A file this node built, stored as a blob (with a remote tier, in the
  // bucket before this returns), named as served under `url_path`.
  Result<store::SharedDumps::File> share_file(const std::filesystem::path& file, const std::string& url_path);

  // Shared dumps: each set's Resource Dump is the one the database names,
  // whichever node built it. One is built here when the set has none, or
  // when it is due (older than resource_dump_interval while the set
  // changed); its packages go into the blob store and the local files go.
  // Two nodes may build at once: the later seq wins, and the one it
  // replaces stays served. True when a set's dump changed here.
  bool adopt_shared_resource_dumps(const std::vector<store::FeedInfo>& feeds, int64_t seq, const DumpOptions& o);

  // Whether a set whose shared Resource Dump is `dump` (null: none) needs
  // a new one: none yet, or it is older than resource_dump_interval and
  // the store moved on since.
  bool shared_dump_due(const store::SharedDumps::ResourceDump* dump, int64_t seq,
      std::chrono::system_clock::time_point now) const;

  // Builds the set's Resource Dump and records it as the shared one, unless
  // another node is building it, or built it while this one looked (false
  // then).
  bool build_shared_resource_dump(const PublishedSet& set, int64_t seq, const DumpOptions& o);

  // Shared dumps: Change Dump package `n` of the set as the database names
  // it, built here (and stored as blobs, the local files removed) when no
  // node has yet. Packages of a closed part hold the same changes
  // whichever node builds them; the first one named is the one served.
  Result<ChangePackage> shared_change_package(const PublishedSet& set, const DumpOptions& o, size_t n,
      const ClosedParts::Part& part, int64_t after_seq, size_t part_size);

  // This node's own Resource Dumps (no shared bucket): built for each set
  // that has none, or whose dump is due; true when one changed.
  bool build_local_resource_dumps(const std::vector<store::FeedInfo>& feeds, int64_t seq, const DumpOptions& o);

  // A dump package (or Change Dump manifest) another node may have built:
  // named in the database, its bytes in the blob store (fetched from the
  // bucket when this node lacks them).
  http::Disposition serve_shared_file(http::Response& res, const std::string& path, bool can_block) const;


  const PublishOptions& m_options;
  std::shared_ptr<store::StoreReader> m_reader;
  log::Limiter m_warnings; // a pass every few seconds: each failure once a minute
  std::shared_ptr<store::BlobStore> m_blobs;
  const UrlScheme& m_urls;
  Shelf& m_shelf;
  std::function<void()> m_changed;

  std::thread m_thread;
  std::mutex m_mutex;            // guards m_stopping
  std::condition_variable m_cv;
  bool m_stopping = false;

  // The builder's own (one pass at a time): each set's Resource Dump, its
  // Change Dump packages, and up to which part the package files are gone.
  struct SetDump {
    BuiltDump built;
    std::chrono::steady_clock::time_point built_at;
    int64_t seq = 0;
    std::string previous_generation;
  };
  std::map<std::string, SetDump> m_dumps;
  std::map<std::string, std::vector<ChangePackage>> m_change_packages;
  std::map<std::string, size_t> m_packages_compacted;
};

} // namespace tributary::pub

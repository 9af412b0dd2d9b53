#pragma once

#include "republisher/documents.h"
#include "republisher/http_server.h"
#include "republisher/url_scheme.h"
#include "sync_engine/store/blob_store.h"
#include "sync_engine/store/store_reader.h"

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace tributary::pub {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;               // 0: any free port (see Republisher::port())
  std::string public_url;        // the base of every URL we publish
  size_t change_list_part = 10000;
  // A Resource List is re-rendered when the store moved on, but no sooner
  // than this after the last time, nor than four times what that took: a
  // large one must not hold back the Change List, which follows every
  // change (the Resource List's `at` says how old it is).
  std::chrono::milliseconds resource_list_min_interval{0};
  int threads = 16;              // workers for requests that query the store or open files
  std::vector<NamedSet> named_sets; // sets merging several sources, beside one per upstream set
  // Resource Dumps: built into `dump_dir` (empty: none) when a set has none,
  // and again every `resource_dump_interval` while the set changes.
  std::filesystem::path dump_dir;
  // Closed Change List parts (immutable) are written here once and served
  // from the files, so that memory does not grow with the change history
  // (empty: kept in memory).
  std::filesystem::path document_dir;
  std::chrono::seconds resource_dump_interval{3600};
  size_t dump_package_entries = 10000;
  uint64_t dump_package_bytes = 1ull << 30;
  // Routes tried before ours on the same address (the daemon's status API):
  // nullopt passes the request on to the republisher.
  std::function<std::optional<http::Disposition>(const http::Request&, http::Response&, bool can_block)> before;
};

// Serves Tributary's own ResourceSync documents and the mirrored content,
// read-only over the store. Documents are rendered once per change of the
// store (its last change-log seq) and served from cache with ETag/304 and a
// pre-compressed gzip body when the client accepts it; content is streamed
// from the blob store with a strong ETag, Last-Modified, 304, Range and HEAD,
// and 410 Gone for deleted resources.
class Republisher {
public:
  Republisher(std::shared_ptr<store::StoreReader> reader, std::shared_ptr<sync::BlobStore> blobs,
              ServerOptions options);
  ~Republisher();
  Republisher(const Republisher&) = delete;
  Republisher& operator=(const Republisher&) = delete;

  // Binds and starts serving on a background thread; fails (io) when the
  // address cannot be bound.
  Result<void> start();
  // Asks for the documents to be rendered again now if the store moved on
  // (the daemon calls it after a run), instead of at the next periodic check.
  void refresh_soon();
  // The bound port (after start()).
  int port() const;
  // Stops accepting, finishes requests in flight, joins.
  void stop();

private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

} // namespace tributary::pub

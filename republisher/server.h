#pragma once

#include "republisher/documents.h"
#include "republisher/oai_provider.h"
#include "republisher/hub.h"
#include "common/http/server.h"
#include "republisher/url_scheme.h"
#include "store/archive_store.h"
#include "store/blob/blob_store.h"
#include "store/shared_dumps.h"
#include "store/store_reader.h"

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace tributary::pub {

struct PublishOptions {
  std::string public_url;        // the base of every URL we publish
  size_t change_list_part = 10000;
  // A Resource List is re-rendered when the store moved on, but no sooner
  // than this after the last time, nor than four times what that took: a
  // large one must not hold back the Change List, which follows every
  // change (the Resource List's `at` says how old it is).
  std::chrono::milliseconds resource_list_min_interval{0};
  // How often the store is asked whether it moved on, when nothing says so
  // (refresh_soon: after a run, or on a change notification).
  std::chrono::milliseconds poll_interval{1000};
  std::vector<NamedSet> named_sets; // sets merging several sources, beside one per upstream set
  // Resource Dumps: built into `dump_dir` (empty: none) when a set has none,
  // and again every `resource_dump_interval` while the set changes.
  std::filesystem::path dump_dir;
  // Closed Change List parts (immutable) are written here once and served
  // from the files, so that memory does not grow with the change history
  // (empty: kept in memory).
  std::filesystem::path document_dir;
  std::chrono::seconds resource_dump_interval{3600};
  // With content in a shared bucket: dump packages go into the blob store
  // (so the bucket) and are named there, and the current Resource Dump of
  // each set is the one named there, whichever node built it, so that every
  // node serves the same documents and packages (null: this node's own).
  std::shared_ptr<store::SharedDumps> shared_dumps;
  // Archives (ResourceSync Archives): each set's Capability List offers a
  // Change List Archive (every closed part, those retention compacted kept
  // here as blobs) and a Resource List Archive (a snapshot of the Resource
  // List every `resource_list_archive_interval`, 0: none); null: no
  // archives.
  std::shared_ptr<store::ArchiveStore> archive;
  std::chrono::seconds resource_list_archive_interval{7 * 86400};
  // Our WebSub hub: each set's Capability List offers its Change
  // Notification channel, and the hub hears what the Change Lists show
  // (null: no notifications).
  std::shared_ptr<Hub> hub;
  size_t dump_package_entries = 10000;
  uint64_t dump_package_bytes = 1ull << 30;
  // Our OAI-PMH data provider at <public_url>/oai (republisher/oai_provider.h).
  OaiOptions oai;
};

// Serves Tributary's own ResourceSync documents and the mirrored content,
// read-only over the store. Documents are rendered once per change of the
// store (its last change-log seq) and served from cache with ETag/304 and a
// pre-compressed gzip body when the client accepts it; content is streamed
// from the blob store with a strong ETag, Last-Modified, 304, Range and HEAD,
// and 410 Gone for deleted resources.
//
// It owns no socket: whoever owns the HTTP server (`tributary serve`, the
// daemon beside its status API) mounts handler().
class Republisher {
public:
  // `lookups` answers content requests (one resource by URI each); give it
  // connections of its own so that they never queue behind the sync
  // engine's writes or a rendering on `reader` (nullptr: `reader`).
  Republisher(std::shared_ptr<store::StoreReader> reader, std::shared_ptr<store::BlobStore> blobs,
              PublishOptions options, std::shared_ptr<store::StoreReader> lookups = nullptr);
  ~Republisher();
  Republisher(const Republisher&) = delete;
  Republisher& operator=(const Republisher&) = delete;

  // Renders the documents, then keeps them fresh (and builds dumps) on
  // background threads; fails when the store cannot be read.
  Result<void> start();
  // Answers requests for our documents, dumps and content (after start()).
  http::Handler handler();
  // Change-log retention: for each published set, how far its closed
  // Change List parts that ended before `cutoff` reach (what
  // PgStore::compact_change_log then compacts). The documents follow at the
  // next refresh.
  struct Compactable {
    std::vector<store::Compaction> compact;                 // per set: its parts that ended before the cutoff
    std::map<std::string, std::vector<int64_t>> published;  // every set now published -> its feeds
  };
  Compactable compactable(rs::Timestamp cutoff);
  // Before compaction: the parts `plan` compacts go into the archive (a
  // blob each, named by the URL they keep), unless archived already. Fails
  // when one cannot be: then nothing may be compacted (the history would be
  // lost). Nothing to do without an archive.
  Result<void> archive(const std::vector<store::Compaction>& plan);
  // Asks for the documents to be rendered again now if the store moved on
  // (the daemon calls it after a run), instead of at the next periodic check.
  void refresh_soon();
  // Sources were added to or removed from the configuration: every set is
  // rendered again now (a removed source leaves the Source Description, and
  // its documents answer 410 Gone).
  void sources_changed();
  // Stops the background threads (stop the server first).
  void stop();

private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

} // namespace tributary::pub

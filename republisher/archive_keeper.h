#pragma once

// Room republisher/archive_keeper: the archives (ResourceSync Archives,
// 2017) of each set. Before retention compacts the change log, the closed
// Change List parts and Change Dump packages it drops go into the archive
// (a blob each, named by the URL they keep); the Resource List keeper hands
// it each list it publishes, and a snapshot is kept when the last is older
// than the interval; it serves the archives and the documents they name,
// read from the database (any node archived them) and the blob store.
// Reads what the other components published from the shelf; owns only
// when each set's last snapshot was taken.

#include "common/http/server.h"
#include "republisher/server.h"
#include "republisher/shelf.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace tributary::pub {

class ArchiveKeeper {
public:
  // `options`, `urls` and `shelf` must outlive this (the republisher owns
  // them all).
  ArchiveKeeper(const PublishOptions& options, std::shared_ptr<store::BlobStore> blobs, const UrlScheme& urls,
                const Shelf& shelf)
      : m_options(options), m_blobs(std::move(blobs)), m_urls(urls), m_shelf(shelf) {}

  // Before compaction: the parts `plan` compacts go into the archive,
  // unless archived already (with Change Dumps, their packages too). Fails
  // when one cannot be: then nothing may be compacted (the history would be
  // lost). Nothing to do without an archive.
  Result<void> archive_parts(const std::vector<store::Compaction>& plan);

  // A snapshot of the set's Resource List (`docs`, just published) when
  // the last one is older than the interval: the documents' URLs move under
  // archive/<snapshot>/. Called by the Resource List keeper's thread only.
  void snapshot_if_due(const std::string& set,
      const std::vector<std::pair<std::string, std::shared_ptr<const CachedDocument>>>& docs, rs::Timestamp at);

  // An archive of a set, or a document one names (an archived Change List
  // part, Change Dump, package or Resource List snapshot); nullopt when
  // `route` names none of ours.
  std::optional<http::Disposition> serve(const http::Request& req, http::Response& res, const Route& route,
      bool can_block) const;

private:
  // The parts of a set already archived as `kind`.
  Result<std::set<size_t>> archived_parts(const std::string& set, const char* kind);
  // The blob holding a Change Dump file (package or manifest) of ours:
  // named in the database with shared dumps, else this node's file, kept.
  Result<store::SharedDumps::File> dump_file_blob(const std::string& url, const std::filesystem::path& local);
  // With Change Dumps: the package of each part about to be compacted
  // stays at its URL, kept as a blob with its manifest, and an archived
  // Change Dump of that one package (archive/changedump-<n>.xml) is listed
  // by the set's Change Dump Archive. A package not yet built holds the
  // compaction back (the dump builder builds it within seconds).
  Result<void> archive_change_packages(const store::Compaction& c, const ClosedParts& meta);

  const PublishOptions& m_options;
  std::shared_ptr<store::BlobStore> m_blobs;
  const UrlScheme& m_urls;
  const Shelf& m_shelf;
  // When each set's newest snapshot was taken (nullopt: never), read from
  // the archive the first time (the Resource List keeper's thread only).
  std::map<std::string, std::optional<rs::Timestamp>> m_last_snapshot;
};

} // namespace tributary::pub

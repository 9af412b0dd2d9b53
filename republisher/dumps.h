#pragma once

#include "republisher/documents.h"
#include "sync_engine/store/blob_store.h"
#include "sync_engine/store/store_reader.h"

#include <filesystem>
#include <map>
#include <string>

// Our own Resource Dumps (spec section 11): ZIP packages of the set's live
// resources, each with a `resourcedump-manifest` carrying `at` and, per
// resource, our entry (loc, hash, length, type, the `via` link to the
// original) plus the `path` of its bitstream in the package.
namespace tributary::pub {

struct DumpOptions {
  std::filesystem::path dir;            // where packages are kept (under data_dir)
  size_t package_entries = 10000;       // resources per package
  uint64_t package_bytes = 1ull << 30;  // bitstream bytes per package (a single larger resource gets its own)
};

struct BuiltDump {
  std::string generation;                              // the folder of this build
  std::string document;                                // the Resource Dump (XML)
  std::map<std::string, std::filesystem::path> files;  // URL path -> package file
};

// Builds a Resource Dump of `set` as it is at `at`: packages written to a
// temporary name and renamed into <dir>/<set>/<generation>/<n>.zip, so a
// reader never sees a half-written package; the document lists each with
// its sha-256, length and `at`. Fails without leaving a partial generation.
Result<BuiltDump> build_resource_dump(store::StoreReader& reader, const sync::BlobStore& blobs, const UrlScheme& urls,
                                      const PublishedSet& set, const DumpOptions& options, rs::Timestamp at);

// Removes the set's generations under <dir>/<set> except `keep`.
void remove_old_generations(const DumpOptions& options, const std::string& set, const std::vector<std::string>& keep);

} // namespace tributary::pub

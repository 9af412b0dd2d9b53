#pragma once

#include "republisher/change_lists.h"
#include "store/blob/blob_store.h"
#include "store/shared_dumps.h"
#include "store/store_reader.h"

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
Result<BuiltDump> build_resource_dump(store::StoreReader& reader, const store::BlobStore& blobs, const UrlScheme& urls,
                                      const PublishedSet& set, const DumpOptions& options, rs::Timestamp at);

// One package of our Change Dump: the changes of one closed Change List part.
struct ChangePackage {
  size_t n = 0; // the part's number
  rs::Timestamp from;
  rs::Timestamp until;
  rs::HashValue hash; // of the ZIP
  uint64_t length = 0;
  std::filesystem::path file;
  std::filesystem::path manifest_file;
};

// Builds the package for closed Change List part `n` of `set` (its changes
// are the `part_size` after change-log seq `after_seq`), or finds it built
// before: <dir>/<set>/changes/<n>.zip with its changedump-manifest (each
// entry as in the Change List, plus the path of that change's bitstream;
// deletions have none) and a copy of the manifest beside it. Packages never
// change once written.
Result<ChangePackage> build_change_package(store::StoreReader& reader, const store::BlobStore& blobs,
                                           const UrlScheme& urls, const PublishedSet& set, const DumpOptions& options,
                                           size_t n, const ClosedParts::Part& part, int64_t after_seq,
                                           size_t part_size);

// The Change Dump listing `packages` (forward chronological), each with
// from/until, hash, length and a rel="contents" link to its manifest;
// `until` for one that is closed (an archived Change Dump).
std::string render_change_dump(const UrlScheme& urls, const PublishedSet& set,
                               const std::vector<ChangePackage>& packages,
                               std::optional<rs::Timestamp> until = std::nullopt);

// A package as our Change Dump lists it, from its part and the blob
// holding its ZIP (another node's, or archived).
ChangePackage offered_change_package(size_t n, rs::Timestamp from, rs::Timestamp until,
                                     const store::SharedDumps::File& zip);

// Removes the set's generations under <dir>/<set> except `keep`.
void remove_old_generations(const DumpOptions& options, const std::string& set, const std::vector<std::string>& keep);

} // namespace tributary::pub

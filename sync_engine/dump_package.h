#pragma once

#include "resourcesync/model.h"
#include "resourcesync/reader.h"
#include "sync_engine/content_fetch.h"
#include "sync_engine/fetcher.h"
#include "store/blob/blob_store.h"

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

struct zip; // libzip's archive handle (zip_t), kept out of this header

// Resource Dump and Change Dump packages (spec sections 11 and 13): ZIP files
// with a `manifest.xml` at the top level. A package comes from a stranger, so
// it is checked whole before anything is extracted, and every bitstream is
// verified again as it is copied into the blob store. The manifest is read
// as a stream, twice (to check, then to apply), never held whole.
namespace tributary::sync {

struct PackageLimits {
  uint64_t max_uncompressed = 16ull << 30; // all entries together
  uint64_t max_entries = 1000000;
  uint64_t max_manifest_bytes = 128ull << 20;
  // Uncompressed / compressed size of one entry, checked for entries over
  // 1 MiB (small files of one repeated byte compress that well honestly).
  double max_ratio = 200;
};

class DumpPackage {
public:
  // Opens a downloaded package and checks it: a well-formed ZIP; a
  // `manifest.xml` at the top level that is a valid document of capability
  // `manifest_kind`; every ZIP entry a plain file (no symlink, no directory
  // trick) with a relative name without `..`, none twice; every entry but
  // the manifest named by the manifest, every manifest `path` present; sizes
  // within `limits`. Fails (invalid_document) with "<url>: <reason>".
  // Irregular but unambiguous input is accepted and noted in warnings(): a
  // manifest `path` without its leading slash, a manifest without `at`.
  static Result<std::unique_ptr<DumpPackage>> open(const std::filesystem::path& zip, const std::string& url,
                                                  rs::Capability manifest_kind, const PackageLimits& limits = {});
  ~DumpPackage();
  DumpPackage(const DumpPackage&) = delete;
  DumpPackage& operator=(const DumpPackage&) = delete;

  // The manifest's header, and how many entries it has (all checked by
  // open()).
  const rs::DocumentHeader& header() const;
  uint64_t size() const;
  const std::vector<std::string>& warnings() const;

  // Reads the manifest again from the package, handing its entries to `fn`
  // in document order, in slices of at most `slice`, each with the index in
  // the manifest of its first entry. The manifest is never held whole: a
  // package of a million entries costs one slice of memory. Stops at the
  // first error `fn` returns, and returns it.
  using SliceFn = std::function<Result<void>(std::vector<rs::Entry>& entries, size_t first)>;
  Result<void> read_manifest(size_t slice, const SliceFn& fn) const;
  // The whole manifest in memory: for tests and small packages only.
  Result<rs::Document> manifest() const;

  // Copies the bitstream of manifest entry `i` (which is `e`, as
  // read_manifest() gave it) into the blob store, sealed for
  // store::BlobStore::publish(), verified against the entry's length and
  // strongest hash. Fails (invalid_document) on a mismatch, and for an entry
  // without a path (a deletion in a Change Dump has no bitstream).
  Result<FetchedContent> extract(const rs::Entry& e, size_t i, store::BlobStore& blobs) const;
  // extract() for each of `entries` (manifest entry `indices[k]` is
  // `*entries[k]`), on `threads` threads (each with its own handle on the
  // ZIP), results in the same order. Stops early after a failure: the
  // remaining results are errors too.
  std::vector<Result<FetchedContent>> extract_many(const std::vector<const rs::Entry*>& entries,
                                                   const std::vector<size_t>& indices, store::BlobStore& blobs,
                                                   unsigned threads = 4) const;
  // The extra handles extract_many() keeps open for its next call (one
  // fewer than the threads it used, at most).
  size_t spare_handles() const;

private:
  struct Impl;
  explicit DumpPackage(std::unique_ptr<Impl> impl);
  // Streams manifest.xml from `archive` through the reader, each entry to
  // `fn` (false stops); the summary tells the rest.
  Result<rs::ReadSummary> stream_manifest(::zip* archive, const std::function<bool(rs::Entry&)>& fn) const;
  Result<FetchedContent> extract_from(::zip* archive, const rs::Entry& e, size_t i, store::BlobStore& blobs) const;
  std::unique_ptr<Impl> m_impl;
};

// Downloads a package to a new file under `tmp_dir`, trying `loc` and its
// `duplicate` links in pri order, and verifies it against the dump entry's
// length and strongest hash. The caller removes the file.
Result<std::filesystem::path> download_package(Fetcher& fetcher, const std::string& loc,
                                               const std::vector<rs::Link>& links, const FetchOptions& options,
                                               const Expected& expected, const std::filesystem::path& tmp_dir);

} // namespace tributary::sync

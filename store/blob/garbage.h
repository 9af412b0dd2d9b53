#pragma once

#include "common/result.h"
#include "store/blob/blob_store.h"
#include "store/blob_references.h"

#include <chrono>
#include <cstdint>
#include <optional>

namespace tributary::store {

// Garbage collection of the blob store (`tributary gc`).
//
// A blob is garbage when the database names it nowhere: no live resource
// holds it and no change the change log still keeps (so no Change List or
// Change Dump package we publish or will build) points at it. Dump packages
// we built hold their own copies. Collection is two-phase, a grace period
// apart, because a writer may hold a blob it has stored (or found stored)
// for a while before its batch commits the row that names it:
//   1. mark: every stored blob the database does not name is condemned,
//      with the time;
//   2. sweep (a later collection, once the grace period has passed): each
//      condemned blob the database still does not name, read afresh, is
//      removed, unless a writer reused it meanwhile (every reuse lifts the
//      mark, and the removal checks the mark in the same index transaction
//      the lift takes).
// Then pack files mostly dead are rewritten (BlobStore::repack), which is
// what gives disk space back: the records of small blobs share packs.
//
// The blob store must belong to this database alone (several daemons on
// one database may share it; several databases may not). With content in a
// shared bucket, dump packages we built are blobs too, named by the
// database (schema 0010).
struct GcOptions {
  // How long a blob stays condemned before it may go. It must outlast the
  // longest time a writer holds a blob before committing the row naming it
  // (one batch: seconds to minutes).
  std::chrono::seconds grace{std::chrono::hours(24)};
  // Rewrite packs whose live records fill less than this share of them.
  double repack_below = 0.5;
  // Report only: mark, remove and rewrite nothing.
  bool dry_run = false;
  // With content in a shared bucket, this store is this node's cache of it:
  // past this many bytes, blobs the bucket holds are removed here (in the
  // order of their names, which is no order of age or use) until 90% of it
  // is left. nullopt: not a cache (the local store).
  std::optional<uint64_t> cache_bytes;
};

struct GcReport {
  uint64_t stored = 0;        // blobs in the store before
  uint64_t stored_bytes = 0;
  uint64_t referenced = 0;    // distinct blobs the database names
  uint64_t missing = 0;       // ... of which the store lacks, and no bucket has (reported; not collection's to mend)
  uint64_t in_bucket = 0;     // ... of which the store lacks and the bucket holds (a cache: fine)
  uint64_t garbage = 0;       // blobs the database does not name
  uint64_t garbage_bytes = 0;
  uint64_t condemned = 0;     // newly marked by this collection
  uint64_t waiting = 0;       // marked, within the grace period
  uint64_t pardoned = 0;      // marked before, named again
  RemoveReport removed;
  RemoveReport evicted;       // copies of what the bucket holds, past cache_bytes
  RepackReport repacked;
};

// One collection: sweep what is due, mark what is garbage now, then repack.
// `now`: unix seconds.
Result<GcReport> collect_garbage(BlobReferences& db, BlobStore& blobs, const GcOptions& options, int64_t now);

} // namespace tributary::store

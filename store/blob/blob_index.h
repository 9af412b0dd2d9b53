#pragma once

// The blob index: which blobs the packs hold, and where. One LMDB
// environment under <root>/index maps a blob's 32-byte name to its pack,
// offset and length: names are first appended to a log ("recent", see
// recent_names.h) and moved into the main tree, keyed by name, in bulk; a
// named database beside them ("condemned") holds garbage collection's
// marks, so that one transaction sees all three. This class owns the
// environment and its handles (its map kept out of the process's resident
// memory by a MapReleaser); nothing else but RecentNames, inside its
// transactions, touches LMDB.

#include "common/result.h"
#include "store/blob/blob_store.h"
#include "store/blob/name_filter.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

struct MDB_txn; // lmdb.h

namespace tributary::store::blob_detail {

// What the index holds for a blob.
struct IndexValue {
  uint32_t pack = 0;
  uint32_t flags = 0;
  uint64_t offset = 0; // of the bytes, past the record header
  uint64_t length = 0;
};
static_assert(sizeof(IndexValue) == 24);

class RecentNames;
class MapReleaser;

class BlobIndex {
public:
  // Names the log holds before they are merged into the main tree: a
  // merge at a million writes about 100 MB (every leaf once), and this
  // process's map of the log takes about 40 bytes a name.
  static constexpr uint64_t k_merge_at = 131072;

  // Opens (creating) the index under `dir`; io when LMDB cannot. Tests
  // set `merge_at` small.
  static Result<std::unique_ptr<BlobIndex>> open(const std::filesystem::path& dir, uint64_t merge_at = k_merge_at);
  ~BlobIndex();
  BlobIndex(const BlobIndex&) = delete;
  BlobIndex& operator=(const BlobIndex&) = delete;

  // Where a blob is, if the index names it.
  Result<std::optional<IndexValue>> lookup(const std::string& sha256);
  // False when the index certainly does not name `sha256`, without reading
  // it: a Bloom filter of every name, built from the index on first use and
  // kept up by add(). A writer asks before lookup(), so that new content
  // (all of a baseline's) costs no lookup: those faulted the index's pages
  // back in after each release, 15% of a dump baseline's sync thread.
  // Names another process adds meanwhile read as absent; a writer then
  // stores that blob again, and add() keeps the first copy.
  bool may_contain(const std::string& sha256);
  // A writer reuses the stored blob `sha256` (or the blob file `file`):
  // lifts its condemnation, if any. Returns whether it is still stored
  // (false: garbage collection removed it; the caller must store the bytes
  // again). The common case (not condemned) is one read transaction; the
  // write transaction that lifts a mark is serialised with remove()'s.
  Result<bool> lift(const std::string& sha256, const std::filesystem::path& file);
  // Names blobs whose bytes are durable: one transaction (and its sync) for
  // the group, appended to the log; a second merges the log into the main
  // tree when it reached merge_at names. A name already there keeps its
  // first place (a name another process added since this one's filter
  // was built may be logged twice; lookups and for_each() still answer
  // its first place, once).
  Result<void> add(const std::vector<std::pair<std::string, IndexValue>>& entries);
  // How many names each part holds (for tests and check()).
  struct Shape {
    uint64_t main = 0;
    uint64_t log = 0;
    uint64_t filtered = 0; // names the filter counts (0 before it is built)
  };
  Result<Shape> shape() const;
  // Points the entries of records copied out of pack `from` at their new
  // places, where they still name a record of that pack (a collection may
  // have removed some since).
  Result<void> move(uint32_t from, const std::vector<std::pair<BlobName, IndexValue>>& moved);
  // Every entry, in one read transaction.
  Result<void> for_each(const std::function<void(const BlobName&, const IndexValue&)>& fn) const;
  // Every key of the index with its raw value, malformed ones included
  // (for check()): entries whose value is not an IndexValue come with
  // nullopt.
  Result<void> for_each_raw(const std::function<void(const BlobName&, const std::optional<IndexValue>&)>& fn) const;

  // Garbage collection's marks (see BlobStore).
  Result<uint64_t> condemn(const std::vector<BlobName>& names, int64_t at);
  Result<std::vector<std::pair<BlobName, int64_t>>> condemned() const;
  Result<uint64_t> pardon(const std::vector<BlobName>& names);
  // Drops the entries and marks of `names` (with `only_condemned`, of those
  // still marked), 10,000 a transaction; `also` runs for each inside its
  // transaction (the store unlinks a blob file there, so that a writer's
  // lift() either ran before or finds the file gone). Returns what the
  // index entries held.
  Result<RemoveReport> remove(const std::vector<BlobName>& names, bool only_condemned,
                              const std::function<void(const BlobName&, RemoveReport&)>& also);

private:
  explicit BlobIndex(std::filesystem::path dir);
  Error error(int rc) const;
  // What `txn` sees of `name`, in the log or the main tree; `outdated` as
  // RecentNames::find() says.
  int find(MDB_txn* txn, const BlobName& name, std::optional<IndexValue>& out, bool& outdated) const;
  // (Re)builds m_filter from the index, with room for twice its names and
  // a million more; m_filter_mutex held exclusively.
  void build_filter();

  std::filesystem::path m_dir;
  struct Handles; // LMDB's environment and databases
  std::unique_ptr<Handles> m_lmdb;
  std::unique_ptr<RecentNames> m_recent;
  std::unique_ptr<MapReleaser> m_releaser; // the index's map out of resident memory
  // Shared to ask and insert (the filter's words are atomic), exclusive to
  // build or replace it.
  mutable std::shared_mutex m_filter_mutex;
  std::unique_ptr<NameFilter> m_filter; // null until first asked, or when the index could not be read
  bool m_filter_failed = false;
};

} // namespace tributary::store::blob_detail

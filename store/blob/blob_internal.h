#pragma once

// The open blob store's rooms, as BlobStore holds them: the index, the
// pack appender, the directories of file blobs and the remote tier, each a
// class that owns its state and lock; and the store-wide jobs that use
// several of them (collection, repack, check). Not for use outside
// store/blob/.

#include "store/blob/blob_directories.h"
#include "store/blob/blob_index.h"
#include "store/blob/blob_io.h"
#include "store/blob/blob_remote.h"
#include "store/blob/blob_store.h"
#include "store/blob/pack_appender.h"

#include <filesystem>
#include <memory>
#include <optional>

namespace tributary::store {

// Shared by every BlobStore of one root in this process (LMDB must not be
// opened twice by one process).
struct BlobStore::State {
  std::filesystem::path root;
  std::unique_ptr<blob_detail::BlobIndex> index;
  blob_detail::PackAppender packs;
  blob_detail::BlobDirectories files;
  blob_detail::BlobRemote remote;
};

// Where seal() placed a small blob.
struct BlobStore::Writer::Placed {
  std::shared_ptr<blob_detail::BlobPack> pack; // null: the blob was indexed already
  uint64_t offset = 0;
  std::optional<Error> error;
  // Reserved, its bytes still in the writer's buffer: publish() writes the
  // record (this header, then the bytes) with the others of its batch.
  bool pending = false;
  blob_detail::RecordHeader header;
};

namespace blob_detail {

// Every stored blob: its name and length (index entries, then files).
Result<void> for_each_blob(const BlobIndex& index, const std::filesystem::path& root,
                           const std::function<void(const BlobName&, uint64_t length)>& fn);
// Removes `names` (with `only_condemned`, those still condemned): their
// index entries, or their files.
Result<RemoveReport> remove_blobs(BlobIndex& index, BlobDirectories& files, const std::vector<BlobName>& names,
                                  bool only_condemned);
// Rewrites the packs of `root` whose live records fill less than
// `live_below` of them (see BlobStore::repack).
Result<RepackReport> repack_packs(BlobIndex& index, PackAppender& packs, const std::filesystem::path& root,
                                  double live_below);
// Reads the whole store (see BlobStore::check).
Result<BlobCheck> check_store(BlobIndex& index, const std::filesystem::path& root, bool reindex);

} // namespace blob_detail

} // namespace tributary::store

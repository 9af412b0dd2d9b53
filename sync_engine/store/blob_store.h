#pragma once

#include "common/result.h"
#include "resourcesync/hash.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace tributary::sync {

// What a committed blob is.
struct BlobInfo {
  std::string sha256;
  uint64_t length = 0;
  std::vector<rs::HashValue> hashes; // sha-256 plus any extra algorithms asked for
};

// Content-addressed storage on disk: each blob lives at
// <root>/blobs/<first 2 hex>/<sha-256>. It is written to an unnamed
// O_TMPFILE file (or, where the file system lacks that, a temporary file
// under <root>/tmp), fsynced, and linked (renamed) into place, so a reader
// never sees a half-written blob. Identical content from any source is
// stored once.
class BlobStore {
public:
  // Creates the directories if needed; fails (io) if it cannot.
  static Result<std::shared_ptr<BlobStore>> open(const std::filesystem::path& root);

  // Streams one blob in. Destroying an uncommitted writer removes its
  // temporary file.
  class Writer {
  public:
    ~Writer();
    Writer(Writer&&) noexcept;
    Writer& operator=(Writer&&) noexcept;
    Writer(const Writer&) = delete;

    Result<void> write(const char* data, size_t size);
    uint64_t size() const { return m_size; }
    // The digests so far are final: fsyncs, renames into place (or drops
    // the copy if the blob already exists) and returns what was stored.
    Result<BlobInfo> commit();
    // The digests so far are final; the bytes wait, unnamed and not yet
    // durable, for BlobStore::publish() to make a whole group durable with
    // one file-system sync and then name each blob.
    BlobInfo seal();
    // Digests of what was written, without committing (for verification
    // before deciding to keep the bytes).
    std::vector<rs::HashValue> digests();

  private:
    friend class BlobStore;
    Writer(BlobStore& store, std::filesystem::path tmp, int fd, std::vector<rs::HashAlgorithm> algorithms);
    BlobStore* m_store;
    std::filesystem::path m_tmp;
    int m_fd = -1;
    uint64_t m_size = 0;
    std::vector<rs::HashAlgorithm> m_algorithms;
    rs::MultiHasher m_hasher;
    std::vector<rs::HashValue> m_digests;
    bool m_finished = false;
    BlobInfo m_info;
    Result<BlobInfo> link_into_place(); // after the bytes are durable
  };

  // Publishes sealed writers: one syncfs() makes all their bytes durable,
  // then each is linked under its name (one device flush for the group
  // instead of one per blob). Returns one result per writer, in order.
  std::vector<Result<BlobInfo>> publish(std::vector<Writer*>& writers);

  // A writer that computes sha-256 and `extra` digests as bytes arrive.
  Result<Writer> begin(const std::vector<rs::HashAlgorithm>& extra = {});
  // Stores a whole buffer.
  Result<BlobInfo> put(std::string_view data, const std::vector<rs::HashAlgorithm>& extra = {});

  bool contains(const std::string& sha256) const;
  // Where the blob is (whether or not it exists). Fails for a name that is
  // not 64 lower-case hex digits, so nothing outside the store is reachable.
  Result<std::filesystem::path> path_for(const std::string& sha256) const;
  Result<std::string> read(const std::string& sha256) const;

  // Makes the names of blobs stored since the last call durable (one
  // syncfs, or an fsync per directory on the fallback path), before the
  // database commits rows that point at them.
  Result<void> sync_directories();

  const std::filesystem::path& root() const { return m_root; }

private:
  explicit BlobStore(std::filesystem::path root) : m_root(std::move(root)) {}
  void remember(const std::string& sha256); // call with m_dirty->mutex held
  std::filesystem::path m_root;
  struct Dirty;
  std::shared_ptr<Dirty> m_dirty;
};

} // namespace tributary::sync

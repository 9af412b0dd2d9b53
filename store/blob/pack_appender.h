#pragma once

// The pack file this process appends small blobs to: room for a record is
// reserved at its end, and a new pack is begun past the size limit. This
// class owns the active pack, where it ends, the next pack's number, and
// how many bytes of small blobs wait in writers' memory for publish().

#include "common/result.h"

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <utility>

namespace tributary::store::blob_detail {

// A pack file this process appends to. It holds a shared flock on it while
// open, which tells repack() (any process's) to leave the pack alone.
class BlobPack {
public:
  BlobPack(uint32_t id, int fd, std::filesystem::path path);
  ~BlobPack();
  BlobPack(const BlobPack&) = delete;
  BlobPack& operator=(const BlobPack&) = delete;
  uint32_t id() const { return m_id; }
  int fd() const { return m_fd; }
  const std::filesystem::path& path() const { return m_path; }

private:
  uint32_t m_id;
  int m_fd;
  std::filesystem::path m_path;
};

class PackAppender {
public:
  // Packs under <root>/packs, closed past `pack_bytes`; numbers continue
  // after the highest there.
  PackAppender(std::filesystem::path root, uint64_t pack_bytes);

  // Room for one record of `size` bytes at the end of this process's
  // active pack (a new pack past the limit): the pack and the offset.
  Result<std::pair<std::shared_ptr<BlobPack>, uint64_t>> reserve(uint64_t size);
  // A reservation whose record could not be written: its space is given
  // back (see pack_appender.cpp).
  void abandon(const std::shared_ptr<BlobPack>& pack, uint64_t offset, uint64_t size);

  // Small blobs whose record publish() writes rather than seal(): at most
  // this many bytes wait so, a store; more is written at once.
  static constexpr uint64_t k_deferred_blob_max = 64 * 1024;
  static constexpr uint64_t k_deferred_bytes_max = 16 * 1024 * 1024;
  // Counts `size` bytes as waiting; false (nothing counted) past the limit.
  bool defer(uint64_t size);
  // Bytes counted by defer() are written, or will never be.
  void undefer(uint64_t size) { m_deferred.fetch_sub(size); }

private:
  std::filesystem::path m_root;
  uint64_t m_pack_bytes;
  std::mutex m_mutex; // guards the three below
  std::shared_ptr<BlobPack> m_active;
  uint64_t m_active_end = 0;
  uint32_t m_next_pack = 1;
  std::atomic<uint64_t> m_deferred{0};
};

} // namespace tributary::store::blob_detail

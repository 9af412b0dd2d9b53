#pragma once

// Keeps the blob index's memory map out of the process's resident memory.
// The index is read through a shared map of its file: every page a lookup
// touches stays mapped, and counted in the process's resident memory
// (RSS), though it is the kernel's page cache (reclaimable, and what a
// cgroup charges either way). Random names touch every page: a million
// blobs made 100-160 MB of RSS that grows with the store. The mapping is
// dropped every 64 uses, and by a thread of this class 250 ms after any
// use (MADV_DONTNEED on a shared file mapping drops page-table entries
// only: the pages stay cached, and readers fault them back in without
// I/O), so RSS stays the process's own memory. Every 64: a fault maps the
// 16 cached pages around it (fault-around ignores MADV_RANDOM on this
// kernel), so 1,024 lookups between releases kept the whole index mapped;
// 64 cost 2.5% of a lookup loop.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <thread>

namespace tributary::store::blob_detail {

class MapReleaser {
public:
  // The map of `file` (found in /proc/self/maps), `bytes` long; does
  // nothing when the file is not mapped.
  MapReleaser(const std::filesystem::path& file, size_t bytes);
  ~MapReleaser();
  MapReleaser(const MapReleaser&) = delete;
  MapReleaser& operator=(const MapReleaser&) = delete;

  // A lookup read pages of the map: every 64th drops them.
  void used() {
    if ((m_touched.fetch_add(1, std::memory_order_relaxed) & 63) == 63) {
      release();
    }
  }
  // A write touched pages of the map: the thread drops them.
  void touched() { m_touched.fetch_add(1, std::memory_order_relaxed); }
  // Drops the whole map now (the kernel skips what was never touched).
  void release();

private:
  void* m_map = nullptr;
  size_t m_bytes = 0;
  std::atomic<uint64_t> m_touched{0};
  std::mutex m_mutex;
  std::condition_variable m_cv;
  bool m_stop = false;
  std::thread m_thread;
};

} // namespace tributary::store::blob_detail

// The directories of file blobs: made as first needed, flushed before the
// database names what they hold.
#include "store/blob/blob_directories.h"

#include "store/blob/blob_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tributary::store::blob_detail {

namespace fs = std::filesystem;

fs::path BlobDirectories::file_path(const std::string& sha256) { return dir(sha256.substr(0, 2)) / sha256; }

// One level of 256 directories, each made the first time a blob needs it
// (once a process: a flag per directory). Making all 256 when the store
// opened cost 60 ms of a 10,000-resource baseline on a fresh ext4, whose
// small blobs all go to packs; making one on the hot path for every blob
// cost more than writing it.
fs::path BlobDirectories::dir(const std::string& sub) {
  fs::path out = m_root / "blobs" / sub;
  const auto digit = [](char c) { return c >= 'a' ? c - 'a' + 10 : c - '0'; };
  if (sub.size() != 2) {
    return out;
  }
  std::atomic<bool>& made = m_made[static_cast<size_t>(digit(sub[0]) * 16 + digit(sub[1])) & 255];
  if (!made.load(std::memory_order_acquire)) {
    if (::mkdir(out.c_str(), 0755) == 0) {
      // Durable before a blob is named in it.
      if (int fd = ::open((m_root / "blobs").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); fd >= 0) {
        ::fsync(fd);
        ::close(fd);
      }
    }
    made.store(true, std::memory_order_release);
  }
  return out;
}

void BlobDirectories::named(const fs::path& dir) {
  std::lock_guard lock(m_mutex);
  m_dirty.insert(dir);
}

Result<void> BlobDirectories::sync() {
  std::lock_guard flushing(m_sync_mutex);
  std::set<fs::path> dirs;
  {
    std::lock_guard lock(m_mutex);
    dirs.swap(m_dirty);
  }
  if (dirs.empty()) {
    return {};
  }
  if (dirs.size() > 4 && !fsync_dir_replaced()) {
    // Many directories: one file-system sync beats one flush per directory.
    int fd = ::open((m_root / "blobs").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
      int rc = ::syncfs(fd);
      ::close(fd);
      if (rc == 0) {
        return {};
      }
    }
  }
  for (auto it = dirs.begin(); it != dirs.end(); ++it) {
    if (auto r = fsync_dir(*it); !r) {
      // Not durable: the next call flushes them again (dropped, the rows
      // committed after it would name files a power cut could lose).
      std::lock_guard lock(m_mutex);
      m_dirty.insert(it, dirs.end());
      return r;
    }
  }
  return {};
}

} // namespace tributary::store::blob_detail

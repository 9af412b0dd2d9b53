// Appending to pack files: the active pack, reservations and their return.
#include "store/blob/pack_appender.h"

#include "store/blob/blob_io.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

namespace tributary::store::blob_detail {

namespace fs = std::filesystem;

BlobPack::BlobPack(uint32_t id, int fd, fs::path path) : m_id(id), m_fd(fd), m_path(std::move(path)) {
  ::flock(m_fd, LOCK_SH);
}

BlobPack::~BlobPack() { ::close(m_fd); }

PackAppender::PackAppender(fs::path root, uint64_t pack_bytes)
    : m_root(std::move(root)), m_pack_bytes(std::max<uint64_t>(pack_bytes, 1)) {
  for (const auto& [id, path] : list_packs(m_root)) {
    m_next_pack = std::max(m_next_pack, id + 1);
  }
}

Result<std::pair<std::shared_ptr<BlobPack>, uint64_t>> PackAppender::reserve(uint64_t size) {
  std::lock_guard lock(m_mutex);
  if (!m_active || (m_active_end > 0 && m_active_end + size > m_pack_bytes)) {
    for (;;) {
      const uint32_t id = m_next_pack++;
      fs::path p = pack_path(m_root, id);
      const int fd = ::open(p.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd >= 0) {
        // The pack's name is durable before any index entry points into it.
        if (auto r = fsync_dir(m_root / "packs"); !r) {
          ::close(fd);
          return tl::unexpected(r.error());
        }
        m_active = std::make_shared<BlobPack>(id, fd, std::move(p));
        m_active_end = 0;
        break;
      }
      if (errno != EEXIST) { // EEXIST: another process's pack
        return make_error(ErrorKind::io, "create " + p.string() + ": " + errno_text());
      }
    }
  }
  const uint64_t offset = m_active_end;
  m_active_end += aligned(size);
  return std::make_pair(m_active, offset);
}

// The last reservation of the active pack is taken back whole (the pack
// truncated to it, the next record written there); any other becomes a
// hole, which holds no disk space, and which check() steps over as a
// record never written. After a full disk had filled, 110 MB of a 158 MB
// pack held no record (#33).
void PackAppender::abandon(const std::shared_ptr<BlobPack>& pack, uint64_t offset, uint64_t size) {
  std::lock_guard lock(m_mutex);
  const uint64_t length = aligned(size);
  if (pack == m_active && offset + length == m_active_end) {
    m_active_end = offset;
    (void)::ftruncate(pack->fd(), static_cast<off_t>(offset));
  } else {
    (void)::fallocate(pack->fd(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                      static_cast<off_t>(length));
  }
}

bool PackAppender::defer(uint64_t size) {
  if (m_deferred.fetch_add(size) + size <= k_deferred_bytes_max) {
    return true;
  }
  m_deferred.fetch_sub(size);
  return false;
}

} // namespace tributary::store::blob_detail

// The blob index's map dropped from resident memory (see map_releaser.h).
#include "store/blob/map_releaser.h"

#include "common/thread_name.h"

#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace tributary::store::blob_detail {

namespace fs = std::filesystem;

namespace {

// Finds the map of `file` in /proc/self/maps (null if not found).
void* find_map(const fs::path& file) {
  std::FILE* f = std::fopen("/proc/self/maps", "re");
  if (!f) {
    return nullptr;
  }
  std::error_code ec;
  const std::string want = fs::canonical(file, ec).string();
  void* out = nullptr;
  char line[4096];
  while (!out && !want.empty() && std::fgets(line, sizeof line, f)) {
    std::string l(line);
    while (!l.empty() && l.back() == '\n') {
      l.pop_back();
    }
    if (l.size() > want.size() && l.compare(l.size() - want.size(), want.size(), want) == 0 &&
        l[l.size() - want.size() - 1] == ' ') {
      out = reinterpret_cast<void*>(std::strtoull(l.c_str(), nullptr, 16));
    }
  }
  std::fclose(f);
  return out;
}

} // namespace

MapReleaser::MapReleaser(const fs::path& file, size_t bytes) : m_map(find_map(file)), m_bytes(bytes) {
  if (!m_map) {
    return;
  }
  m_thread = std::thread([this] {
    name_thread("blob releaser");
    std::unique_lock lock(m_mutex);
    uint64_t seen = m_touched.load();
    while (!m_cv.wait_for(lock, std::chrono::milliseconds(250), [this] { return m_stop; })) {
      const uint64_t now = m_touched.load();
      if (now != seen) {
        seen = now;
        release();
      }
    }
  });
}

MapReleaser::~MapReleaser() {
  if (m_thread.joinable()) {
    {
      std::lock_guard lock(m_mutex);
      m_stop = true;
    }
    m_cv.notify_all();
    m_thread.join();
  }
}

void MapReleaser::release() {
  if (m_map) {
    ::madvise(m_map, m_bytes, MADV_DONTNEED);
  }
}

} // namespace tributary::store::blob_detail

// The blob store's small helpers: names, whole reads and writes, directory
// flushes (and the hook tests put in their place), pack file names.
#include "store/blob/blob_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>

namespace tributary::store {

namespace fs = std::filesystem;

namespace blob_detail {

std::string errno_text() { return std::strerror(errno); }

bool valid_name(const std::string& s) {
  if (s.size() != 64) {
    return false;
  }
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

// The 32 bytes a valid name spells (the index key).
std::array<unsigned char, 32> raw_name(const std::string& hex) {
  std::array<unsigned char, 32> out{};
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i < 32; ++i) {
    out[i] = static_cast<unsigned char>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
  }
  return out;
}

// Writes all of `data` to `fd`.
Result<void> write_all(int fd, const char* data, size_t size, const fs::path& root) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return make_error(ErrorKind::io, "write a temporary blob file under " + root.string() + ": " + errno_text());
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return {};
}

namespace {

Result<void> fsync_dir_now(const fs::path& dir);

// The flush of a directory's entries (tests replace it to delay or fail it).
std::mutex g_dir_sync_mutex;
std::function<Result<void>(const fs::path&)> g_dir_sync;

} // namespace

Result<void> fsync_dir(const fs::path& dir) {
  std::function<Result<void>(const fs::path&)> hook;
  {
    std::lock_guard lock(g_dir_sync_mutex);
    hook = g_dir_sync;
  }
  return hook ? hook(dir) : fsync_dir_now(dir);
}

namespace {

Result<void> fsync_dir_now(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return make_error(ErrorKind::io, "open " + dir.string() + ": " + errno_text());
  }
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) {
    return make_error(ErrorKind::io, "fsync " + dir.string() + ": " + errno_text());
  }
  return {};
}

} // namespace

bool fsync_dir_replaced() {
  std::lock_guard lock(g_dir_sync_mutex);
  return static_cast<bool>(g_dir_sync);
}

fs::path pack_path(const fs::path& root, uint32_t id) {
  char name[32];
  std::snprintf(name, sizeof name, "%010u.pack", id);
  return root / "packs" / name;
}

std::vector<std::pair<uint32_t, fs::path>> list_packs(const fs::path& root) {
  std::error_code ec;
  std::vector<std::pair<uint32_t, fs::path>> packs;
  for (const auto& e : fs::directory_iterator(root / "packs", ec)) {
    unsigned id = 0;
    if (std::sscanf(e.path().filename().c_str(), "%10u.pack", &id) == 1) {
      packs.emplace_back(id, e.path());
    }
  }
  std::sort(packs.begin(), packs.end());
  return packs;
}

// Reads exactly `size` bytes at `offset`; false at the end of the file.
bool pread_all(int fd, void* buf, size_t size, uint64_t offset) {
  auto* p = static_cast<char*>(buf);
  while (size > 0) {
    ssize_t n = ::pread(fd, p, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return true;
}

std::string hex_of(const unsigned char* raw, size_t n) {
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += k_hex[raw[i] >> 4];
    out += k_hex[raw[i] & 15];
  }
  return out;
}

} // namespace blob_detail

namespace testing {

void set_directory_sync(std::function<Result<void>(const std::filesystem::path&)> fn) {
  std::lock_guard lock(blob_detail::g_dir_sync_mutex);
  blob_detail::g_dir_sync = std::move(fn);
}

} // namespace testing

} // namespace tributary::store

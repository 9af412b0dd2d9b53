// The blob store's file helpers: reading and writing whole ranges,
// directory flushes (and their durability barrier, sync_directories),
// names, and the LMDB scans the collection and check share.
#include "store/blob/blob_internal.h"

namespace tributary::store {

using namespace blob_detail;

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

std::string lmdb_text(int rc) { return mdb_strerror(rc); }

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

// Every entry of `db`, in one read transaction; 0 or LMDB's error.
int scan(MDB_env* env, MDB_dbi db, const std::function<void(const MDB_val& key, const MDB_val& value)>& fn) {
  Txn t;
  MDB_cursor* cursor = nullptr;
  int rc = mdb_txn_begin(env, nullptr, MDB_RDONLY, &t.txn);
  if (rc == 0) {
    rc = mdb_cursor_open(t.txn, db, &cursor);
  }
  if (rc != 0) {
    return rc;
  }
  MDB_val k{}, v{};
  int c = mdb_cursor_get(cursor, &k, &v, MDB_FIRST);
  for (; c == 0; c = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)) {
    fn(k, v);
  }
  mdb_cursor_close(cursor);
  return c == MDB_NOTFOUND ? 0 : c;
}

// Every index entry (keys of 32 bytes: the unnamed database also holds the
// names of the named ones).
int scan_index(MDB_env* env, MDB_dbi db, const std::function<void(const BlobName&, const IndexValue&)>& fn) {
  return scan(env, db, [&](const MDB_val& k, const MDB_val& v) {
    if (k.mv_size == 32 && v.mv_size == sizeof(IndexValue)) {
      BlobName name;
      IndexValue iv;
      std::memcpy(name.data(), k.mv_data, 32);
      std::memcpy(&iv, v.mv_data, sizeof iv);
      fn(name, iv);
    }
  });
}

} // namespace blob_detail

Result<void> BlobStore::sync_directories() {
  std::lock_guard flushing(m_state->sync_mutex);
  std::set<fs::path> dirs;
  {
    std::lock_guard lock(m_state->mutex);
    dirs.swap(m_state->dirs);
  }
  if (dirs.empty()) {
    return {};
  }
  bool replaced = false;
  {
    std::lock_guard lock(g_dir_sync_mutex);
    replaced = static_cast<bool>(g_dir_sync);
  }
  if (dirs.size() > 4 && !replaced) {
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
      std::lock_guard lock(m_state->mutex);
      m_state->dirs.insert(it, dirs.end());
      return r;
    }
  }
  return {};
}

namespace testing {

void set_directory_sync(std::function<Result<void>(const std::filesystem::path&)> fn) {
  std::lock_guard lock(g_dir_sync_mutex);
  g_dir_sync = std::move(fn);
}

} // namespace testing

} // namespace tributary::store

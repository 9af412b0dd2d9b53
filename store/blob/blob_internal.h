#pragma once

// The blob store's insides, shared by the files that implement it (index,
// writer, remote tier, collection, check): the on-disk record and index
// formats, the pack a process appends to, and the open store's state. Not
// for use outside store/blob/.

#include "store/blob/blob_store.h"

#include "common/temp_files.h"

#include <fcntl.h>
#include <lmdb.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

namespace tributary::store {

namespace fs = std::filesystem;

namespace blob_detail {

std::string errno_text();
bool valid_name(const std::string& s);
// The 32 bytes a valid name spells (the index key).
std::array<unsigned char, 32> raw_name(const std::string& hex);
std::string hex_of(const unsigned char* raw, size_t n);
// Writes all of `data` to `fd`.
Result<void> write_all(int fd, const char* data, size_t size, const fs::path& root);
// Reads exactly `size` bytes at `offset`; false at the end of the file.
bool pread_all(int fd, void* buf, size_t size, uint64_t offset);
// Flushes a directory's entries (tests replace it: testing::set_directory_sync).
Result<void> fsync_dir(const fs::path& dir);
fs::path pack_path(const fs::path& root, uint32_t id);
// The pack files under `root`, by id.
std::vector<std::pair<uint32_t, fs::path>> list_packs(const fs::path& root);
std::string lmdb_text(int rc);

// A pack record: this header, then `length` bytes. The header makes a pack
// self-describing (the index can be rebuilt from the packs).
struct RecordHeader {
  char magic[4] = {'T', 'R', 'B', '1'};
  uint32_t flags = 0;
  uint64_t length = 0;
  unsigned char sha256[32] = {};
};
static_assert(sizeof(RecordHeader) == 48);

// What the index holds for a blob.
struct IndexValue {
  uint32_t pack = 0;
  uint32_t flags = 0;
  uint64_t offset = 0; // of the bytes, past the record header
  uint64_t length = 0;
};
static_assert(sizeof(IndexValue) == 24);

// A transaction that aborts unless committed.
struct Txn {
  MDB_txn* txn = nullptr;
  ~Txn() {
    if (txn) {
      mdb_txn_abort(txn);
    }
  }
  int commit() {
    const int rc = mdb_txn_commit(txn);
    txn = nullptr;
    return rc;
  }
};

// Every entry of `db`, in one read transaction; 0 or LMDB's error.
int scan(MDB_env* env, MDB_dbi db, const std::function<void(const MDB_val& key, const MDB_val& value)>& fn);
// Every index entry (keys of 32 bytes: the unnamed database also holds the
// names of the named ones).
int scan_index(MDB_env* env, MDB_dbi db, const std::function<void(const BlobName&, const IndexValue&)>& fn);

} // namespace blob_detail

// The names of blob_detail the class below uses.
using blob_detail::IndexValue;
using blob_detail::RecordHeader;
using blob_detail::errno_text;
using blob_detail::fsync_dir;
using blob_detail::lmdb_text;
using blob_detail::pack_path;
using blob_detail::raw_name;

// A pack file this process appends to. It holds a shared flock on it while
// open, which tells repack() (any process's) to leave the pack alone.
struct BlobPack {
  uint32_t id = 0;
  int fd = -1;
  fs::path path;
  BlobPack(uint32_t i, int f, fs::path p) : id(i), fd(f), path(std::move(p)) { ::flock(fd, LOCK_SH); }
  ~BlobPack() { ::close(fd); }
  BlobPack(const BlobPack&) = delete;
  BlobPack& operator=(const BlobPack&) = delete;
};

struct BlobStore::Writer::Placed {
  std::shared_ptr<BlobPack> pack; // null: the blob was indexed already
  uint64_t offset = 0;
  std::optional<Error> error;
  // Reserved, its bytes still in the writer's buffer: publish() writes the
  // record (this header, then the bytes) with the others of its batch.
  bool pending = false;
  RecordHeader header;
};

// Small blobs whose pack record is written by publish() rather than by
// seal(): one pwritev for a run of records in the committing thread instead
// of one for each blob in the fetching ones (10,000 calls a 10,000-resource
// baseline). At most this much is held so, a store; more is written at once.
inline constexpr uint64_t k_deferred_blob_max = 64 * 1024;
inline constexpr uint64_t k_deferred_bytes_max = 16 * 1024 * 1024;

struct BlobStore::State {
  fs::path root;
  // Which of the 256 directories of file blobs exist (made as first needed).
  std::array<std::atomic<bool>, 256> made{};
  MDB_env* env = nullptr;
  MDB_dbi dbi = 0;           // sha-256 -> IndexValue (the unnamed database)
  MDB_dbi condemned_dbi = 0; // sha-256 -> int64 unix time it was condemned ("condemned")

  // Held through a whole sync_directories(): a caller returns only once
  // every directory named before its call is durable, even when another
  // caller took that directory into its own flush.
  std::mutex sync_mutex;
  std::mutex mutex; // guards everything below
  // Directories of file blobs named since the last sync_directories().
  std::set<fs::path> dirs;
  std::shared_ptr<BlobPack> active;
  std::shared_ptr<RemoteTier> remote; // set_remote()
  // Blobs read from the remote tier wait here to be stored as a group (see
  // fetch_remote): one pack sync and one index transaction for every
  // reader that came meanwhile, not two syncs each.
  struct Fill {
    BlobStore::Writer* writer;
    std::optional<Result<BlobInfo>> result;
  };
  std::mutex fill_mutex;
  std::condition_variable fill_cv;
  std::vector<Fill*> fill_queue;
  bool fill_leader = false;
  uint64_t active_end = 0;
  uint32_t next_pack = 1;
  uint64_t pack_bytes = k_pack_bytes;

  ~State() {
    if (releaser.joinable()) {
      {
        std::lock_guard lock(release_mutex);
        release_stop = true;
      }
      release_cv.notify_all();
      releaser.join();
    }
    if (env) {
      mdb_env_close(env);
    }
  }

  // The index is read through a shared map of its file: every page a
  // lookup touches stays mapped, and counted in the process's resident
  // memory (RSS), though it is the kernel's page cache (reclaimable, and
  // what a cgroup charges either way). Random names touch every page: a
  // million blobs made 100-160 MB of RSS that grows with the store. The
  // mapping is dropped every 64 lookups, and by a thread of this state
  // 250 ms after any use (MADV_DONTNEED on a shared file mapping drops
  // page-table entries only: the pages stay cached, and readers fault them
  // back in without I/O), so RSS stays the process's own memory. Every 64:
  // a fault maps the 16 cached pages around it (fault-around ignores
  // MADV_RANDOM on this kernel), so 1,024 lookups between releases kept
  // the whole index mapped; 64 cost 2.5% of a lookup loop.
  std::atomic<uint64_t> touched{0};
  // Bytes of pending records (Placed::pending) of this store's writers.
  std::atomic<uint64_t> deferred_bytes{0};
  std::mutex release_mutex;
  std::condition_variable release_cv;
  bool release_stop = false;
  std::thread releaser;
  void used() {
    if ((touched.fetch_add(1, std::memory_order_relaxed) & 63) == 63) {
      release_map();
    }
  }
  void release_map() {
    // The whole map: the kernel skips what was never touched.
    MDB_envinfo info{};
    if (map && mdb_env_info(env, &info) == 0) {
      ::madvise(map, info.me_mapsize, MADV_DONTNEED);
    }
  }
  void start_releaser() {
    releaser = std::thread([this] {
      std::unique_lock lock(release_mutex);
      uint64_t seen = touched.load();
      while (!release_cv.wait_for(lock, std::chrono::milliseconds(250), [this] { return release_stop; })) {
        const uint64_t now = touched.load();
        if (now != seen) {
          seen = now;
          release_map();
        }
      }
    });
  }
  void* map = nullptr; // where LMDB mapped the index (it tells only of a fixed map)

  // Finds the map of `file` in /proc/self/maps (null if not found).
  static void* find_map(const fs::path& file) {
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

  Result<std::optional<IndexValue>> lookup(const std::string& sha256) {
    used();
    MDB_txn* txn = nullptr;
    if (int rc = mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn); rc != 0) {
      return make_error(ErrorKind::io, "blob index under " + root.string() + ": " + lmdb_text(rc));
    }
    auto key = raw_name(sha256);
    MDB_val k{key.size(), key.data()};
    MDB_val v{};
    const int rc = mdb_get(txn, dbi, &k, &v);
    std::optional<IndexValue> out;
    if (rc == 0 && v.mv_size == sizeof(IndexValue)) {
      IndexValue iv;
      std::memcpy(&iv, v.mv_data, sizeof iv);
      out = iv;
    }
    mdb_txn_abort(txn);
    if (rc != 0 && rc != MDB_NOTFOUND) {
      return make_error(ErrorKind::io, "blob index under " + root.string() + ": " + lmdb_text(rc));
    }
    return out;
  }

  // A writer reuses the stored blob `sha256`: lifts its condemnation, if
  // any. Returns whether it is still stored (false: garbage collection
  // removed it; the caller must store the bytes again). The common case
  // (not condemned) is one read transaction; the write transaction that
  // lifts a mark is serialised with remove_condemned()'s.
  Result<bool> lift(const std::string& sha256, const fs::path& file) {
    auto key = raw_name(sha256);
    MDB_val k{key.size(), key.data()};
    MDB_val v{};
    MDB_txn* txn = nullptr;
    int rc = mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn);
    if (rc != 0) {
      return make_error(ErrorKind::io, "blob index under " + root.string() + ": " + lmdb_text(rc));
    }
    const int marked = mdb_get(txn, condemned_dbi, &k, &v);
    const int indexed = mdb_get(txn, dbi, &k, &v);
    mdb_txn_abort(txn);
    struct stat st {};
    if (marked == MDB_NOTFOUND) {
      // One snapshot: not condemned now, so not removable for a grace period.
      return indexed == 0 || ::stat(file.c_str(), &st) == 0;
    }
    rc = mdb_txn_begin(env, nullptr, 0, &txn);
    if (rc == 0) {
      rc = mdb_del(txn, condemned_dbi, &k, nullptr);
      rc = rc == MDB_NOTFOUND ? 0 : rc;
    }
    bool present = false;
    if (rc == 0) {
      present = mdb_get(txn, dbi, &k, &v) == 0 || ::stat(file.c_str(), &st) == 0;
      rc = mdb_txn_commit(txn);
    } else if (txn) {
      mdb_txn_abort(txn);
    }
    if (rc != 0) {
      return make_error(ErrorKind::io, "blob index under " + root.string() + ": " + lmdb_text(rc));
    }
    return present;
  }

  // Names blobs whose bytes are durable: one index transaction (and its
  // sync) for the group. A name already there keeps its first place.
  Result<void> index(const std::vector<std::pair<std::string, IndexValue>>& entries) {
    touched.fetch_add(1, std::memory_order_relaxed); // the write touched pages of the map too
    MDB_txn* txn = nullptr;
    int rc = mdb_txn_begin(env, nullptr, 0, &txn);
    for (size_t i = 0; rc == 0 && i < entries.size(); ++i) {
      if ((i & 63) == 63) {
        // A put reads its leaf through the map as a lookup does (the
        // pages it changes are copies until the commit writes them):
        // 2,500 puts mapped up to the whole index.
        release_map();
      }
      auto key = raw_name(entries[i].first);
      MDB_val k{key.size(), key.data()};
      MDB_val v{sizeof(IndexValue), const_cast<IndexValue*>(&entries[i].second)};
      rc = mdb_put(txn, dbi, &k, &v, MDB_NOOVERWRITE);
      if (rc == MDB_KEYEXIST) {
        rc = 0; // stored already: this writer reuses that copy, which stays
      }
      if (rc == 0) {
        rc = mdb_del(txn, condemned_dbi, &k, nullptr);
        rc = rc == MDB_NOTFOUND ? 0 : rc;
      }
    }
    if (rc != 0) {
      if (txn) {
        mdb_txn_abort(txn);
      }
    } else {
      rc = mdb_txn_commit(txn);
    }
    if (rc != 0) {
      return make_error(ErrorKind::io, "blob index under " + root.string() + ": " + lmdb_text(rc) +
                                           (rc == MDB_MAP_FULL ? " (the index reached its 256 GiB map)" : ""));
    }
    return {};
  }

  // Room for one record of `size` bytes at the end of this process's
  // active pack (a new pack past pack_bytes).
  Result<std::pair<std::shared_ptr<BlobPack>, uint64_t>> reserve(uint64_t size) {
    std::lock_guard lock(mutex);
    if (!active || (active_end > 0 && active_end + size > pack_bytes)) {
      for (;;) {
        const uint32_t id = next_pack++;
        fs::path p = pack_path(root, id);
        const int fd = ::open(p.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd >= 0) {
          // The pack's name is durable before any index entry points into it.
          if (auto r = fsync_dir(root / "packs"); !r) {
            ::close(fd);
            return tl::unexpected(r.error());
          }
          active = std::make_shared<BlobPack>(id, fd, std::move(p));
          active_end = 0;
          break;
        }
        if (errno != EEXIST) { // EEXIST: another process's pack
          return make_error(ErrorKind::io, "create " + p.string() + ": " + errno_text());
        }
      }
    }
    // Records start at multiples of 8, so that check() can find the next
    // record past a damaged or never-written one.
    const uint64_t offset = active_end;
    active_end += (size + 7) & ~uint64_t{7};
    return std::make_pair(active, offset);
  }

  // A reservation whose record could not be written (the disk full, most
  // often): its space is given back. The last one of the active pack is
  // taken back whole (the pack truncated to it, the next record written
  // there); any other becomes a hole, which holds no disk space, and which
  // check() steps over as a record never written. After a full disk had
  // filled, 110 MB of a 158 MB pack held no record (#33).
  void abandon(const std::shared_ptr<BlobPack>& pack, uint64_t offset, uint64_t size) {
    std::lock_guard lock(mutex);
    const uint64_t aligned = (size + 7) & ~uint64_t{7};
    if (pack == active && offset + aligned == active_end) {
      active_end = offset;
      (void)::ftruncate(pack->fd, static_cast<off_t>(offset));
    } else {
      (void)::fallocate(pack->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                        static_cast<off_t>(aligned));
    }
  }
};

} // namespace tributary::store

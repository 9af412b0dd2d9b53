#include "store/blob_store.h"

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

namespace {

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

Result<void> fsync_dir_now(const fs::path& dir);

// The flush of a directory's entries (tests replace it to delay or fail it).
std::mutex g_dir_sync_mutex;
std::function<Result<void>(const fs::path&)> g_dir_sync;

Result<void> fsync_dir(const fs::path& dir) {
  std::function<Result<void>(const fs::path&)> hook;
  {
    std::lock_guard lock(g_dir_sync_mutex);
    hook = g_dir_sync;
  }
  return hook ? hook(dir) : fsync_dir_now(dir);
}

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

fs::path pack_path(const fs::path& root, uint32_t id) {
  char name[32];
  std::snprintf(name, sizeof name, "%010u.pack", id);
  return root / "packs" / name;
}

std::string lmdb_text(int rc) { return mdb_strerror(rc); }

} // namespace

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
};

struct BlobStore::State {
  fs::path root;
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

Result<std::shared_ptr<BlobStore>> BlobStore::open(const fs::path& root, uint64_t pack_bytes) {
  std::error_code ec;
  for (const char* sub : {"blobs", "tmp", "packs", "index"}) {
    if (!ec) {
      fs::create_directories(root / sub, ec);
    }
  }
  if (ec) {
    return make_error(ErrorKind::io, "cannot create blob store under " + root.string() + ": " + ec.message());
  }
  // One level of 256 directories, made once: creating directories on the
  // hot path cost more than writing the blobs (measured on ext4 here).
  static constexpr char k_hex[] = "0123456789abcdef";
  for (int i = 0; i < 256 && !ec; ++i) {
    fs::create_directories(root / "blobs" / std::string{k_hex[i >> 4], k_hex[i & 15]}, ec);
  }
  if (ec) {
    return make_error(ErrorKind::io, "cannot create blob store under " + root.string() + ": " + ec.message());
  }
  // Sealed file blobs wait open until their group is published: allow
  // plenty of descriptors (the soft limit is often 1024; the hard one much
  // higher).
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max && rl.rlim_cur < 65536) {
    rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, 65536);
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }

  // LMDB must not be opened twice by one process: stores of one root share
  // their state.
  static std::mutex registry_mutex;
  static std::map<fs::path, std::weak_ptr<State>> registry;
  fs::path key = fs::weakly_canonical(root, ec);
  if (ec) {
    key = fs::absolute(root);
  }
  std::lock_guard lock(registry_mutex);
  auto store = std::shared_ptr<BlobStore>(new BlobStore(root));
  if (auto it = registry.find(key); it != registry.end()) {
    if (auto state = it->second.lock()) {
      store->m_state = std::move(state);
      return store;
    }
  }
  // Temporary blob files of processes that died are garbage; those of a
  // live process, and every other kind of file (a daemon's spooled
  // documents and dump packages share this directory), are not ours.
  remove_orphaned_temp_files(root / "tmp", {"blob"});
  auto state = std::make_shared<State>();
  state->root = root;
  state->pack_bytes = std::max<uint64_t>(pack_bytes, 1);
  auto fail = [&](int rc) {
    return make_error(ErrorKind::io, "cannot open the blob index " + (root / "index").string() + ": " + lmdb_text(rc));
  };
  if (int rc = mdb_env_create(&state->env); rc != 0) {
    state->env = nullptr;
    return fail(rc);
  }
  // Read transactions are short and taken from any thread (MDB_NOTLS); the
  // map is address space, not memory: the file grows as entries arrive.
  mdb_env_set_maxreaders(state->env, 1024);
  mdb_env_set_maxdbs(state->env, 4);
  mdb_env_set_mapsize(state->env, size_t{256} << 30);
  // MDB_NORDAHEAD: lookups are random (names are hashes); it also turns
  // off fault-around, which mapped 16 pages a lookup.
  if (int rc = mdb_env_open(state->env, (root / "index").c_str(), MDB_NOTLS | MDB_NORDAHEAD, 0644); rc != 0) {
    return fail(rc);
  }
  state->map = State::find_map(root / "index" / "data.mdb");
  if (state->map) {
    state->start_releaser();
  }
  int stale = 0;
  mdb_reader_check(state->env, &stale); // reader slots of processes that died
  MDB_txn* txn = nullptr;
  if (int rc = mdb_txn_begin(state->env, nullptr, 0, &txn); rc != 0) {
    return fail(rc);
  }
  if (int rc = mdb_dbi_open(txn, nullptr, 0, &state->dbi); rc != 0) {
    mdb_txn_abort(txn);
    return fail(rc);
  }
  // Garbage collection's marks, beside the index so that one transaction
  // sees both (a named database is a key of the unnamed one: readers of the
  // index skip keys that are not 32 bytes long).
  if (int rc = mdb_dbi_open(txn, "condemned", MDB_CREATE, &state->condemned_dbi); rc != 0) {
    mdb_txn_abort(txn);
    return fail(rc);
  }
  if (int rc = mdb_txn_commit(txn); rc != 0) {
    return fail(rc);
  }
  for (const auto& e : fs::directory_iterator(root / "packs", ec)) {
    const std::string name = e.path().filename().string();
    unsigned id = 0;
    if (std::sscanf(name.c_str(), "%10u.pack", &id) == 1 && id >= state->next_pack) {
      state->next_pack = id + 1;
    }
  }
  registry[key] = state;
  store->m_state = std::move(state);
  return store;
}

BlobStore::Writer::Writer(BlobStore& store, std::vector<rs::HashAlgorithm> algorithms)
    : m_store(&store), m_algorithms(algorithms), m_hasher(algorithms) {}

BlobStore::Writer::Writer(Writer&& o) noexcept
    : m_store(o.m_store), m_tmp(std::move(o.m_tmp)), m_fd(o.m_fd), m_buffer(std::move(o.m_buffer)),
      m_placed(std::move(o.m_placed)), m_size(o.m_size), m_algorithms(std::move(o.m_algorithms)),
      m_hasher(std::move(o.m_hasher)), m_digests(std::move(o.m_digests)), m_finished(o.m_finished),
      m_info(std::move(o.m_info)) {
  o.m_fd = -1;
  o.m_finished = true;
}

BlobStore::Writer& BlobStore::Writer::operator=(Writer&& o) noexcept {
  if (this != &o) {
    this->~Writer();
    new (this) Writer(std::move(o));
  }
  return *this;
}

BlobStore::Writer::~Writer() {
  if (m_fd >= 0) {
    ::close(m_fd);
  }
  if (!m_finished && !m_tmp.empty()) {
    std::error_code ec;
    fs::remove(m_tmp, ec);
  }
}

Result<void> BlobStore::Writer::spill() {
  static std::atomic<uint64_t> counter{0};
  const fs::path& root = m_store->m_root;
  // The unnamed file is made in one of the 256 directories in turn: ext4
  // allocates an inode near its directory, so this spreads allocation (and
  // its locks) over block groups instead of queueing on one.
  static constexpr char k_hex[] = "0123456789abcdef";
  const uint64_t spread = counter.fetch_add(1);
  const std::string sub{k_hex[(spread >> 4) & 15], k_hex[spread & 15]};
  m_fd = ::open((root / "blobs" / sub).c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
  if (m_fd < 0) {
    // File systems without O_TMPFILE: a named temporary file, renamed later.
    m_tmp = root / "tmp" / temp_file_name("blob", ".part");
    m_fd = ::open(m_tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (m_fd < 0) {
      const std::string why = errno_text();
      m_tmp.clear();
      return make_error(ErrorKind::io, "create a temporary blob file under " + root.string() + ": " + why);
    }
  }
  if (auto r = write_all(m_fd, m_buffer.data(), m_buffer.size(), root); !r) {
    return r;
  }
  std::string().swap(m_buffer);
  return {};
}

Result<void> BlobStore::Writer::write(const char* data, size_t size) {
  if (!m_digests.empty()) {
    return make_error(ErrorKind::usage, "blob writer: write after digests were taken");
  }
  m_hasher.update(data, size);
  if (m_fd < 0 && m_buffer.size() + size <= k_pack_max) {
    m_buffer.append(data, size);
    m_size += size;
    return {};
  }
  if (m_fd < 0) {
    if (auto r = spill(); !r) {
      return r;
    }
  }
  if (auto r = write_all(m_fd, data, size, m_store->m_root); !r) {
    return r;
  }
  m_size += size;
  return {};
}

std::vector<rs::HashValue> BlobStore::Writer::digests() {
  if (m_digests.empty()) {
    m_digests = m_hasher.finish();
  }
  return m_digests;
}

BlobInfo BlobStore::Writer::seal() {
  if (!m_info.sha256.empty()) {
    return m_info;
  }
  m_info.hashes = digests();
  m_info.length = m_size;
  for (const auto& h : m_info.hashes) {
    if (h.known() == rs::HashAlgorithm::sha256) {
      m_info.sha256 = h.hex;
    }
  }
  if (m_fd >= 0) {
    return m_info;
  }
  // A small blob goes to a pack now (unless it is stored already), so that
  // sealed writers hold no memory while they wait for publish().
  m_placed = std::make_shared<Placed>();
  State& st = *m_store->m_state;
  auto found = st.lookup(m_info.sha256); // a lookup in a memory map: no system call
  bool stored = found && found->has_value();
  if (stored) {
    // Reused: lift any condemnation (false: collected just now).
    auto kept = st.lift(m_info.sha256, m_store->file_path(m_info.sha256));
    stored = kept && *kept;
  }
  if (!stored) {
    RecordHeader header;
    header.length = m_size;
    const auto raw = raw_name(m_info.sha256);
    std::memcpy(header.sha256, raw.data(), raw.size());
    auto room = st.reserve(sizeof header + m_size);
    if (!room) {
      m_placed->error = room.error();
    } else {
      m_placed->pack = room->first;
      m_placed->offset = room->second + sizeof header;
      iovec parts[2] = {{&header, sizeof header}, {m_buffer.data(), m_buffer.size()}};
      const size_t total = sizeof header + m_buffer.size();
      size_t done = 0;
      while (done < total) {
        // One pwritev for the record; a short write finishes piece by piece.
        ssize_t n;
        if (done == 0) {
          n = ::pwritev(room->first->fd, parts, 2, static_cast<off_t>(room->second));
        } else {
          const char* p = done < sizeof header ? reinterpret_cast<const char*>(&header) + done
                                               : m_buffer.data() + (done - sizeof header);
          const size_t left = done < sizeof header ? sizeof header - done : total - done;
          n = ::pwrite(room->first->fd, p, left, static_cast<off_t>(room->second + done));
        }
        if (n < 0 && errno == EINTR) {
          continue;
        }
        if (n <= 0) {
          m_placed->error = Error{ErrorKind::io, "write " + room->first->path.string() + ": " +
                                                     (n < 0 ? errno_text() : std::string("no progress"))};
          st.abandon(room->first, room->second, total);
          m_placed->pack.reset();
          break;
        }
        done += static_cast<size_t>(n);
      }
    }
  }
  std::string().swap(m_buffer);
  return m_info;
}

Result<BlobInfo> BlobStore::Writer::commit() {
  const BlobInfo info = seal();
  if (m_placed) {
    std::vector<Writer*> one{this};
    return std::move(m_store->publish(one).front());
  }
  if (::fsync(m_fd) != 0) {
    return make_error(ErrorKind::io, "fsync blob " + info.sha256 + ": " + errno_text());
  }
  std::vector<Result<BlobInfo>> out;
  out.push_back(link_into_place());
  m_store->upload_published(out);
  return std::move(out.front());
}

Result<BlobInfo> BlobStore::Writer::link_into_place() {
  const BlobInfo info = seal();
  const fs::path dest = m_store->file_path(info.sha256);
  if (m_tmp.empty()) {
    // An O_TMPFILE file has no name until it is linked into place: no
    // rename across directories, no half-written file ever visible.
    const std::string proc = "/proc/self/fd/" + std::to_string(m_fd);
    for (int attempt = 0;; ++attempt) {
      if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, dest.c_str(), AT_SYMLINK_FOLLOW) == 0) {
        break;
      }
      if (errno != EEXIST) {
        return make_error(ErrorKind::io, "link blob into " + dest.string() + ": " + errno_text());
      }
      // Stored already: reuse that copy, unless garbage collection removed
      // it just now (then link this one).
      auto kept = m_store->m_state->lift(info.sha256, dest);
      if (!kept) {
        return tl::unexpected(kept.error());
      }
      if (*kept || attempt > 0) {
        break;
      }
    }
    ::close(m_fd);
    m_fd = -1;
    m_finished = true;
  } else {
    ::close(m_fd);
    m_fd = -1;
    std::error_code ec;
    auto kept = fs::exists(dest, ec) ? m_store->m_state->lift(info.sha256, dest) : Result<bool>(false);
    if (kept && *kept) {
      // Same bytes already stored (content addressing): keep the old copy.
      fs::remove(m_tmp, ec);
      m_finished = true;
      return info;
    }
    if (::rename(m_tmp.c_str(), dest.c_str()) != 0) {
      return make_error(ErrorKind::io, "rename into " + dest.string() + ": " + errno_text());
    }
    m_finished = true;
  }
  std::lock_guard lock(m_store->m_state->mutex);
  m_store->m_state->dirs.insert(dest.parent_path());
  return info;
}

std::vector<Result<BlobInfo>> BlobStore::publish(std::vector<Writer*>& writers, std::vector<std::string>* deferred) {
  std::vector<Result<BlobInfo>> out;
  out.reserve(writers.size());
  for (auto* w : writers) {
    out.emplace_back(w->seal());
  }
  // Packed blobs: one fdatasync per pack written, then one index
  // transaction names them all.
  std::vector<BlobPack*> packs;
  for (size_t i = 0; i < writers.size(); ++i) {
    const auto& placed = writers[i]->m_placed;
    if (placed && placed->error) {
      out[i] = tl::unexpected(*placed->error);
    } else if (placed && placed->pack &&
               std::find(packs.begin(), packs.end(), placed->pack.get()) == packs.end()) {
      packs.push_back(placed->pack.get());
    }
  }
  std::map<BlobPack*, std::string> unsynced;
  for (BlobPack* p : packs) {
    if (::fdatasync(p->fd) != 0) {
      unsynced[p] = "fdatasync " + p->path.string() + ": " + errno_text();
    }
  }
  std::vector<std::pair<std::string, IndexValue>> entries;
  std::vector<size_t> indexed;
  for (size_t i = 0; i < writers.size(); ++i) {
    const auto& placed = writers[i]->m_placed;
    if (!placed || placed->error || !out[i]) {
      continue;
    }
    if (placed->pack) {
      if (auto u = unsynced.find(placed->pack.get()); u != unsynced.end()) {
        out[i] = make_error(ErrorKind::io, u->second);
        continue;
      }
      entries.emplace_back(out[i]->sha256, IndexValue{placed->pack->id, 0, placed->offset, out[i]->length});
    }
    indexed.push_back(i);
  }
  if (!entries.empty()) {
    if (auto r = m_state->index(entries); !r) {
      for (size_t i : indexed) {
        out[i] = tl::unexpected(r.error());
      }
      indexed.clear();
    }
  }
  for (size_t i : indexed) {
    writers[i]->m_finished = true;
    writers[i]->m_placed.reset();
  }
  // File blobs: one sync of the whole file system makes every sealed blob's
  // bytes durable; only then are they given names.
  int synced_fd = -1;
  int rc = 0;
  std::string why;
  for (size_t i = 0; i < writers.size(); ++i) {
    Writer* w = writers[i];
    if (w->m_fd < 0 || w->m_finished) {
      continue;
    }
    if (synced_fd < 0) {
      synced_fd = w->m_fd;
      rc = ::syncfs(synced_fd);
      why = rc != 0 ? errno_text() : std::string();
    }
    if (rc != 0) {
      out[i] = make_error(ErrorKind::io, "syncfs for blob " + w->m_info.sha256 + ": " + why);
    } else {
      out[i] = w->link_into_place();
    }
  }
  upload_published(out, deferred);
  return out;
}

namespace {
// Set while a blob fetched from the remote tier is stored here: it is
// there already.
thread_local bool t_from_remote = false;
} // namespace

void BlobStore::set_remote(std::shared_ptr<RemoteTier> tier) {
  std::lock_guard lock(m_state->mutex);
  m_state->remote = std::move(tier);
}

bool BlobStore::has_remote() const {
  std::lock_guard lock(m_state->mutex);
  return m_state->remote != nullptr;
}

std::shared_ptr<RemoteTier> BlobStore::remote() const {
  std::lock_guard lock(m_state->mutex);
  return m_state->remote;
}

Result<void> BlobStore::upload(const std::vector<std::string>& sha256s) const {
  std::shared_ptr<RemoteTier> remote;
  {
    std::lock_guard lock(m_state->mutex);
    remote = m_state->remote;
  }
  if (!remote || sha256s.empty()) {
    return {};
  }
  std::vector<RemoteTier::Upload> uploads;
  for (const auto& sha : sha256s) {
    auto where = locate_here(sha);
    if (!where) {
      return tl::unexpected(where.error());
    }
    uploads.push_back(RemoteTier::Upload{BlobInfo{sha, where->length, {}}, *where});
  }
  return remote->upload(uploads);
}

void BlobStore::upload_published(std::vector<Result<BlobInfo>>& out, std::vector<std::string>* deferred) const {
  std::shared_ptr<RemoteTier> remote;
  {
    std::lock_guard lock(m_state->mutex);
    remote = m_state->remote;
  }
  if (!remote || t_from_remote) {
    return;
  }
  if (deferred) {
    for (const auto& r : out) {
      if (r) {
        deferred->push_back(r->sha256);
      }
    }
    return;
  }
  std::vector<RemoteTier::Upload> uploads;
  std::vector<size_t> which;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i]) {
      continue;
    }
    auto where = locate_here(out[i]->sha256);
    if (!where) {
      out[i] = tl::unexpected(where.error());
      continue;
    }
    uploads.push_back(RemoteTier::Upload{*out[i], *where});
    which.push_back(i);
  }
  if (uploads.empty()) {
    return;
  }
  if (auto r = remote->upload(uploads); !r) {
    for (size_t i : which) {
      out[i] = tl::unexpected(r.error());
    }
  }
}

Result<void> BlobStore::fetch_remote(RemoteTier& tier, const std::string& sha256) const {
  // A const store fills its cache: the state is shared, the bytes are
  // verified against their name before they are named.
  BlobStore& self = const_cast<BlobStore&>(*this);
  // First the blob's whole group, with one request, when the tier can: each
  // blob verified against its name, those that fail left out (the one asked
  // for then comes alone, below), all stored with one publish().
  auto grouped = tier.download_group(sha256, [&](std::vector<RemoteTier::Neighbour>& group) -> Result<void> {
    std::vector<Writer> held;
    held.reserve(group.size());
    for (auto& n : group) {
      if (auto here = m_state->lookup(n.sha256); here && here->has_value()) {
        continue; // stored here already
      }
      auto w = self.begin();
      if (!w) {
        return tl::unexpected(w.error());
      }
      if (auto wr = w->write(n.bytes.data(), n.bytes.size()); !wr) {
        return wr;
      }
      std::string().swap(n.bytes);
      const auto digests = w->digests();
      if (!digests.empty() && digests.front().hex == n.sha256) {
        held.push_back(std::move(*w));
      }
    }
    std::vector<Writer*> writers;
    for (auto& w : held) {
      writers.push_back(&w);
    }
    t_from_remote = true;
    auto results = self.publish(writers);
    t_from_remote = false;
    for (auto& res : results) {
      if (!res) {
        return tl::unexpected(res.error());
      }
    }
    return {};
  });
  if (grouped && *grouped) {
    if (auto here = locate_here(sha256); here) {
      return {};
    }
  }
  auto w = self.begin();
  if (!w) {
    return tl::unexpected(w.error());
  }
  Result<void> written;
  auto got = tier.download(sha256, [&](const char* d, size_t n) {
    written = w->write(d, n);
    return static_cast<bool>(written);
  });
  if (!written) {
    return written;
  }
  if (!got) {
    return got;
  }
  const auto digests = w->digests();
  if (digests.empty() || digests.front().hex != sha256) {
    return make_error(ErrorKind::io, "blob " + sha256 + " from the remote tier hashes to " +
                                         (digests.empty() ? std::string("nothing") : digests.front().hex));
  }
  // Group commit: the first reader to find no one storing stores every
  // blob queued so far with one publish(); the others wait for theirs.
  // (One publish each, two syncs each, held cold reads to 284/s.)
  State& st = *m_state;
  State::Fill fill{&*w, std::nullopt};
  std::unique_lock lock(st.fill_mutex);
  st.fill_queue.push_back(&fill);
  while (!fill.result) {
    if (st.fill_leader) {
      st.fill_cv.wait(lock);
      continue;
    }
    st.fill_leader = true;
    std::vector<State::Fill*> group;
    group.swap(st.fill_queue);
    lock.unlock();
    std::vector<Writer*> writers;
    for (auto* g : group) {
      writers.push_back(g->writer);
    }
    t_from_remote = true;
    auto results = self.publish(writers);
    t_from_remote = false;
    lock.lock();
    for (size_t i = 0; i < group.size(); ++i) {
      group[i]->result = std::move(results[i]);
    }
    st.fill_leader = false;
    st.fill_cv.notify_all();
  }
  if (!*fill.result) {
    return tl::unexpected(fill.result->error());
  }
  return {};
}

Result<BlobStore::Writer> BlobStore::begin(const std::vector<rs::HashAlgorithm>& extra) {
  std::vector<rs::HashAlgorithm> algorithms{rs::HashAlgorithm::sha256};
  for (auto a : extra) {
    if (a != rs::HashAlgorithm::sha256) {
      algorithms.push_back(a);
    }
  }
  return Writer(*this, algorithms);
}

Result<BlobInfo> BlobStore::put(std::string_view data, const std::vector<rs::HashAlgorithm>& extra) {
  auto w = begin(extra);
  if (!w) {
    return tl::unexpected(w.error());
  }
  if (auto r = w->write(data.data(), data.size()); !r) {
    return tl::unexpected(r.error());
  }
  return w->commit();
}

bool BlobStore::contains(const std::string& sha256) const { return locate(sha256).has_value(); }

fs::path BlobStore::file_path(const std::string& sha256) const {
  return m_root / "blobs" / sha256.substr(0, 2) / sha256;
}

Result<BlobLocation> BlobStore::locate(const std::string& sha256) const {
  auto here = locate_here(sha256);
  if (here || here.error().kind != ErrorKind::not_found) {
    return here;
  }
  std::shared_ptr<RemoteTier> remote;
  {
    std::lock_guard lock(m_state->mutex);
    remote = m_state->remote;
  }
  if (!remote) {
    return here;
  }
  if (auto r = fetch_remote(*remote, sha256); !r) {
    return tl::unexpected(r.error());
  }
  return locate_here(sha256);
}

Result<BlobLocation> BlobStore::locate_here(const std::string& sha256) const {
  if (!valid_name(sha256)) {
    return make_error(ErrorKind::usage, "'" + sha256 + "' is not a sha-256 blob name");
  }
  auto found = m_state->lookup(sha256);
  if (!found) {
    return tl::unexpected(found.error());
  }
  if (*found) {
    return BlobLocation{pack_path(m_root, (*found)->pack), (*found)->offset, (*found)->length};
  }
  // Larger blobs (and every blob of a store written before packs) are files.
  const fs::path p = file_path(sha256);
  struct stat st {};
  if (::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    return BlobLocation{p, 0, static_cast<uint64_t>(st.st_size)};
  }
  return make_error(ErrorKind::not_found, "blob " + sha256 + " is not in the store");
}

Result<std::string> BlobStore::read(const std::string& sha256) const {
  auto where = locate(sha256);
  if (!where) {
    return tl::unexpected(where.error());
  }
  const int fd = ::open(where->file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return make_error(ErrorKind::io, "open " + where->file.string() + ": " + errno_text());
  }
  std::string out(where->length, '\0');
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(where->offset + done));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      const std::string why = n < 0 ? errno_text() : std::string("the file ends early");
      ::close(fd);
      return make_error(ErrorKind::io, "read blob " + sha256 + " from " + where->file.string() + ": " + why);
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return out;
}

namespace {

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

} // namespace

Result<BlobLocation> BlobStore::retain(const std::string& sha256) {
  auto where = locate(sha256);
  if (!where) {
    return where;
  }
  auto kept = m_state->lift(sha256, file_path(sha256));
  if (!kept) {
    return tl::unexpected(kept.error());
  }
  if (!*kept) {
    return make_error(ErrorKind::not_found, "blob " + sha256 + " is not in the store");
  }
  return locate(sha256); // where it is now (repack() may have moved it)
}

namespace {

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

} // namespace

std::optional<BlobName> BlobStore::name_of(const std::string& sha256) {
  if (!valid_name(sha256)) {
    return std::nullopt;
  }
  return raw_name(sha256);
}

Result<void> BlobStore::for_each_blob(const std::function<void(const BlobName&, uint64_t)>& fn) const {
  if (int rc = scan_index(m_state->env, m_state->dbi, [&](const BlobName& n, const IndexValue& iv) { fn(n, iv.length); });
      rc != 0) {
    return make_error(ErrorKind::io, "blob index under " + m_root.string() + ": " + lmdb_text(rc));
  }
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(m_root / "blobs", ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    auto name = it->is_regular_file(ec) ? name_of(it->path().filename().string()) : std::nullopt;
    if (name) {
      fn(*name, it->file_size(ec));
    }
  }
  if (ec) {
    return make_error(ErrorKind::io, "list " + (m_root / "blobs").string() + ": " + ec.message());
  }
  return {};
}

Result<uint64_t> BlobStore::condemn(const std::vector<BlobName>& names, int64_t at) {
  uint64_t marked = 0;
  for (size_t from = 0; from < names.size(); from += 10000) {
    Txn t;
    int rc = mdb_txn_begin(m_state->env, nullptr, 0, &t.txn);
    for (size_t i = from; rc == 0 && i < std::min(names.size(), from + 10000); ++i) {
      MDB_val k{32, const_cast<unsigned char*>(names[i].data())};
      MDB_val v{sizeof at, &at};
      rc = mdb_put(t.txn, m_state->condemned_dbi, &k, &v, MDB_NOOVERWRITE);
      if (rc == 0) {
        ++marked;
      } else if (rc == MDB_KEYEXIST) {
        rc = 0;
      }
    }
    if (rc == 0) {
      rc = t.commit();
    }
    if (rc != 0) {
      return make_error(ErrorKind::io, "blob index under " + m_root.string() + ": " + lmdb_text(rc));
    }
  }
  return marked;
}

Result<std::vector<std::pair<BlobName, int64_t>>> BlobStore::condemned() const {
  std::vector<std::pair<BlobName, int64_t>> out;
  const int rc = scan(m_state->env, m_state->condemned_dbi, [&](const MDB_val& k, const MDB_val& v) {
    if (k.mv_size == 32 && v.mv_size == sizeof(int64_t)) {
      std::pair<BlobName, int64_t> e;
      std::memcpy(e.first.data(), k.mv_data, 32);
      std::memcpy(&e.second, v.mv_data, sizeof e.second);
      out.push_back(e);
    }
  });
  if (rc != 0) {
    return make_error(ErrorKind::io, "blob index under " + m_root.string() + ": " + lmdb_text(rc));
  }
  return out;
}

Result<uint64_t> BlobStore::pardon(const std::vector<BlobName>& names) {
  uint64_t lifted = 0;
  Txn t;
  int rc = mdb_txn_begin(m_state->env, nullptr, 0, &t.txn);
  for (size_t i = 0; rc == 0 && i < names.size(); ++i) {
    MDB_val k{32, const_cast<unsigned char*>(names[i].data())};
    rc = mdb_del(t.txn, m_state->condemned_dbi, &k, nullptr);
    if (rc == 0) {
      ++lifted;
    } else if (rc == MDB_NOTFOUND) {
      rc = 0;
    }
  }
  if (rc == 0) {
    rc = t.commit();
  }
  if (rc != 0) {
    return make_error(ErrorKind::io, "blob index under " + m_root.string() + ": " + lmdb_text(rc));
  }
  return lifted;
}

Result<RemoveReport> BlobStore::remove_condemned(const std::vector<BlobName>& names) {
  return remove(names, /*only_condemned=*/true);
}

Result<RemoveReport> BlobStore::evict(const std::vector<BlobName>& names) {
  return remove(names, /*only_condemned=*/false);
}

Result<RemoveReport> BlobStore::remove(const std::vector<BlobName>& names, bool only_condemned) {
  RemoveReport out;
  std::set<fs::path> dirs;
  for (size_t from = 0; from < names.size(); from += 10000) {
    // One transaction per slice: it holds LMDB's writer lock, which every
    // writer reusing a blob (lift) and every index commit waits for.
    Txn t;
    RemoveReport slice;
    int rc = mdb_txn_begin(m_state->env, nullptr, 0, &t.txn);
    for (size_t i = from; rc == 0 && i < std::min(names.size(), from + 10000); ++i) {
      MDB_val k{32, const_cast<unsigned char*>(names[i].data())};
      MDB_val v{};
      rc = mdb_get(t.txn, m_state->condemned_dbi, &k, &v);
      if (rc == MDB_NOTFOUND) {
        rc = 0;
        if (only_condemned) {
          continue; // lifted since: a writer reuses it
        }
      } else if (rc == 0) {
        rc = mdb_del(t.txn, m_state->condemned_dbi, &k, nullptr);
      }
      if (rc == 0) {
        rc = mdb_get(t.txn, m_state->dbi, &k, &v);
        if (rc == 0 && v.mv_size == sizeof(IndexValue)) {
          IndexValue iv;
          std::memcpy(&iv, v.mv_data, sizeof iv);
          rc = mdb_del(t.txn, m_state->dbi, &k, nullptr);
          ++slice.blobs;
          slice.bytes += iv.length;
        } else if (rc == MDB_NOTFOUND) {
          rc = 0;
        }
      }
      if (rc == 0) {
        // A file blob is unlinked inside the transaction: a writer's lift
        // either ran before (and the mark was gone) or runs after and
        // finds the file gone.
        const fs::path f = file_path(hex_of(names[i].data(), 32));
        struct stat st {};
        if (::stat(f.c_str(), &st) == 0 && ::unlink(f.c_str()) == 0) {
          ++slice.blobs;
          slice.bytes += static_cast<uint64_t>(st.st_size);
          dirs.insert(f.parent_path());
        }
      }
    }
    if (rc == 0) {
      rc = t.commit();
    }
    if (rc != 0) {
      return make_error(ErrorKind::io, "blob index under " + m_root.string() + ": " + lmdb_text(rc));
    }
    out.blobs += slice.blobs;
    out.bytes += slice.bytes;
  }
  return out;
}

Result<RepackReport> BlobStore::repack(double live_below) {
  RepackReport out;
  auto index_error = [&](int rc) {
    return make_error(ErrorKind::io, "blob index under " + m_root.string() + ": " + lmdb_text(rc));
  };
  // Live bytes per pack, from the index.
  std::map<uint32_t, uint64_t> live;
  if (int rc = scan_index(m_state->env, m_state->dbi, [&](const BlobName&, const IndexValue& iv) {
        live[iv.pack] += sizeof(RecordHeader) + ((iv.length + 7) & ~uint64_t{7});
      });
      rc != 0) {
    return index_error(rc);
  }
  std::error_code ec;
  std::vector<std::pair<uint32_t, fs::path>> packs;
  for (const auto& e : fs::directory_iterator(m_root / "packs", ec)) {
    unsigned id = 0;
    if (std::sscanf(e.path().filename().c_str(), "%10u.pack", &id) == 1) {
      packs.emplace_back(id, e.path());
    }
  }
  std::sort(packs.begin(), packs.end());
  std::string bytes;
  for (const auto& [id, path] : packs) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      continue;
    }
    struct stat st {};
    ::fstat(fd, &st);
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    const uint64_t in_use = live.count(id) ? live[id] : 0;
    if (size == 0 || static_cast<double>(in_use) >= live_below * static_cast<double>(size)) {
      ::close(fd);
      continue;
    }
    // A pack some writer still appends to holds a shared lock.
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ++out.busy;
      ::close(fd);
      continue;
    }
    // This pack's live records, from one index snapshot; copied to this
    // process's pack, made durable, then the index moved to the copies
    // where it still names the old record.
    std::vector<std::pair<BlobName, IndexValue>> records;
    if (int rc = scan_index(m_state->env, m_state->dbi, [&](const BlobName& name, const IndexValue& iv) {
          if (iv.pack == id) {
            records.emplace_back(name, iv);
          }
        });
        rc != 0) {
      ::close(fd);
      return index_error(rc);
    }
    bool keep = false;
    std::vector<std::pair<BlobName, IndexValue>> moved; // the new places
    std::vector<std::shared_ptr<BlobPack>> written;
    uint64_t moved_bytes = 0;
    for (const auto& [name, iv] : records) {
      bytes.resize(iv.length);
      if (!pread_all(fd, bytes.data(), bytes.size(), iv.offset) ||
          rs::hash_hex(rs::HashAlgorithm::sha256, bytes) != hex_of(name.data(), 32)) {
        out.problems.push_back(path.string() + ": the record at offset " + std::to_string(iv.offset) +
                               " does not hash to its name " + hex_of(name.data(), 32) + " (the pack is kept)");
        keep = true;
        continue;
      }
      RecordHeader header;
      header.length = iv.length;
      std::memcpy(header.sha256, name.data(), 32);
      auto room = m_state->reserve(sizeof header + iv.length);
      if (!room) {
        ::close(fd);
        return tl::unexpected(room.error());
      }
      iovec parts[2] = {{&header, sizeof header}, {bytes.data(), bytes.size()}};
      const ssize_t n = ::pwritev(room->first->fd, parts, 2, static_cast<off_t>(room->second));
      if (n != static_cast<ssize_t>(sizeof header + bytes.size())) {
        const std::string why = n < 0 ? errno_text() : std::string("short write");
        m_state->abandon(room->first, room->second, sizeof header + bytes.size());
        ::close(fd);
        return make_error(ErrorKind::io, "write " + room->first->path.string() + ": " + why);
      }
      if (std::find(written.begin(), written.end(), room->first) == written.end()) {
        written.push_back(room->first);
      }
      moved.emplace_back(name, IndexValue{room->first->id, 0, room->second + sizeof header, iv.length});
      moved_bytes += iv.length;
    }
    for (const auto& p : written) {
      if (::fdatasync(p->fd) != 0) {
        ::close(fd);
        return make_error(ErrorKind::io, "fdatasync " + p->path.string() + ": " + errno_text());
      }
    }
    // Move the index: only entries that still name this pack's record (a
    // collection may have removed some since).
    Txn t;
    int rc = mdb_txn_begin(m_state->env, nullptr, 0, &t.txn);
    for (size_t i = 0; rc == 0 && i < moved.size(); ++i) {
      MDB_val k{32, moved[i].first.data()};
      MDB_val v{};
      rc = mdb_get(t.txn, m_state->dbi, &k, &v);
      if (rc == MDB_NOTFOUND) {
        rc = 0;
        continue;
      }
      IndexValue now;
      if (rc == 0 && v.mv_size == sizeof now) {
        std::memcpy(&now, v.mv_data, sizeof now);
        if (now.pack == id) {
          MDB_val nv{sizeof(IndexValue), &moved[i].second};
          rc = mdb_put(t.txn, m_state->dbi, &k, &nv, 0);
        }
      }
    }
    if (rc == 0) {
      rc = t.commit();
    }
    if (rc != 0) {
      ::close(fd);
      return index_error(rc);
    }
    if (!keep) {
      ::unlink(path.c_str());
      ++out.packs;
      out.freed_bytes += size > moved_bytes ? size - moved_bytes : 0;
    }
    out.moved += moved.size();
    out.moved_bytes += moved_bytes;
    ::close(fd);
  }
  if (out.packs > 0) {
    if (auto r = fsync_dir(m_root / "packs"); !r) {
      return tl::unexpected(r.error());
    }
  }
  return out;
}

Result<BlobCheck> BlobStore::check(bool reindex) {
  BlobCheck out;
  std::error_code ec;
  std::vector<std::pair<uint32_t, fs::path>> packs;
  for (const auto& e : fs::directory_iterator(m_root / "packs", ec)) {
    unsigned id = 0;
    if (std::sscanf(e.path().filename().c_str(), "%10u.pack", &id) == 1) {
      packs.emplace_back(id, e.path());
    }
  }
  std::sort(packs.begin(), packs.end());
  std::vector<std::pair<std::string, IndexValue>> missing;
  auto flush_missing = [&]() -> Result<void> {
    if (!missing.empty()) {
      if (auto r = m_state->index(missing); !r) {
        return r;
      }
      out.reindexed += missing.size();
      missing.clear();
    }
    return {};
  };
  std::string bytes;
  for (const auto& [id, path] : packs) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      out.problems.push_back(path.string() + ": cannot open: " + errno_text());
      continue;
    }
    struct stat st {};
    ::fstat(fd, &st);
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    ++out.packs;
    out.pack_bytes += size;
    uint64_t at = 0;
    std::optional<uint64_t> lost_from; // looking for the next record from here
    auto align = [](uint64_t n) { return (n + 7) & ~uint64_t{7}; };
    while (at + sizeof(RecordHeader) <= size) {
      RecordHeader h;
      if (!pread_all(fd, &h, sizeof h, at) || std::memcmp(h.magic, "TRB1", 4) != 0 || h.length > k_pack_max ||
          h.length > size - at - sizeof h) {
        // Not a record: space reserved by a write a crash cut short, or
        // damage. The next record starts at a later multiple of 8.
        lost_from = lost_from ? lost_from : at;
        at += 8;
        continue;
      }
      bytes.resize(h.length);
      if (!pread_all(fd, bytes.data(), bytes.size(), at + sizeof h)) {
        out.problems.push_back(path.string() + ": cannot read the record at offset " + std::to_string(at) + ": " +
                               errno_text());
        break;
      }
      const std::string name = hex_of(h.sha256, sizeof h.sha256);
      const uint64_t data_at = at + sizeof h;
      auto found = m_state->lookup(name);
      if (!found) {
        ::close(fd);
        return tl::unexpected(found.error());
      }
      const bool named_here = *found && (*found)->pack == id && (*found)->offset == data_at;
      if (rs::hash_hex(rs::HashAlgorithm::sha256, bytes) != name) {
        if (lost_from && !named_here) {
          at += 8; // "TRB1" by chance inside lost space
          continue;
        }
        if (named_here) {
          out.problems.push_back(path.string() + ": the record at offset " + std::to_string(at) +
                                 " does not hash to its name " + name + " (the index serves it)");
        } else {
          out.unreadable_bytes += align(data_at + h.length) - at;
        }
        at = align(data_at + h.length);
        continue;
      }
      if (lost_from) {
        out.unreadable_bytes += at - *lost_from;
        lost_from.reset();
      }
      ++out.records;
      if (named_here) {
        ++out.indexed;
        out.indexed_bytes += h.length;
      } else if (!*found && reindex) {
        missing.emplace_back(name, IndexValue{id, 0, data_at, h.length});
        ++out.indexed;
        out.indexed_bytes += h.length;
        if (missing.size() >= 10000) {
          if (auto r = flush_missing(); !r) {
            ::close(fd);
            return tl::unexpected(r.error());
          }
        }
      }
      at = align(data_at + h.length);
    }
    out.unreadable_bytes += size - std::min(size, lost_from.value_or(at));
    ::close(fd);
  }
  if (auto r = flush_missing(); !r) {
    return tl::unexpected(r.error());
  }
  // Every index entry points at an intact record of its name (the scan
  // above proved each intact record's bytes match its header).
  std::map<uint32_t, int> fds;
  const int rc = scan(m_state->env, m_state->dbi, [&](const MDB_val& k, const MDB_val& v) {
    if (k.mv_size != 32) {
      return; // a named database ("condemned"), not an index entry
    }
    ++out.index_entries;
    const std::string name = hex_of(static_cast<const unsigned char*>(k.mv_data), k.mv_size);
    IndexValue iv;
    if (v.mv_size != sizeof iv) {
      out.problems.push_back("index entry " + name + ": malformed");
      return;
    }
    std::memcpy(&iv, v.mv_data, sizeof iv);
    auto [it, opened] = fds.try_emplace(iv.pack, -1);
    if (opened) {
      it->second = ::open(pack_path(m_root, iv.pack).c_str(), O_RDONLY | O_CLOEXEC);
    }
    RecordHeader h;
    if (it->second < 0 || iv.offset < sizeof h || !pread_all(it->second, &h, sizeof h, iv.offset - sizeof h) ||
        std::memcmp(h.magic, "TRB1", 4) != 0 || std::memcmp(h.sha256, k.mv_data, 32) != 0 ||
        h.length != iv.length) {
      out.problems.push_back("index entry " + name + ": no record of it at offset " + std::to_string(iv.offset) +
                             " of " + pack_path(m_root, iv.pack).string());
    }
  });
  for (auto& [id, fd] : fds) {
    if (fd >= 0) {
      ::close(fd);
    }
  }
  if (rc != 0) {
    return make_error(ErrorKind::io, "blob index under " + m_root.string() + ": " + lmdb_text(rc));
  }
  // Blob files hash to their names.
  for (const auto& e : fs::recursive_directory_iterator(m_root / "blobs", ec)) {
    if (!e.is_regular_file()) {
      continue;
    }
    const std::string name = e.path().filename().string();
    ++out.files;
    out.file_bytes += e.file_size();
    rs::Hasher hasher(rs::HashAlgorithm::sha256);
    const int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
    char buf[65536];
    ssize_t n = 0;
    while (fd >= 0 && ((n = ::read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))) {
      hasher.update(buf, static_cast<size_t>(std::max<ssize_t>(n, 0)));
    }
    if (fd >= 0) {
      ::close(fd);
    }
    if (fd < 0 || n < 0 || !valid_name(name) || hasher.finish_hex() != name) {
      out.problems.push_back(e.path().string() + ": does not hash to its name");
    }
  }
  return out;
}

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

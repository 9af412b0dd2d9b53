// The blob index in LMDB: lookups, names added, marks of garbage
// collection, and the release of its map from resident memory.
#include "store/blob/blob_index.h"

#include "common/thread_name.h"

#include "store/blob/blob_io.h"

#include <lmdb.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tributary::store::blob_detail {

namespace fs = std::filesystem;

namespace {

// Read transactions reset for reuse (see ReadTxn).
struct IdleReaders {
  std::mutex mutex;
  std::vector<MDB_txn*> txns;
};

} // namespace

struct BlobIndex::Handles {
  MDB_env* env = nullptr;
  MDB_dbi dbi = 0;           // sha-256 -> IndexValue (the unnamed database)
  MDB_dbi condemned_dbi = 0; // sha-256 -> int64 unix time it was condemned ("condemned")
  IdleReaders idle;
  ~Handles() {
    for (MDB_txn* t : idle.txns) { // before the environment they belong to
      mdb_txn_abort(t);
    }
    if (env) {
      mdb_env_close(env);
    }
  }
};

namespace {

// A transaction that aborts unless committed.
struct Txn {
  MDB_txn* txn = nullptr;
  Txn() = default;
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;
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

// A read transaction for a lookup, renewed from one a lookup before reset:
// with MDB_NOTLS, beginning one allocates it and takes a reader slot under
// the lock file's mutex, and ending it gives both back, for every blob a
// baseline stores (2% of a first baseline's time). A reset transaction
// keeps its slot but no snapshot, so it holds back no writer.
class ReadTxn {
public:
  ReadTxn(MDB_env* env, IdleReaders& idle) : m_idle(idle) {
    {
      std::lock_guard lock(m_idle.mutex);
      if (!m_idle.txns.empty()) {
        txn = m_idle.txns.back();
        m_idle.txns.pop_back();
      }
    }
    if (txn && (rc = mdb_txn_renew(txn)) != 0) {
      mdb_txn_abort(txn);
      txn = nullptr;
    }
    if (!txn) {
      rc = mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn);
      if (rc != 0) {
        txn = nullptr;
      }
    }
  }
  ReadTxn(const ReadTxn&) = delete;
  ReadTxn& operator=(const ReadTxn&) = delete;
  ~ReadTxn() {
    if (!txn) {
      return;
    }
    mdb_txn_reset(txn);
    std::lock_guard lock(m_idle.mutex);
    if (m_idle.txns.size() < k_most_idle) {
      m_idle.txns.push_back(txn);
    } else {
      mdb_txn_abort(txn);
    }
  }

  MDB_txn* txn = nullptr;
  int rc = 0; // of beginning it

private:
  static constexpr size_t k_most_idle = 16; // about the threads that look blobs up at once
  IdleReaders& m_idle;
};

// Every entry of `db`, in one read transaction; 0 or LMDB's error.
int scan(MDB_env* env, MDB_dbi db, const std::function<void(const MDB_val& key, const MDB_val& value)>& fn) {
  Txn t;
  MDB_cursor* cursor = nullptr;
  int rc = mdb_txn_begin(env, nullptr, MDB_RDONLY, &t.txn);
  if (rc == 0) {
    rc = mdb_cursor_open(t.txn, db, &cursor);
  }
  MDB_val k{};
  MDB_val v{};
  while (rc == 0 && (rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)) == 0) {
    fn(k, v);
  }
  if (cursor) {
    mdb_cursor_close(cursor);
  }
  return rc == MDB_NOTFOUND ? 0 : rc;
}

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

MDB_val key_of(const BlobName& name) { return MDB_val{32, const_cast<unsigned char*>(name.data())}; }

} // namespace

Result<std::unique_ptr<BlobIndex>> BlobIndex::open(const fs::path& dir) {
  auto index = std::unique_ptr<BlobIndex>(new BlobIndex(dir));
  index->m_lmdb = std::make_unique<Handles>();
  Handles& h = *index->m_lmdb;
  auto fail = [&](int rc) {
    return make_error(ErrorKind::io, "cannot open the blob index " + dir.string() + ": " + mdb_strerror(rc));
  };
  if (int rc = mdb_env_create(&h.env); rc != 0) {
    h.env = nullptr;
    return fail(rc);
  }
  // Read transactions are short and taken from any thread (MDB_NOTLS); the
  // map is address space, not memory: the file grows as entries arrive.
  mdb_env_set_maxreaders(h.env, 1024);
  mdb_env_set_maxdbs(h.env, 4);
  mdb_env_set_mapsize(h.env, size_t{256} << 30);
  // MDB_NORDAHEAD: lookups are random (names are hashes); it also turns
  // off fault-around, which mapped 16 pages a lookup.
  if (int rc = mdb_env_open(h.env, dir.c_str(), MDB_NOTLS | MDB_NORDAHEAD, 0644); rc != 0) {
    return fail(rc);
  }
  index->m_map = find_map(dir / "data.mdb");
  if (index->m_map) {
    index->start_releaser();
  }
  int stale = 0;
  mdb_reader_check(h.env, &stale); // reader slots of processes that died
  Txn t;
  if (int rc = mdb_txn_begin(h.env, nullptr, 0, &t.txn); rc != 0) {
    return fail(rc);
  }
  if (int rc = mdb_dbi_open(t.txn, nullptr, 0, &h.dbi); rc != 0) {
    return fail(rc);
  }
  // Garbage collection's marks, beside the index so that one transaction
  // sees both (a named database is a key of the unnamed one: readers of the
  // index skip keys that are not 32 bytes long).
  if (int rc = mdb_dbi_open(t.txn, "condemned", MDB_CREATE, &h.condemned_dbi); rc != 0) {
    return fail(rc);
  }
  if (int rc = t.commit(); rc != 0) {
    return fail(rc);
  }
  return index;
}

BlobIndex::BlobIndex(fs::path dir) : m_dir(std::move(dir)) {}

BlobIndex::~BlobIndex() {
  if (m_releaser.joinable()) {
    {
      std::lock_guard lock(m_release_mutex);
      m_release_stop = true;
    }
    m_release_cv.notify_all();
    m_releaser.join();
  }
}

Error BlobIndex::error(int rc) const {
  return Error{ErrorKind::io, "blob index under " + m_dir.parent_path().string() + ": " + mdb_strerror(rc) +
                                  (rc == MDB_MAP_FULL ? " (the index reached its 256 GiB map)" : "")};
}

// The index is read through a shared map of its file: every page a lookup
// touches stays mapped, and counted in the process's resident memory
// (RSS), though it is the kernel's page cache (reclaimable, and what a
// cgroup charges either way). Random names touch every page: a million
// blobs made 100-160 MB of RSS that grows with the store. The mapping is
// dropped every 64 lookups, and by a thread of this index 250 ms after any
// use (MADV_DONTNEED on a shared file mapping drops page-table entries
// only: the pages stay cached, and readers fault them back in without
// I/O), so RSS stays the process's own memory. Every 64: a fault maps the
// 16 cached pages around it (fault-around ignores MADV_RANDOM on this
// kernel), so 1,024 lookups between releases kept the whole index mapped;
// 64 cost 2.5% of a lookup loop.
void BlobIndex::used() {
  if ((m_touched.fetch_add(1, std::memory_order_relaxed) & 63) == 63) {
    release_map();
  }
}

void BlobIndex::release_map() {
  // The whole map: the kernel skips what was never touched.
  MDB_envinfo info{};
  if (m_map && mdb_env_info(m_lmdb->env, &info) == 0) {
    ::madvise(m_map, info.me_mapsize, MADV_DONTNEED);
  }
}

void BlobIndex::start_releaser() {
  m_releaser = std::thread([this] {
    name_thread("blob releaser");
    std::unique_lock lock(m_release_mutex);
    uint64_t seen = m_touched.load();
    while (!m_release_cv.wait_for(lock, std::chrono::milliseconds(250), [this] { return m_release_stop; })) {
      const uint64_t now = m_touched.load();
      if (now != seen) {
        seen = now;
        release_map();
      }
    }
  });
}

Result<std::optional<IndexValue>> BlobIndex::lookup(const std::string& sha256) {
  used();
  ReadTxn t(m_lmdb->env, m_lmdb->idle);
  if (!t.txn) {
    return tl::unexpected(error(t.rc));
  }
  const auto key = raw_name(sha256);
  MDB_val k = key_of(key);
  MDB_val v{};
  const int rc = mdb_get(t.txn, m_lmdb->dbi, &k, &v);
  std::optional<IndexValue> out;
  if (rc == 0 && v.mv_size == sizeof(IndexValue)) {
    IndexValue iv;
    std::memcpy(&iv, v.mv_data, sizeof iv);
    out = iv;
  }
  if (rc != 0 && rc != MDB_NOTFOUND) {
    return tl::unexpected(error(rc));
  }
  return out;
}

bool BlobIndex::may_contain(const std::string& sha256) {
  const BlobName name = raw_name(sha256);
  std::lock_guard lock(m_filter_mutex);
  if (!m_filter || m_filter->inserted() > m_filter->capacity()) {
    build_filter();
  }
  return !m_filter || m_filter->may_contain(name);
}

void BlobIndex::build_filter() {
  if (m_filter_failed) {
    return;
  }
  // Room for twice the names there are and a million more (1.3 MB): a
  // store that grows by a baseline of a million builds it once.
  MDB_stat stat{};
  int rc = 0;
  {
    ReadTxn t(m_lmdb->env, m_lmdb->idle);
    rc = t.txn ? mdb_stat(t.txn, m_lmdb->dbi, &stat) : t.rc;
  }
  auto filter = std::make_unique<NameFilter>(2 * uint64_t{stat.ms_entries} + (uint64_t{1} << 20));
  uint64_t seen = 0;
  auto filled = rc != 0 ? tl::unexpected(error(rc))
                        : for_each_raw([&](const BlobName& name, const std::optional<IndexValue>&) {
                            filter->insert(name);
                            if ((++seen & 4095) == 0) {
                              release_map(); // a scan maps every page of the index, once
                            }
                          });
  release_map();
  if (!filled) {
    m_filter.reset();
    m_filter_failed = true; // every name "maybe": lookups decide, as without a filter
    return;
  }
  m_filter = std::move(filter);
}

Result<bool> BlobIndex::lift(const std::string& sha256, const fs::path& file) {
  const auto key = raw_name(sha256);
  MDB_val k = key_of(key);
  MDB_val v{};
  int marked = 0;
  int indexed = 0;
  {
    ReadTxn t(m_lmdb->env, m_lmdb->idle);
    if (!t.txn) {
      return tl::unexpected(error(t.rc));
    }
    marked = mdb_get(t.txn, m_lmdb->condemned_dbi, &k, &v);
    indexed = mdb_get(t.txn, m_lmdb->dbi, &k, &v);
  }
  struct stat st {};
  if (marked == MDB_NOTFOUND) {
    // One snapshot: not condemned now, so not removable for a grace period.
    return indexed == 0 || ::stat(file.c_str(), &st) == 0;
  }
  Txn t;
  int rc = mdb_txn_begin(m_lmdb->env, nullptr, 0, &t.txn);
  if (rc == 0) {
    rc = mdb_del(t.txn, m_lmdb->condemned_dbi, &k, nullptr);
    rc = rc == MDB_NOTFOUND ? 0 : rc;
  }
  bool present = false;
  if (rc == 0) {
    present = mdb_get(t.txn, m_lmdb->dbi, &k, &v) == 0 || ::stat(file.c_str(), &st) == 0;
    rc = t.commit();
  }
  if (rc != 0) {
    return tl::unexpected(error(rc));
  }
  return present;
}

Result<void> BlobIndex::add(const std::vector<std::pair<std::string, IndexValue>>& entries) {
  m_touched.fetch_add(1, std::memory_order_relaxed); // the write touched pages of the map too
  // Put in the index's own order: each put walks from the root, and in
  // order the walks share their branch pages (measured on a million, 2,500
  // puts: 21.9 ms in the order given, 15.6 ms sorted; bench_locate).
  std::vector<std::pair<BlobName, const IndexValue*>> sorted;
  sorted.reserve(entries.size());
  for (const auto& [sha256, value] : entries) {
    sorted.emplace_back(raw_name(sha256), &value);
  }
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  Txn t;
  int rc = mdb_txn_begin(m_lmdb->env, nullptr, 0, &t.txn);
  for (size_t i = 0; rc == 0 && i < sorted.size(); ++i) {
    if ((i & 63) == 63) {
      // A put reads its leaf through the map as a lookup does (the pages
      // it changes are copies until the commit writes them): 2,500 puts
      // mapped up to the whole index.
      release_map();
    }
    MDB_val k = key_of(sorted[i].first);
    MDB_val v{sizeof(IndexValue), const_cast<IndexValue*>(sorted[i].second)};
    rc = mdb_put(t.txn, m_lmdb->dbi, &k, &v, MDB_NOOVERWRITE);
    if (rc == MDB_KEYEXIST) {
      rc = 0; // stored already: this writer reuses that copy, which stays
    }
    if (rc == 0) {
      rc = mdb_del(t.txn, m_lmdb->condemned_dbi, &k, nullptr);
      rc = rc == MDB_NOTFOUND ? 0 : rc;
    }
  }
  if (rc == 0) {
    rc = t.commit();
  }
  if (rc != 0) {
    return tl::unexpected(error(rc));
  }
  // After the commit: a filter built meanwhile read them from the index.
  std::lock_guard lock(m_filter_mutex);
  if (m_filter) {
    for (const auto& [name, value] : sorted) {
      m_filter->insert(name);
    }
  }
  return {};
}

Result<void> BlobIndex::move(uint32_t from, const std::vector<std::pair<BlobName, IndexValue>>& moved) {
  Txn t;
  int rc = mdb_txn_begin(m_lmdb->env, nullptr, 0, &t.txn);
  for (size_t i = 0; rc == 0 && i < moved.size(); ++i) {
    MDB_val k = key_of(moved[i].first);
    MDB_val v{};
    rc = mdb_get(t.txn, m_lmdb->dbi, &k, &v);
    if (rc == MDB_NOTFOUND) {
      rc = 0;
      continue;
    }
    IndexValue now;
    if (rc == 0 && v.mv_size == sizeof now) {
      std::memcpy(&now, v.mv_data, sizeof now);
      if (now.pack == from) {
        MDB_val nv{sizeof(IndexValue), const_cast<IndexValue*>(&moved[i].second)};
        rc = mdb_put(t.txn, m_lmdb->dbi, &k, &nv, 0);
      }
    }
  }
  if (rc == 0) {
    rc = t.commit();
  }
  if (rc != 0) {
    return tl::unexpected(error(rc));
  }
  return {};
}

Result<void> BlobIndex::for_each_raw(
    const std::function<void(const BlobName&, const std::optional<IndexValue>&)>& fn) const {
  const int rc = scan(m_lmdb->env, m_lmdb->dbi, [&](const MDB_val& k, const MDB_val& v) {
    if (k.mv_size != 32) {
      return; // a named database ("condemned"), not an index entry
    }
    BlobName name;
    std::memcpy(name.data(), k.mv_data, 32);
    std::optional<IndexValue> value;
    if (v.mv_size == sizeof(IndexValue)) {
      value.emplace();
      std::memcpy(&*value, v.mv_data, sizeof(IndexValue));
    }
    fn(name, value);
  });
  if (rc != 0) {
    return tl::unexpected(error(rc));
  }
  return {};
}

Result<void> BlobIndex::for_each(const std::function<void(const BlobName&, const IndexValue&)>& fn) const {
  return for_each_raw([&](const BlobName& name, const std::optional<IndexValue>& value) {
    if (value) {
      fn(name, *value);
    }
  });
}

Result<uint64_t> BlobIndex::condemn(const std::vector<BlobName>& names, int64_t at) {
  uint64_t marked = 0;
  for (size_t from = 0; from < names.size(); from += 10000) {
    Txn t;
    int rc = mdb_txn_begin(m_lmdb->env, nullptr, 0, &t.txn);
    for (size_t i = from; rc == 0 && i < std::min(names.size(), from + 10000); ++i) {
      MDB_val k = key_of(names[i]);
      MDB_val v{sizeof at, &at};
      rc = mdb_put(t.txn, m_lmdb->condemned_dbi, &k, &v, MDB_NOOVERWRITE);
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
      return tl::unexpected(error(rc));
    }
  }
  return marked;
}

Result<std::vector<std::pair<BlobName, int64_t>>> BlobIndex::condemned() const {
  std::vector<std::pair<BlobName, int64_t>> out;
  const int rc = scan(m_lmdb->env, m_lmdb->condemned_dbi, [&](const MDB_val& k, const MDB_val& v) {
    if (k.mv_size == 32 && v.mv_size == sizeof(int64_t)) {
      std::pair<BlobName, int64_t> e;
      std::memcpy(e.first.data(), k.mv_data, 32);
      std::memcpy(&e.second, v.mv_data, sizeof e.second);
      out.push_back(e);
    }
  });
  if (rc != 0) {
    return tl::unexpected(error(rc));
  }
  return out;
}

Result<uint64_t> BlobIndex::pardon(const std::vector<BlobName>& names) {
  uint64_t lifted = 0;
  Txn t;
  int rc = mdb_txn_begin(m_lmdb->env, nullptr, 0, &t.txn);
  for (size_t i = 0; rc == 0 && i < names.size(); ++i) {
    MDB_val k = key_of(names[i]);
    rc = mdb_del(t.txn, m_lmdb->condemned_dbi, &k, nullptr);
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
    return tl::unexpected(error(rc));
  }
  return lifted;
}

Result<RemoveReport> BlobIndex::remove(const std::vector<BlobName>& names, bool only_condemned,
                                       const std::function<void(const BlobName&, RemoveReport&)>& also) {
  RemoveReport out;
  for (size_t from = 0; from < names.size(); from += 10000) {
    // One transaction per slice: it holds LMDB's writer lock, which every
    // writer reusing a blob (lift) and every commit of names waits for.
    Txn t;
    RemoveReport slice;
    int rc = mdb_txn_begin(m_lmdb->env, nullptr, 0, &t.txn);
    for (size_t i = from; rc == 0 && i < std::min(names.size(), from + 10000); ++i) {
      MDB_val k = key_of(names[i]);
      MDB_val v{};
      rc = mdb_get(t.txn, m_lmdb->condemned_dbi, &k, &v);
      if (rc == MDB_NOTFOUND) {
        rc = 0;
        if (only_condemned) {
          continue; // lifted since: a writer reuses it
        }
      } else if (rc == 0) {
        rc = mdb_del(t.txn, m_lmdb->condemned_dbi, &k, nullptr);
      }
      if (rc == 0) {
        rc = mdb_get(t.txn, m_lmdb->dbi, &k, &v);
        if (rc == 0 && v.mv_size == sizeof(IndexValue)) {
          IndexValue iv;
          std::memcpy(&iv, v.mv_data, sizeof iv);
          rc = mdb_del(t.txn, m_lmdb->dbi, &k, nullptr);
          ++slice.blobs;
          slice.bytes += iv.length;
        } else if (rc == MDB_NOTFOUND) {
          rc = 0;
        }
      }
      if (rc == 0 && also) {
        also(names[i], slice);
      }
    }
    if (rc == 0) {
      rc = t.commit();
    }
    if (rc != 0) {
      return tl::unexpected(error(rc));
    }
    out.blobs += slice.blobs;
    out.bytes += slice.bytes;
  }
  return out;
}

} // namespace tributary::store::blob_detail

// The blob index in LMDB: lookups, names added (logged, then merged: see
// recent_names.h), repacks' moves and garbage collection's marks.
#include "store/blob/blob_index.h"

#include "store/blob/blob_io.h"
#include "store/blob/lmdb_handles.h"
#include "store/blob/map_releaser.h"
#include "store/blob/recent_names.h"

#include <lmdb.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <shared_mutex>

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
  MDB_dbi log_dbi = 0;       // sequence number -> LogEntry ("recent", see recent_names.h)
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
  Cursor cursor;
  int rc = mdb_txn_begin(env, nullptr, MDB_RDONLY, &t.txn);
  if (rc == 0) {
    rc = mdb_cursor_open(t.txn, db, &cursor.c);
  }
  MDB_val k{};
  MDB_val v{};
  while (rc == 0 && (rc = mdb_cursor_get(cursor.c, &k, &v, MDB_NEXT)) == 0) {
    fn(k, v);
  }
  return rc == MDB_NOTFOUND ? 0 : rc;
}

MDB_val key_of(const BlobName& name) { return MDB_val{32, const_cast<unsigned char*>(name.data())}; }

} // namespace

Result<std::unique_ptr<BlobIndex>> BlobIndex::open(const fs::path& dir, uint64_t merge_at) {
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
  MDB_envinfo info{};
  mdb_env_info(h.env, &info);
  index->m_releaser = std::make_unique<MapReleaser>(dir / "data.mdb", info.me_mapsize);
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
  if (int rc = mdb_dbi_open(t.txn, "recent", MDB_CREATE, &h.log_dbi); rc != 0) {
    return fail(rc);
  }
  index->m_recent = std::make_unique<RecentNames>(h.log_dbi, std::max<uint64_t>(merge_at, 1),
                                                  [ix = index.get()] { ix->m_releaser->release(); });
  if (int rc = t.commit(); rc != 0) {
    return fail(rc);
  }
  return index;
}

BlobIndex::BlobIndex(fs::path dir) : m_dir(std::move(dir)) {}

BlobIndex::~BlobIndex() = default;

Error BlobIndex::error(int rc) const {
  return Error{ErrorKind::io, "blob index under " + m_dir.parent_path().string() + ": " + mdb_strerror(rc) +
                                  (rc == MDB_MAP_FULL ? " (the index reached its 256 GiB map)" : "")};
}

int BlobIndex::find(MDB_txn* txn, const BlobName& name, std::optional<IndexValue>& out, bool& outdated) const {
  out.reset();
  outdated = false;
  // The log's entries already read first (a recent name, such as each of a
  // baseline's, then costs no walk of the main tree), then the main tree,
  // then the log's entries not yet read.
  RecentNames::Found found = RecentNames::Found::no;
  RecentNames::Hit hit;
  if (int rc = m_recent->find(txn, name, false, found, hit); rc != 0 || found == RecentNames::Found::yes) {
    out = found == RecentNames::Found::yes ? std::optional<IndexValue>(hit.value) : std::nullopt;
    return rc;
  }
  MDB_val k = key_of(name);
  MDB_val v{};
  const int rc = mdb_get(txn, m_lmdb->dbi, &k, &v);
  if (rc == 0 && v.mv_size == sizeof(IndexValue)) {
    IndexValue iv;
    std::memcpy(&iv, v.mv_data, sizeof iv);
    out = iv;
    return 0;
  }
  if (rc != 0 && rc != MDB_NOTFOUND) {
    return rc;
  }
  if (int rc2 = m_recent->find(txn, name, true, found, hit); rc2 != 0) {
    return rc2;
  }
  if (found == RecentNames::Found::yes) {
    out = hit.value;
  }
  outdated = found == RecentNames::Found::outdated;
  return 0;
}

Result<std::optional<IndexValue>> BlobIndex::lookup(const std::string& sha256) {
  m_releaser->used();
  const auto key = raw_name(sha256);
  std::optional<IndexValue> out;
  // A snapshot older than a merge this process read is asked again in a
  // new one (a merge and a lookup crossing; never twice in a row but by a
  // writer that merges that fast).
  for (int attempt = 0; attempt < 3; ++attempt) {
    ReadTxn t(m_lmdb->env, m_lmdb->idle);
    if (!t.txn) {
      return tl::unexpected(error(t.rc));
    }
    bool outdated = false;
    if (int rc = find(t.txn, key, out, outdated); rc != 0) {
      return tl::unexpected(error(rc));
    }
    if (!outdated) {
      break;
    }
  }
  return out;
}

bool BlobIndex::may_contain(const std::string& sha256) {
  const BlobName name = raw_name(sha256);
  {
    // Shared: the threads that ask at once do not wait on each other.
    std::shared_lock lock(m_filter_mutex);
    if (m_filter && m_filter->inserted() <= m_filter->capacity()) {
      return m_filter->may_contain(name);
    }
    if (!m_filter && m_filter_failed) {
      return true;
    }
  }
  std::unique_lock lock(m_filter_mutex);
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
    uint64_t logged = 0;
    if (rc == 0 && (rc = m_recent->size(t.txn, logged)) == 0) {
      stat.ms_entries += logged;
    }
  }
  auto filter = std::make_unique<NameFilter>(2 * uint64_t{stat.ms_entries} + (uint64_t{1} << 20));
  uint64_t seen = 0;
  auto filled = rc != 0 ? tl::unexpected(error(rc))
                        : for_each_raw([&](const BlobName& name, const std::optional<IndexValue>&) {
                            filter->insert(name);
                            if ((++seen & 4095) == 0) {
                              m_releaser->release(); // a scan maps every page of the index, once
                            }
                          });
  m_releaser->release();
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
  bool indexed = false;
  bool outdated = false;
  {
    ReadTxn t(m_lmdb->env, m_lmdb->idle);
    if (!t.txn) {
      return tl::unexpected(error(t.rc));
    }
    marked = mdb_get(t.txn, m_lmdb->condemned_dbi, &k, &v);
    std::optional<IndexValue> where;
    indexed = find(t.txn, key, where, outdated) == 0 && where;
  }
  struct stat st {};
  // An outdated snapshot is not trusted to say "absent": the write
  // transaction below sees the latest.
  if (marked == MDB_NOTFOUND && !outdated) {
    // One snapshot: not condemned now, so not removable for a grace period.
    return indexed || ::stat(file.c_str(), &st) == 0;
  }
  Txn t;
  int rc = mdb_txn_begin(m_lmdb->env, nullptr, 0, &t.txn);
  if (rc == 0) {
    rc = mdb_del(t.txn, m_lmdb->condemned_dbi, &k, nullptr);
    rc = rc == MDB_NOTFOUND ? 0 : rc;
  }
  bool present = false;
  if (rc == 0) {
    std::optional<IndexValue> where;
    rc = find(t.txn, key, where, outdated);
    present = where.has_value() || ::stat(file.c_str(), &st) == 0;
  }
  if (rc == 0) {
    rc = t.commit();
  }
  if (rc != 0) {
    return tl::unexpected(error(rc));
  }
  return present;
}

Result<void> BlobIndex::add(const std::vector<std::pair<std::string, IndexValue>>& entries) {
  m_releaser->touched(); // the write touched pages of the map too
  // In the index's own order: a name that may be indexed already is looked
  // up, and in order the walks share their branch pages.
  std::vector<std::pair<BlobName, const IndexValue*>> sorted;
  sorted.reserve(entries.size());
  for (const auto& [sha256, value] : entries) {
    sorted.emplace_back(raw_name(sha256), &value);
  }
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<LogEntry> fresh;
  fresh.reserve(sorted.size());
  uint64_t first = 0;
  uint64_t logged = 0;
  Txn t;
  int rc = mdb_txn_begin(m_lmdb->env, nullptr, 0, &t.txn);
  // The filter clears nearly every new name (all of a baseline's) without
  // a read; no filter yet: every name is looked up. Asked under the write
  // transaction, which every add() of this process takes in turn, each
  // having put its names in the filter before it commits: two threads
  // adding one name log it once.
  std::vector<char> maybe(sorted.size(), 1);
  {
    std::shared_lock lock(m_filter_mutex);
    for (size_t i = 0; rc == 0 && m_filter && i < sorted.size(); ++i) {
      maybe[i] = m_filter->may_contain(sorted[i].first) ? 1 : 0;
    }
  }
  for (size_t i = 0; rc == 0 && i < sorted.size(); ++i) {
    if (i > 0 && sorted[i].first == sorted[i - 1].first) {
      continue;
    }
    if ((i & 63) == 63) {
      m_releaser->release(); // a lookup maps the pages it reads
    }
    std::optional<IndexValue> there;
    if (maybe[i]) {
      bool outdated = false; // never, in a write transaction
      rc = find(t.txn, sorted[i].first, there, outdated);
    }
    MDB_val k = key_of(sorted[i].first);
    if (rc == 0) {
      rc = mdb_del(t.txn, m_lmdb->condemned_dbi, &k, nullptr);
      rc = rc == MDB_NOTFOUND ? 0 : rc;
    }
    if (rc == 0 && !there) { // there: stored already, this writer reuses that copy, which stays
      fresh.push_back(LogEntry{sorted[i].first, *sorted[i].second});
    }
  }
  if (rc == 0 && !fresh.empty()) {
    rc = m_recent->append(t.txn, fresh, first);
  }
  if (rc == 0) {
    rc = m_recent->size(t.txn, logged);
  }
  if (rc == 0) {
    // Into the filter before the commit, and the commit under the filter's
    // shared lock: a filter built meanwhile (exclusively) either comes
    // before these inserts or reads the index after the commit. Once each:
    // the filter is rebuilt when it counts more names than it has room for
    // (counted twice, a store's first million rebuilt it halfway, its scan
    // mapping some 40 MB of the index in at once).
    std::shared_lock lock(m_filter_mutex); // the filter's words are atomic
    if (m_filter) {
      for (const LogEntry& e : fresh) {
        m_filter->insert(e.name); // a name whose commit fails costs a lookup, never a wrong answer
      }
    }
    rc = t.commit();
  }
  if (rc != 0) {
    return tl::unexpected(error(rc));
  }
  if (!fresh.empty()) {
    m_recent->appended(first, fresh);
  }
  if (!m_recent->merging(logged)) {
    return {};
  }
  // A step of the log's merge into the main tree, in a transaction of its
  // own: the names above are durable whatever becomes of it.
  Txn m;
  bool done = false;
  uint64_t base = 0;
  rc = mdb_txn_begin(m_lmdb->env, nullptr, 0, &m.txn);
  if (rc == 0) {
    rc = m_recent->merge_step(m.txn, m_lmdb->dbi, done, base);
  }
  if (rc == 0) {
    rc = m.commit();
  }
  if (rc != 0) {
    m_recent->forget();
    return tl::unexpected(error(rc));
  }
  if (done) {
    m_recent->merged(base);
  }
  return {};
}

Result<BlobIndex::Shape> BlobIndex::shape() const {
  ReadTxn t(m_lmdb->env, m_lmdb->idle);
  if (!t.txn) {
    return tl::unexpected(error(t.rc));
  }
  MDB_stat st{};
  Shape out;
  int rc = mdb_stat(t.txn, m_lmdb->dbi, &st);
  if (rc == 0) {
    // The unnamed database also keys the named ones (two: "condemned" and
    // "recent").
    out.main = st.ms_entries >= 2 ? st.ms_entries - 2 : 0;
    rc = m_recent->size(t.txn, out.log);
  }
  if (rc != 0) {
    return tl::unexpected(error(rc));
  }
  std::shared_lock lock(m_filter_mutex);
  out.filtered = m_filter ? m_filter->inserted() : 0;
  return out;
}

Result<void> BlobIndex::move(uint32_t from, const std::vector<std::pair<BlobName, IndexValue>>& moved) {
  Txn t;
  int rc = mdb_txn_begin(m_lmdb->env, nullptr, 0, &t.txn);
  for (size_t i = 0; rc == 0 && i < moved.size(); ++i) {
    // Both places: a name is in the log and the main tree while a merge is
    // under way.
    MDB_val k = key_of(moved[i].first);
    MDB_val v{};
    rc = mdb_get(t.txn, m_lmdb->dbi, &k, &v);
    IndexValue now;
    if (rc == 0 && v.mv_size == sizeof now) {
      std::memcpy(&now, v.mv_data, sizeof now);
      if (now.pack == from) {
        MDB_val nv{sizeof(IndexValue), const_cast<IndexValue*>(&moved[i].second)};
        rc = mdb_put(t.txn, m_lmdb->dbi, &k, &nv, 0);
      }
    }
    rc = rc == MDB_NOTFOUND ? 0 : rc;
    RecentNames::Found found = RecentNames::Found::no;
    RecentNames::Hit hit;
    if (rc == 0) {
      rc = m_recent->find(t.txn, moved[i].first, true, found, hit);
    }
    if (rc == 0 && found == RecentNames::Found::yes && hit.value.pack == from) {
      rc = m_recent->replace(t.txn, hit.seq, LogEntry{moved[i].first, moved[i].second});
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
  Txn t;
  Cursor cursor;
  int rc = mdb_txn_begin(m_lmdb->env, nullptr, MDB_RDONLY, &t.txn);
  if (rc == 0) {
    rc = mdb_cursor_open(t.txn, m_lmdb->dbi, &cursor.c);
  }
  MDB_val k{};
  MDB_val v{};
  while (rc == 0 && (rc = mdb_cursor_get(cursor.c, &k, &v, MDB_NEXT)) == 0) {
    if (k.mv_size != 32) {
      continue; // a named database ("condemned", "recent"), not an index entry
    }
    BlobName name;
    std::memcpy(name.data(), k.mv_data, 32);
    std::optional<IndexValue> value;
    if (v.mv_size == sizeof(IndexValue)) {
      value.emplace();
      std::memcpy(&*value, v.mv_data, sizeof(IndexValue));
    }
    fn(name, value);
  }
  rc = rc == MDB_NOTFOUND ? 0 : rc;
  // Then the log's names the main tree does not hold (it holds those of a
  // merge under way, and a name two processes added at once).
  if (rc == 0) {
    uint64_t n = 0;
    rc = m_recent->for_each(t.txn, [&](uint64_t, const LogEntry& e) {
      if ((++n & 63) == 0) {
        m_releaser->release(); // a lookup of the tree a name, as lookup() does
      }
      MDB_val mk = key_of(e.name);
      MDB_val mv{};
      const int got = mdb_get(t.txn, m_lmdb->dbi, &mk, &mv);
      if (got == MDB_NOTFOUND) {
        fn(e.name, e.value);
        return 0;
      }
      return got;
    });
  }
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
    bool logged = false; // entries left the log: this process's map of it is read again
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
        bool counted = false;
        if (rc == 0 && v.mv_size == sizeof(IndexValue)) {
          IndexValue iv;
          std::memcpy(&iv, v.mv_data, sizeof iv);
          rc = mdb_del(t.txn, m_lmdb->dbi, &k, nullptr);
          ++slice.blobs;
          slice.bytes += iv.length;
          counted = true;
        } else if (rc == MDB_NOTFOUND) {
          rc = 0;
        }
        // And from the log (every entry of the name: two processes may
        // each have logged it).
        RecentNames::Found found = RecentNames::Found::yes;
        RecentNames::Hit hit;
        for (int n = 0; rc == 0 && found == RecentNames::Found::yes && n < 16; ++n) {
          rc = m_recent->find(t.txn, names[i], true, found, hit);
          if (rc == 0 && found == RecentNames::Found::yes) {
            rc = m_recent->erase(t.txn, hit.seq);
            logged = true;
            if (!counted) {
              ++slice.blobs;
              slice.bytes += hit.value.length;
              counted = true;
            }
          }
        }
      }
      if (rc == 0 && also) {
        also(names[i], slice);
      }
    }
    if (rc == 0) {
      rc = t.commit();
    }
    if (logged) {
      m_recent->forget();
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

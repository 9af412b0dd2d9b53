// The blob index's log of recent names (see recent_names.h).
#include "store/blob/recent_names.h"

#include "store/blob/lmdb_handles.h"

#include <algorithm>
#include <cstring>

namespace tributary::store::blob_detail {

namespace {

// A sequence number as the log keys it: big-endian, so LMDB's order of
// bytes is the order of numbers and an append lands at the end.
struct SeqKey {
  unsigned char bytes[8];
  explicit SeqKey(uint64_t seq) {
    for (int i = 7; i >= 0; --i) {
      bytes[i] = static_cast<unsigned char>(seq & 0xff);
      seq >>= 8;
    }
  }
  MDB_val val() { return MDB_val{sizeof bytes, bytes}; }
};

uint64_t seq_of(const MDB_val& key) {
  uint64_t seq = 0;
  const auto* b = static_cast<const unsigned char*>(key.mv_data);
  for (size_t i = 0; i < 8 && i < key.mv_size; ++i) {
    seq = (seq << 8) | b[i];
  }
  return seq;
}

uint64_t prefix_of(const BlobName& name) {
  uint64_t p = 0;
  std::memcpy(&p, name.data(), sizeof p);
  return p;
}

// The log's base as `txn` sees it (1 for a log never merged).
int read_base(MDB_txn* txn, MDB_dbi log, uint64_t& base) {
  SeqKey zero(0);
  MDB_val k = zero.val();
  MDB_val v{};
  const int rc = mdb_get(txn, log, &k, &v);
  base = 1;
  if (rc == 0 && v.mv_size == sizeof base) {
    std::memcpy(&base, v.mv_data, sizeof base);
  }
  return rc == MDB_NOTFOUND ? 0 : rc;
}

int last_seq(MDB_txn* txn, MDB_dbi log, uint64_t& last) {
  last = 0;
  Cursor cur;
  int rc = mdb_cursor_open(txn, log, &cur.c);
  MDB_val k{};
  MDB_val v{};
  if (rc == 0) {
    rc = mdb_cursor_get(cur.c, &k, &v, MDB_LAST);
  }
  if (rc == 0) {
    last = seq_of(k);
  }
  return rc == MDB_NOTFOUND ? 0 : rc;
}

} // namespace

int RecentNames::walk(MDB_txn* txn, uint64_t from, const std::function<int(uint64_t, const LogEntry&)>& fn) const {
  Cursor cur;
  int rc = mdb_cursor_open(txn, m_log, &cur.c);
  SeqKey start(std::max<uint64_t>(from, 1)); // key 0, the base, is not an entry
  MDB_val k = start.val();
  MDB_val v{};
  if (rc == 0) {
    rc = mdb_cursor_get(cur.c, &k, &v, MDB_SET_RANGE);
  }
  for (uint64_t n = 1; rc == 0; ++n) {
    if ((n & 4095) == 0 && m_release) {
      m_release(); // 4,096 entries: about 80 pages of the log read through the map
    }
    if (k.mv_size == 8 && v.mv_size == sizeof(LogEntry)) {
      LogEntry e;
      std::memcpy(&e, v.mv_data, sizeof e);
      if (int stop = fn(seq_of(k), e); stop != 0) {
        return stop;
      }
    }
    rc = mdb_cursor_get(cur.c, &k, &v, MDB_NEXT);
  }
  return rc == MDB_NOTFOUND ? 0 : rc;
}

int RecentNames::catch_up(MDB_txn* txn) {
  uint64_t base = 1;
  if (int rc = read_base(txn, m_log, base); rc != 0) {
    return rc;
  }
  if (base > m_base) {
    // Merged since (by any process): those names are in the main tree.
    m_seq_of.keep_from(base);
    m_base = base;
    m_seen = std::max(m_seen, base - 1);
  }
  return walk(txn, m_seen + 1, [&](uint64_t seq, const LogEntry& e) {
    if (seq > m_seen) {
      m_seq_of.insert(prefix_of(e.name), seq);
      m_seen = seq;
    }
    return 0;
  });
}

int RecentNames::find(MDB_txn* txn, const BlobName& name, bool may_catch_up, Found& found, Hit& hit) {
  found = Found::no;
  std::lock_guard lock(m_mutex);
  auto probe = [&]() -> int {
    int rc = 0;
    m_seq_of.find(prefix_of(name), [&](uint64_t seq) {
      SeqKey key(seq);
      MDB_val k = key.val();
      MDB_val v{};
      rc = mdb_get(txn, m_log, &k, &v);
      if (rc == MDB_NOTFOUND) {
        rc = 0;
        return false; // removed or merged since, or not yet in this snapshot
      }
      if (rc == 0 && v.mv_size == sizeof(LogEntry) && std::memcmp(v.mv_data, name.data(), name.size()) == 0) {
        std::memcpy(&hit.value, static_cast<const char*>(v.mv_data) + sizeof(BlobName), sizeof hit.value);
        hit.seq = seq;
        found = Found::yes;
      }
      return rc != 0 || found == Found::yes;
    });
    return rc;
  };
  if (int rc = probe(); rc != 0 || found == Found::yes || !may_catch_up) {
    return rc;
  }
  if (int rc = catch_up(txn); rc != 0) {
    return rc;
  }
  if (int rc = probe(); rc != 0 || found == Found::yes) {
    return rc;
  }
  uint64_t base = 1;
  if (int rc = read_base(txn, m_log, base); rc != 0) {
    return rc;
  }
  if (base < m_base) {
    found = Found::outdated; // entries this snapshot holds below m_base were read, then dropped from the map
  }
  return 0;
}

int RecentNames::append(MDB_txn* txn, const std::vector<LogEntry>& entries, uint64_t& first) {
  uint64_t base = 1;
  if (int rc = read_base(txn, m_log, base); rc != 0) {
    return rc;
  }
  uint64_t last = 0;
  if (int rc = last_seq(txn, m_log, last); rc != 0) {
    return rc;
  }
  uint64_t next = std::max(base, last + 1);
  first = next;
  for (const LogEntry& e : entries) {
    SeqKey key(next++);
    MDB_val k = key.val();
    MDB_val v{sizeof e, const_cast<LogEntry*>(&e)};
    if (int rc = mdb_put(txn, m_log, &k, &v, MDB_APPEND); rc != 0) {
      return rc;
    }
  }
  return 0;
}

void RecentNames::appended(uint64_t first, const std::vector<LogEntry>& entries) {
  std::lock_guard lock(m_mutex);
  if (first != m_seen + 1 || first < m_base) {
    return; // another process appended between: catch_up() reads both
  }
  for (const LogEntry& e : entries) {
    m_seq_of.insert(prefix_of(e.name), ++m_seen);
  }
}

int RecentNames::size(MDB_txn* txn, uint64_t& out) const {
  MDB_stat st{};
  if (int rc = mdb_stat(txn, m_log, &st); rc != 0) {
    return rc;
  }
  SeqKey zero(0);
  MDB_val k = zero.val();
  MDB_val v{};
  const int rc = mdb_get(txn, m_log, &k, &v);
  if (rc != 0 && rc != MDB_NOTFOUND) {
    return rc;
  }
  out = st.ms_entries - (rc == 0 ? 1 : 0);
  return 0;
}

bool RecentNames::merging(uint64_t logged) const {
  std::lock_guard lock(m_mutex);
  return m_merge_to != 0 || logged >= m_merge_at;
}

int RecentNames::merge_step(MDB_txn* txn, MDB_dbi main, bool& done, uint64_t& base) {
  done = false;
  std::unique_lock lock(m_mutex);
  if (m_merge_to == 0) {
    // Begins: takes every entry there is now, in slices of the main tree's
    // leaves (names are uniform: a slice of the range is as many leaves).
    uint64_t last = 0;
    int rc = last_seq(txn, m_log, last);
    if (rc != 0) {
      return rc;
    }
    if (last == 0) {
      return read_base(txn, m_log, base); // nothing to merge
    }
    MDB_stat st{};
    uint64_t logged = 0;
    if ((rc = mdb_stat(txn, main, &st)) != 0 || (rc = size(txn, logged)) != 0) {
      return rc;
    }
    // Slices of at most k_slice_pages of the tree's leaves, and of
    // k_slice_names of the log's (the first merge, into an empty tree,
    // writes its leaves new).
    m_merge_to = last;
    m_slices = static_cast<uint32_t>(
        std::min<uint64_t>(std::max(st.ms_leaf_pages / k_slice_pages, logged / k_slice_names) + 1, 65536));
    m_merge_names = logged;
    m_next_slice = 0;
  }
  const uint64_t to = m_merge_to;
  const uint32_t slice = m_next_slice;
  const uint32_t slices = m_slices;
  const uint64_t expected = m_merge_names / slices;
  lock.unlock();

  // The slice's names: their first two bytes in [lo, hi).
  const uint32_t lo = static_cast<uint32_t>(uint64_t{slice} * 65536 / slices);
  const uint32_t hi = static_cast<uint32_t>(uint64_t{slice + 1} * 65536 / slices);
  std::vector<LogEntry> mine;
  mine.reserve(expected + expected / 4 + 64); // names are uniform: a slice holds about its share
  int rc = walk(txn, 1, [&](uint64_t seq, const LogEntry& e) {
    if (seq > to) {
      return MDB_NOTFOUND; // past the merge's end: stop
    }
    const uint32_t top = (uint32_t{e.name[0]} << 8) | e.name[1];
    if (top >= lo && top < hi) {
      mine.push_back(e);
    }
    return 0;
  });
  if (rc != 0 && rc != MDB_NOTFOUND) {
    return rc;
  }
  // In the main tree's order: each leaf is written once, however many of
  // the log's names it takes.
  std::sort(mine.begin(), mine.end(), [](const LogEntry& a, const LogEntry& b) { return a.name < b.name; });
  for (size_t i = 0; i < mine.size(); ++i) {
    if ((i & 63) == 63 && m_release) {
      m_release(); // a put reads its leaf through the map
    }
    MDB_val k{mine[i].name.size(), mine[i].name.data()};
    MDB_val v{sizeof mine[i].value, &mine[i].value};
    rc = mdb_put(txn, main, &k, &v, MDB_NOOVERWRITE);
    if (rc != 0 && rc != MDB_KEYEXIST) {
      return rc; // MDB_KEYEXIST: indexed first elsewhere (another process); that copy stays
    }
  }
  if (slice + 1 < slices) {
    lock.lock();
    m_next_slice = slice + 1;
    return 0;
  }
  // The last slice: the merged entries leave the log (whole, unless some
  // were appended since the merge began).
  uint64_t last = 0;
  uint64_t was = 1; // the base: never lowered (another process may have merged further meanwhile)
  if ((rc = last_seq(txn, m_log, last)) != 0 || (rc = read_base(txn, m_log, was)) != 0) {
    return rc;
  }
  Cursor cur;
  MDB_val k{};
  MDB_val v{};
  if (last <= to) {
    rc = mdb_drop(txn, m_log, 0);
  } else if ((rc = mdb_cursor_open(txn, m_log, &cur.c)) == 0) {
    SeqKey first(1);
    k = first.val();
    rc = mdb_cursor_get(cur.c, &k, &v, MDB_SET_RANGE);
    while (rc == 0 && seq_of(k) <= to) {
      rc = mdb_cursor_del(cur.c, 0);
      if (rc == 0) {
        rc = mdb_cursor_get(cur.c, &k, &v, MDB_NEXT); // after a delete: the entry that followed it
      }
    }
    rc = rc == MDB_NOTFOUND ? 0 : rc;
  }
  if (rc != 0) {
    return rc;
  }
  base = std::max(was, to + 1);
  SeqKey zero(0);
  k = zero.val();
  v = MDB_val{sizeof base, &base};
  if ((rc = mdb_put(txn, m_log, &k, &v, 0)) != 0) {
    return rc;
  }
  done = true;
  return 0;
}

void RecentNames::merged(uint64_t base) {
  std::lock_guard lock(m_mutex);
  m_merge_to = 0;
  if (base <= m_base) {
    return;
  }
  m_seq_of.keep_from(base);
  m_base = base;
  m_seen = std::max(m_seen, base - 1);
}

int RecentNames::replace(MDB_txn* txn, uint64_t seq, const LogEntry& entry) {
  SeqKey key(seq);
  MDB_val k = key.val();
  MDB_val v{sizeof entry, const_cast<LogEntry*>(&entry)};
  return mdb_put(txn, m_log, &k, &v, 0);
}

int RecentNames::erase(MDB_txn* txn, uint64_t seq) {
  SeqKey key(seq);
  MDB_val k = key.val();
  const int rc = mdb_del(txn, m_log, &k, nullptr);
  return rc == MDB_NOTFOUND ? 0 : rc;
}

void RecentNames::forget() {
  std::lock_guard lock(m_mutex);
  m_seq_of.clear();
  m_seen = m_base - 1;
  m_merge_to = 0;
}

int RecentNames::for_each(MDB_txn* txn, const std::function<int(uint64_t seq, const LogEntry&)>& fn) const {
  return walk(txn, 1, fn);
}

void RecentNames::SeqTable::insert(uint64_t prefix, uint64_t seq) {
  if ((m_used + 1) * 4 > m_slots.size() * 3) {
    size_t slots = 1024;
    while (slots * 3 < std::max<uint64_t>(m_expected, m_used + 1) * 4) {
      slots *= 2;
    }
    grow(std::max(slots, m_slots.size() * 2));
  }
  size_t i = prefix & m_mask;
  while (m_slots[i].seq != 0) {
    i = (i + 1) & m_mask;
  }
  m_slots[i] = Slot{prefix, seq};
  ++m_used;
}

void RecentNames::SeqTable::grow(size_t slots) {
  std::vector<Slot> old(slots);
  old.swap(m_slots);
  m_mask = slots - 1;
  m_used = 0;
  for (const Slot& s : old) {
    if (s.seq != 0) {
      insert(s.prefix, s.seq);
    }
  }
}

void RecentNames::SeqTable::keep_from(uint64_t base) {
  // Rebuilt in place: after a merge few entries are left (those logged
  // while it ran), so the block is kept for the next cycle.
  std::vector<Slot> kept;
  for (const Slot& s : m_slots) {
    if (s.seq >= base) {
      kept.push_back(s);
    }
  }
  std::fill(m_slots.begin(), m_slots.end(), Slot{});
  m_used = 0;
  for (const Slot& s : kept) {
    insert(s.prefix, s.seq);
  }
}

void RecentNames::SeqTable::clear() {
  std::fill(m_slots.begin(), m_slots.end(), Slot{});
  m_used = 0;
}

} // namespace tributary::store::blob_detail

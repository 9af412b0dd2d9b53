#pragma once

// The blob index's log of recent names. A name is first appended to the
// LMDB database "recent" under the next sequence number (an 8-byte
// big-endian key, so the log grows at its end), and moved into the index's
// main tree, keyed by name, in one sorted pass once the log holds
// merge_at names (BlobIndex::k_merge_at). A commit of a batch's names then writes the log's last
// pages instead of a leaf of the main tree for nearly every name: names are
// random, and a batch of 2,500 into a million dirtied about 2,400 leaves of
// 4 KB (10 MB written and synced a batch, 4 GB through a baseline of a
// million); a merge of 131,072 writes each leaf once.
//
// Every process reads the same log (LMDB serialises the writers): this
// class keeps this process's map from a name to its sequence number, for
// the entries it has read, and catches it up from the log's tail when a
// name is not in it. A hit is checked against the log's entry in the
// caller's transaction, so a map that another process outdated (a merge,
// a removal) costs a miss, never a wrong answer. Key 0 holds the log's base:
// every entry below it was merged.
//
// Methods taking a transaction run inside the index's; the ones named for
// after a commit (appended, merged, forget) keep the map in step once it
// committed. Errors are LMDB's return codes, for BlobIndex to report.

#include "store/blob/blob_index.h"

#include <lmdb.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace tributary::store::blob_detail {

// A log entry as stored: the name and what the index holds for it.
struct LogEntry {
  BlobName name{};
  IndexValue value;
};
static_assert(sizeof(LogEntry) == 56);

class RecentNames {
public:
  // `release` drops the index's map from resident memory (MapReleaser):
  // called while a walk of the log or a merge reads many of its pages.
  RecentNames(MDB_dbi log, uint64_t merge_at, std::function<void()> release)
      : m_log(log), m_merge_at(merge_at), m_release(std::move(release)) {}
  RecentNames(const RecentNames&) = delete;
  RecentNames& operator=(const RecentNames&) = delete;

  uint64_t merge_at() const { return m_merge_at; }

  // What `txn` sees of `name` in the log.
  enum class Found { yes, no, outdated };
  struct Hit {
    uint64_t seq = 0;
    IndexValue value;
  };
  // `outdated`: the snapshot of a read transaction predates a merge this
  // process already read, so the name may be in neither place it sees:
  // look it up again in a new transaction.
  // Without `may_catch_up`, only the entries already read are asked (a
  // name in the main tree then costs no read of the log).
  int find(MDB_txn* txn, const BlobName& name, bool may_catch_up, Found& found, Hit& hit);

  // Appends `entries` under the next sequence numbers (the first in
  // `first`).
  int append(MDB_txn* txn, const std::vector<LogEntry>& entries, uint64_t& first);
  // After append()'s transaction committed.
  void appended(uint64_t first, const std::vector<LogEntry>& entries);
  // The number of entries `txn` sees.
  int size(MDB_txn* txn, uint64_t& out) const;

  // Moves the log into `main` (a name there keeps its place), a slice of
  // the names' range a transaction, so that no transaction holds more than
  // about 8 MB of the main tree's pages dirty (LMDB keeps them in memory
  // until the commit): each step merges one slice of the entries the log
  // held when the merge began; the last also drops them from the log,
  // `done` then set with the new base. A step runs when merging() says so.
  bool merging(uint64_t logged) const;
  int merge_step(MDB_txn* txn, MDB_dbi main, bool& done, uint64_t& base);
  // After the step that was `done` committed.
  void merged(uint64_t base);

  // Changes or removes the entry `seq` (from find() in the same
  // transaction).
  int replace(MDB_txn* txn, uint64_t seq, const LogEntry& entry);
  int erase(MDB_txn* txn, uint64_t seq);
  // After a transaction that erased entries committed, or one that changed
  // the log failed: the map is read again from the log when next needed,
  // and a merge under way begins again.
  void forget();

  // Every entry `txn` sees, in the order appended.
  int for_each(MDB_txn* txn, const std::function<int(uint64_t seq, const LogEntry&)>& fn) const;

private:
  // Reads the entries past m_seen (and a new base) into the map; m_mutex
  // held.
  int catch_up(MDB_txn* txn);

  static constexpr uint64_t k_slice_pages = 2048;  // 8 MB of the main tree's leaves a merge step
  static constexpr uint64_t k_slice_names = 16384; // and at most about 1 MB of the log's entries

  // Each entry of the log from `from` on; `fn` returning non-zero stops
  // with that code.
  int walk(MDB_txn* txn, uint64_t from, const std::function<int(uint64_t, const LogEntry&)>& fn) const;

  MDB_dbi m_log;
  uint64_t m_merge_at;
  std::function<void()> m_release;
  mutable std::mutex m_mutex;
  // The merge under way: the last entry it takes (0: none), its slices,
  // the next one.
  uint64_t m_merge_to = 0;
  uint32_t m_slices = 1;
  uint32_t m_next_slice = 0;
  uint64_t m_merge_names = 0; // in the log when it began
  // A name's first 8 bytes -> its sequence number (several: names that
  // share them), for the entries [m_base, m_seen] this process read.
  // One block, open addressing: a node a name (std::unordered_multimap)
  // lived through a merge's cycle among the batches' short-lived
  // allocations in every committer thread's malloc arena, and pinned their
  // pages: the daemon's peak rose by 20-40 MB through a million.
  class SeqTable {
  public:
    // Room for `names` without growing (allocated at the first insert).
    explicit SeqTable(uint64_t names) : m_expected(names) {}
    void insert(uint64_t prefix, uint64_t seq);
    // fn(seq) for each entry of `prefix` until it returns true.
    template <typename F> void find(uint64_t prefix, F&& fn) const {
      for (size_t i = prefix & m_mask; !m_slots.empty() && m_slots[i].seq != 0; i = (i + 1) & m_mask) {
        if (m_slots[i].prefix == prefix && fn(m_slots[i].seq)) {
          return;
        }
      }
    }
    // Keeps the entries from `base` on.
    void keep_from(uint64_t base);
    void clear();

  private:
    struct Slot {
      uint64_t prefix = 0;
      uint64_t seq = 0; // 0: free
    };
    void grow(size_t slots);
    std::vector<Slot> m_slots; // a power of two, at most three quarters full
    size_t m_mask = 0;
    size_t m_used = 0;
    uint64_t m_expected;
  };
  SeqTable m_seq_of{m_merge_at + m_merge_at / 4}; // the log grows past merge_at while a merge runs
  uint64_t m_base = 1;
  uint64_t m_seen = 0;
};

} // namespace tributary::store::blob_detail

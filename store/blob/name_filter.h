#pragma once

// A Bloom filter of blob names: "certainly not stored" or "maybe stored".
// A name is a sha-256, already uniformly random: its own bytes are the
// filter's hashes, so testing a name costs a few loads and no hashing.

#include "store/blob/blob_store.h"

#include <atomic>
#include <cstdint>
#include <memory>

namespace tributary::store::blob_detail {

class NameFilter {
public:
  // Room for `capacity` names at about 1% false positives (10 bits and 6
  // probes a name).
  explicit NameFilter(uint64_t capacity);

  // Both safe from several threads at once.
  void insert(const BlobName& name);
  // False only when `name` was never inserted.
  bool may_contain(const BlobName& name) const;

  uint64_t capacity() const { return m_capacity; }
  uint64_t inserted() const { return m_inserted.load(std::memory_order_relaxed); }
  // The filter's own memory, in bytes.
  uint64_t bytes() const { return m_count * sizeof(uint64_t); }

private:
  static constexpr int k_probes = 6;
  static constexpr uint64_t k_bits_a_name = 10;
  uint64_t bits() const { return m_capacity * k_bits_a_name; }
  uint64_t m_capacity;
  std::atomic<uint64_t> m_inserted{0};
  // Atomic words: threads insert and ask at once without a lock (a
  // package's extraction threads ask for each of its 10,000 bitstreams;
  // behind one mutex they slept on each other, a fifth of the sync
  // thread's waits in a million's baseline).
  uint64_t m_count;
  std::unique_ptr<std::atomic<uint64_t>[]> m_words;
};

} // namespace tributary::store::blob_detail

#include "store/blob/name_filter.h"

#include <algorithm>
#include <cstring>

namespace tributary::store::blob_detail {

namespace {

// Two 64-bit hashes from the name's first sixteen bytes; probe i is
// h1 + i * h2 (Kirsch and Mitzenmacher: as good as k independent hashes).
struct Probes {
  uint64_t h1;
  uint64_t h2;
};

Probes probes_of(const BlobName& name) {
  Probes p{};
  std::memcpy(&p.h1, name.data(), sizeof p.h1);
  std::memcpy(&p.h2, name.data() + 8, sizeof p.h2);
  p.h2 |= 1; // never a step of 0
  return p;
}

} // namespace

NameFilter::NameFilter(uint64_t capacity)
    : m_capacity(std::max<uint64_t>(capacity, 1024)), m_count((bits() + 63) / 64),
      m_words(new std::atomic<uint64_t>[m_count]) {
  for (uint64_t i = 0; i < m_count; ++i) {
    m_words[i].store(0, std::memory_order_relaxed);
  }
}

void NameFilter::insert(const BlobName& name) {
  const Probes p = probes_of(name);
  for (int i = 0; i < k_probes; ++i) {
    const uint64_t bit = (p.h1 + static_cast<uint64_t>(i) * p.h2) % bits();
    m_words[bit / 64].fetch_or(uint64_t{1} << (bit % 64), std::memory_order_relaxed);
  }
  m_inserted.fetch_add(1, std::memory_order_relaxed);
}

bool NameFilter::may_contain(const BlobName& name) const {
  const Probes p = probes_of(name);
  for (int i = 0; i < k_probes; ++i) {
    const uint64_t bit = (p.h1 + static_cast<uint64_t>(i) * p.h2) % bits();
    if ((m_words[bit / 64].load(std::memory_order_relaxed) & (uint64_t{1} << (bit % 64))) == 0) {
      return false;
    }
  }
  return true;
}

} // namespace tributary::store::blob_detail

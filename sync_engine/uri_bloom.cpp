#include "sync_engine/uri_bloom.h"

#include <functional>

namespace tributary::sync {

namespace {

constexpr size_t k_first_capacity = 1 << 14;
constexpr size_t k_bits_per_uri = 16;
constexpr unsigned k_probes = 8; // about 0.05% false positives a stage at 16 bits a URI

// The probes' bit positions by double hashing of one 64-bit hash (Kirsch and
// Mitzenmacher): h1 + i * h2.
template <class F>
void for_each_probe(uint64_t hash, size_t nbits, F&& f) {
  const uint64_t h1 = hash;
  const uint64_t h2 = (hash >> 29 | hash << 35) | 1;
  for (unsigned i = 0; i < k_probes; ++i) {
    f((h1 + i * h2) % nbits);
  }
}

uint64_t hash_of(std::string_view uri) {
  // std::hash's 64 bits, mixed once more (splitmix64's finaliser) so that
  // both halves carry the whole input.
  uint64_t z = std::hash<std::string_view>{}(uri);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

} // namespace

void UriBloom::insert(std::string_view uri) {
  if (m_stages.empty() || m_stages.back().count >= m_stages.back().capacity) {
    Stage s;
    s.capacity = m_stages.empty() ? k_first_capacity : m_stages.back().capacity * 2;
    s.bits.assign(s.capacity * k_bits_per_uri / 64, 0);
    m_stages.push_back(std::move(s));
  }
  Stage& s = m_stages.back();
  const size_t nbits = s.bits.size() * 64;
  for_each_probe(hash_of(uri), nbits, [&](uint64_t bit) { s.bits[bit / 64] |= uint64_t{1} << (bit % 64); });
  ++s.count;
  ++m_count;
}

bool UriBloom::maybe_contains(std::string_view uri) const {
  const uint64_t h = hash_of(uri);
  for (const auto& s : m_stages) {
    const size_t nbits = s.bits.size() * 64;
    bool all = true;
    for_each_probe(h, nbits, [&](uint64_t bit) { all = all && (s.bits[bit / 64] >> (bit % 64) & 1) != 0; });
    if (all) {
      return true;
    }
  }
  return false;
}

} // namespace tributary::sync

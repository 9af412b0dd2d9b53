#pragma once

// A set of URIs that answers "surely not in it" or "perhaps in it" (a
// scalable Bloom filter): 2 to 4 bytes a URI, however long the URI.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace tributary::sync {

class UriBloom {
public:
  void insert(std::string_view uri);
  // False: never inserted. True: inserted, or (rarely: see Stage) not.
  bool maybe_contains(std::string_view uri) const;
  size_t size() const { return m_count; }

private:
  // One Bloom filter of `capacity` URIs (about 0.06% false positives);
  // when it is full the next one is twice as large, so that at a million
  // URIs the seven of them answer wrongly below 0.5% of the time.
  struct Stage {
    std::vector<uint64_t> bits;
    size_t capacity = 0;
    size_t count = 0;
  };
  std::vector<Stage> m_stages;
  size_t m_count = 0;
};

} // namespace tributary::sync

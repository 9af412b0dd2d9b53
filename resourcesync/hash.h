#pragma once

#include "common/result.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tributary::rs {

// The digest algorithms ResourceSync names (`md5:`, `sha-1:`, `sha-256:`).
enum class HashAlgorithm { md5, sha1, sha256 };

// The token as written in documents: "md5", "sha-1", "sha-256".
std::string_view to_token(HashAlgorithm a);
// nullopt for tokens we do not know (they are kept, but never verified).
std::optional<HashAlgorithm> hash_algorithm_from_token(std::string_view token);
// Hex digits of a digest of that algorithm: 32, 40, 64.
size_t hex_length(HashAlgorithm a);

// One `token:hexdigest` of a hash attribute. `algorithm` keeps the token as
// written (lower-cased); `hex` is lower-cased.
struct HashValue {
  std::string algorithm;
  std::string hex;

  std::optional<HashAlgorithm> known() const { return hash_algorithm_from_token(algorithm); }
  bool operator==(const HashValue&) const = default;
};

struct HashParse {
  std::vector<HashValue> values;
  std::vector<std::string> warnings; // e.g. an algorithm we do not know
};

// Parses a whitespace-separated hash list ("md5:... sha-256:..."). Fails
// (invalid_document) on a value without `token:`, a digest that is not hex, a
// known algorithm with the wrong digest length, or an algorithm given twice.
// Unknown algorithms with hex digests are kept and reported as warnings.
Result<HashParse> parse_hash_list(std::string_view text);

// Space-separated `token:hex` list, as written in documents.
std::string format_hash_list(const std::vector<HashValue>& values);

// The strongest known value (sha-256 > sha-1 > md5), or nullptr.
const HashValue* strongest_hash(const std::vector<HashValue>& values);

// Streaming digest over OpenSSL EVP. The algorithm's EVP_MD is fetched once
// per process and reused.
class Hasher {
public:
  explicit Hasher(HashAlgorithm algorithm);
  ~Hasher();
  Hasher(Hasher&&) noexcept;
  Hasher& operator=(Hasher&&) noexcept;
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;

  void update(const void* data, size_t size);
  void update(std::string_view data) { update(data.data(), data.size()); }
  // Lower-case hex digest; the hasher is reset and may be reused.
  std::string finish_hex();
  HashAlgorithm algorithm() const { return m_algorithm; }

private:
  struct Impl;
  HashAlgorithm m_algorithm;
  std::unique_ptr<Impl> m_impl;
};

// Digest of a whole buffer in one call.
std::string hash_hex(HashAlgorithm algorithm, std::string_view data);

// Computes several digests in one pass over the data, for verifying every
// known hash a document offers.
class MultiHasher {
public:
  explicit MultiHasher(const std::vector<HashAlgorithm>& algorithms);
  void update(const void* data, size_t size);
  // One value per algorithm, in the order given.
  std::vector<HashValue> finish();

private:
  std::vector<Hasher> m_hashers;
};

// True if `expected` and `actual` agree on every algorithm both contain and
// share at least one known algorithm. Sets `mismatch` to the first algorithm
// that disagrees.
bool hashes_match(const std::vector<HashValue>& expected,
                  const std::vector<HashValue>& actual, std::string* mismatch = nullptr);

} // namespace tributary::rs

#pragma once

#include "common/result.h"

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tributary::rs {

// The digest algorithms ResourceSync names (`md5:`, `sha-1:`, `sha-256:`).
enum class HashAlgorithm { md5, sha1, sha256 };

// The token as written in documents: "md5", "sha-1", "sha-256".
std::string_view to_token(HashAlgorithm a);
// nullopt for tokens we do not know (the reader ignores them: they cannot be verified).
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
  // The usable values, each algorithm once, digests as lower-case hex.
  std::vector<HashValue> values;
  // Deviations read without loss: base64 or base64url digests, upper-case
  // tokens, an algorithm we do not know (ignored: it cannot be verified).
  std::vector<std::string> warnings;
  // Values that could not be used, each dropped: no token, a digest of the
  // wrong length, two different digests for one algorithm.
  std::vector<std::string> errors;
};

// Parses a whitespace-separated hash list ("md5:... sha-256:..."). Liberal
// in what it reads, strict in what it keeps: a digest is read as hex, or as
// base64 or base64url, when it has exactly the algorithm's length; tokens
// match case-insensitively; a value that cannot be used costs that value
// only (an error naming it), never the others.
HashParse parse_hash_list(std::string_view text);

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
  // Lower-case hex digest; the hasher is spent (no reset: OpenSSL 3.0
  // allocates the digest's state anew for each).
  std::string final_hex();
  // The digest of what it was given and then `tail`, the hasher left as it
  // was (a copy is finished): for text that goes on growing.
  std::string peek_hex(std::string_view tail = {}) const;
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
  // One value per algorithm, in the order given; the hasher is spent.
  std::vector<HashValue> finish();

private:
  std::vector<Hasher> m_hashers;
};

// True if `expected` and `actual` agree on every algorithm both contain and
// share at least one known algorithm. Sets `mismatch` to the first algorithm
// that disagrees.
bool hashes_match(std::span<const HashValue> expected, std::span<const HashValue> actual,
                  std::string* mismatch = nullptr);

} // namespace tributary::rs

#include "resourcesync/hash.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <memory>
#include <mutex>
#include <stdexcept>

namespace tributary::rs {

std::string_view to_token(HashAlgorithm a) {
  switch (a) {
  case HashAlgorithm::md5:
    return "md5";
  case HashAlgorithm::sha1:
    return "sha-1";
  case HashAlgorithm::sha256:
    return "sha-256";
  }
  return "";
}

std::optional<HashAlgorithm> hash_algorithm_from_token(std::string_view token) {
  if (token == "md5") {
    return HashAlgorithm::md5;
  }
  if (token == "sha-1") {
    return HashAlgorithm::sha1;
  }
  if (token == "sha-256") {
    return HashAlgorithm::sha256;
  }
  return std::nullopt;
}

size_t hex_length(HashAlgorithm a) {
  switch (a) {
  case HashAlgorithm::md5:
    return 32;
  case HashAlgorithm::sha1:
    return 40;
  case HashAlgorithm::sha256:
    return 64;
  }
  return 0;
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

const EVP_MD* evp_for(HashAlgorithm a) {
  // EVP_MD_fetch is costly; fetch each digest once per process.
  static std::once_flag once;
  static std::array<EVP_MD*, 3> mds{};
  std::call_once(once, [] {
    mds[0] = EVP_MD_fetch(nullptr, "MD5", nullptr);
    mds[1] = EVP_MD_fetch(nullptr, "SHA1", nullptr);
    mds[2] = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  });
  const EVP_MD* md = mds[static_cast<size_t>(a)];
  if (!md) {
    throw std::runtime_error("OpenSSL does not provide " + std::string(to_token(a)));
  }
  return md;
}

} // namespace

namespace {

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') {
    return c - 'A';
  }
  if (c >= 'a' && c <= 'z') {
    return c - 'a' + 26;
  }
  if (c >= '0' && c <= '9') {
    return c - '0' + 52;
  }
  if (c == '+' || c == '-') {
    return 62;
  }
  if (c == '/' || c == '_') {
    return 63;
  }
  return -1;
}

// Decodes base64 (RFC 4648 section 4) or base64url (section 5), padded or
// not, into lower-case hex; nullopt when it is neither.
std::optional<std::string> base64_to_hex(std::string_view s) {
  while (!s.empty() && s.back() == '=') {
    s.remove_suffix(1);
  }
  if (s.empty() || s.size() % 4 == 1) {
    return std::nullopt;
  }
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    int v = base64_value(c);
    if (v < 0) {
      return std::nullopt;
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      const auto byte = static_cast<unsigned>((acc >> bits) & 0xff);
      out.push_back(k_hex[byte >> 4]);
      out.push_back(k_hex[byte & 0xf]);
    }
  }
  return out;
}

// Tokens real writers use for the three algorithms, beyond the spec's own.
std::optional<HashAlgorithm> algorithm_alias(std::string_view lowered) {
  if (lowered == "sha1") {
    return HashAlgorithm::sha1;
  }
  if (lowered == "sha256") {
    return HashAlgorithm::sha256;
  }
  return std::nullopt;
}

} // namespace

namespace {

// The common case, one value written canonically ("md5:" and 32 lower-case
// hex digits; sha-1, sha-256): read without the general path's copies
// (a third of reading a Change List's <rs:md> before).
bool parse_one_canonical(std::string_view text, HashParse& out) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    return false;
  }
  auto known = hash_algorithm_from_token(text.substr(0, colon));
  if (!known) {
    return false;
  }
  const std::string_view digest = text.substr(colon + 1);
  if (digest.size() != hex_length(*known)) {
    return false;
  }
  static constexpr auto k_lower_hex = [] {
    std::array<bool, 256> t{};
    for (int c = '0'; c <= '9'; ++c) {
      t[c] = true;
    }
    for (int c = 'a'; c <= 'f'; ++c) {
      t[c] = true;
    }
    return t;
  }();
  bool hex = true;
  for (const char c : digest) {
    hex &= k_lower_hex[static_cast<unsigned char>(c)];
  }
  if (!hex) {
    return false;
  }
  out.values.resize(1);
  out.values[0].algorithm = std::string(to_token(*known));
  out.values[0].hex.assign(digest);
  return true;
}

} // namespace

HashParse parse_hash_list(std::string_view text) {
  HashParse out;
  if (parse_one_canonical(text, out)) {
    return out;
  }
  std::vector<std::string> conflicting;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) {
      ++i;
    }
    if (i == text.size()) {
      break;
    }
    size_t start = i;
    while (i < text.size() && !is_space(text[i])) {
      ++i;
    }
    std::string_view item = text.substr(start, i - start);
    // Messages quote at most 100 bytes of a value: an attribute may be a
    // megabyte long. Made only for a message (once per entry, it was the
    // reader's costliest function: 11% of reading a Change List).
    auto quoted = [item] { return "'" + std::string(item.substr(0, 100)) + (item.size() > 100 ? "...'" : "'"); };
    size_t colon = item.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      out.errors.push_back("hash value " + quoted() + " lacks an algorithm token such as 'md5:' (dropped)");
      continue;
    }
    std::string token(item.substr(0, colon));
    for (char& c : token) {
      c = lower(c);
    }
    std::string_view digest = item.substr(colon + 1);
    auto known = hash_algorithm_from_token(token);
    if (!known) {
      known = algorithm_alias(token);
      if (known) {
        out.warnings.push_back("hash algorithm '" + token + "' read as '" + std::string(to_token(*known)) + "'");
      }
    } else if (item.substr(0, colon) != token) {
      out.warnings.push_back("hash algorithm '" + std::string(item.substr(0, colon)) + "' read as '" + token + "'");
    }
    if (!known) {
      out.warnings.push_back("unknown hash algorithm '" + token.substr(0, 40) + "' (ignored, not verified)");
      continue;
    }
    if (digest.empty()) {
      out.errors.push_back("hash value " + quoted() + " has no digest (dropped)");
      continue;
    }
    if (out.values.capacity() == 0) {
      out.values.reserve(2);
    }
    HashValue v;
    v.algorithm = std::string(to_token(*known));
    const size_t want = hex_length(*known);
    bool hex = digest.size() == want;
    bool upper = false;
    for (size_t k = 0; hex && k < digest.size(); ++k) {
      const char c = digest[k];
      upper = upper || (c >= 'A' && c <= 'F');
      hex = is_hex(c) || (c >= 'A' && c <= 'F');
    }
    if (hex) {
      v.hex.assign(digest);
      if (upper) {
        for (char& c : v.hex) {
          c = lower(c);
        }
      }
    } else if (auto decoded = base64_to_hex(digest); decoded && decoded->size() == want) {
      // py-resync before 1.0 and the 2015 simulator wrote base64, the
      // specification's own example 27 base64url: the same digest.
      v.hex = std::move(*decoded);
      out.warnings.push_back("hash value " + quoted() + " is base64, not hex (read as " + v.algorithm + ":" + v.hex + ")");
    } else {
      out.errors.push_back("hash value " + quoted() + ": " + v.algorithm + " needs " + std::to_string(want) +
                           " hex digits (or its base64), got " + std::to_string(digest.size()) +
                           " characters that are neither (dropped)");
      continue;
    }
    if (std::find(conflicting.begin(), conflicting.end(), v.algorithm) != conflicting.end()) {
      continue;
    }
    auto prev = std::find_if(out.values.begin(), out.values.end(),
                             [&](const HashValue& p) { return p.algorithm == v.algorithm; });
    if (prev != out.values.end()) {
      if (prev->hex == v.hex) {
        out.warnings.push_back("hash algorithm '" + v.algorithm + "' given twice with the same digest");
      } else {
        out.errors.push_back("hash algorithm '" + v.algorithm + "' given twice with different digests (both dropped)");
        conflicting.push_back(v.algorithm);
        out.values.erase(prev);
      }
      continue;
    }
    out.values.push_back(std::move(v));
  }
  if (out.values.empty() && out.errors.empty() && out.warnings.empty()) {
    out.warnings.push_back("hash attribute is empty (ignored)");
  }
  return out;
}

std::string format_hash_list(const std::vector<HashValue>& values) {
  std::string out;
  for (const auto& v : values) {
    if (!out.empty()) {
      out.push_back(' ');
    }
    out += v.algorithm;
    out.push_back(':');
    out += v.hex;
  }
  return out;
}

const HashValue* strongest_hash(const std::vector<HashValue>& values) {
  const HashValue* best = nullptr;
  int best_rank = -1;
  for (const auto& v : values) {
    auto k = v.known();
    if (!k) {
      continue;
    }
    int rank = static_cast<int>(*k); // md5 < sha1 < sha256
    if (rank > best_rank) {
      best_rank = rank;
      best = &v;
    }
  }
  return best;
}

struct Hasher::Impl {
  EVP_MD_CTX* ctx = nullptr;
  const EVP_MD* md = nullptr;
  ~Impl() { EVP_MD_CTX_free(ctx); }
};

Hasher::Hasher(HashAlgorithm algorithm) : m_algorithm(algorithm), m_impl(std::make_unique<Impl>()) {
  m_impl->md = evp_for(algorithm);
  m_impl->ctx = EVP_MD_CTX_new();
  if (!m_impl->ctx || EVP_DigestInit_ex2(m_impl->ctx, m_impl->md, nullptr) != 1) {
    throw std::runtime_error("OpenSSL digest initialisation failed");
  }
}

Hasher::~Hasher() = default;
Hasher::Hasher(Hasher&&) noexcept = default;
Hasher& Hasher::operator=(Hasher&&) noexcept = default;

void Hasher::update(const void* data, size_t size) {
  if (size > 0) {
    EVP_DigestUpdate(m_impl->ctx, data, size);
  }
}

namespace {

std::string finish_to_hex(EVP_MD_CTX* ctx) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, digest, &len);
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out(len * 2, '0');
  for (unsigned int i = 0; i < len; ++i) {
    out[2 * i] = k_hex[digest[i] >> 4];
    out[2 * i + 1] = k_hex[digest[i] & 0xf];
  }
  return out;
}

} // namespace

std::string Hasher::final_hex() { return finish_to_hex(m_impl->ctx); }

std::string Hasher::finish_hex() {
  std::string out = final_hex();
  EVP_DigestInit_ex2(m_impl->ctx, m_impl->md, nullptr);
  return out;
}

std::string Hasher::peek_hex(std::string_view tail) const {
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> copy(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!copy || EVP_MD_CTX_copy_ex(copy.get(), m_impl->ctx) != 1) {
    throw std::runtime_error("OpenSSL digest copy failed");
  }
  if (!tail.empty()) {
    EVP_DigestUpdate(copy.get(), tail.data(), tail.size());
  }
  return finish_to_hex(copy.get());
}

std::string hash_hex(HashAlgorithm algorithm, std::string_view data) {
  Hasher h(algorithm);
  h.update(data);
  return h.finish_hex();
}

MultiHasher::MultiHasher(const std::vector<HashAlgorithm>& algorithms) {
  for (auto a : algorithms) {
    m_hashers.emplace_back(a);
  }
}

void MultiHasher::update(const void* data, size_t size) {
  for (auto& h : m_hashers) {
    h.update(data, size);
  }
}

std::vector<HashValue> MultiHasher::finish() {
  std::vector<HashValue> out;
  out.reserve(m_hashers.size());
  for (auto& h : m_hashers) {
    out.push_back(HashValue{std::string(to_token(h.algorithm())), h.final_hex()});
  }
  return out;
}

bool hashes_match(std::span<const HashValue> expected, std::span<const HashValue> actual, std::string* mismatch) {
  bool compared = false;
  for (const auto& e : expected) {
    if (!e.known()) {
      continue;
    }
    for (const auto& a : actual) {
      if (a.algorithm == e.algorithm) {
        compared = true;
        if (a.hex != e.hex) {
          if (mismatch) {
            *mismatch = e.algorithm + ": expected " + e.hex + ", got " + a.hex;
          }
          return false;
        }
      }
    }
  }
  if (!compared && mismatch) {
    *mismatch = "no algorithm in common";
  }
  return compared;
}

} // namespace tributary::rs

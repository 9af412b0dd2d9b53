#include "resourcesync/hash.h"

#include <openssl/evp.h>

#include <array>
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

Result<HashParse> parse_hash_list(std::string_view text) {
  HashParse out;
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
    size_t colon = item.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return make_error(ErrorKind::invalid_document,
                        "hash value '" + std::string(item) + "' lacks an algorithm token such as 'md5:'");
    }
    HashValue v;
    v.algorithm.reserve(colon);
    for (char c : item.substr(0, colon)) {
      v.algorithm.push_back(lower(c));
    }
    std::string_view digest = item.substr(colon + 1);
    v.hex.reserve(digest.size());
    for (char c : digest) {
      char l = lower(c);
      if (!is_hex(l)) {
        return make_error(ErrorKind::invalid_document,
                          "hash value '" + std::string(item) + "' is not hexadecimal");
      }
      v.hex.push_back(l);
    }
    if (v.hex.empty()) {
      return make_error(ErrorKind::invalid_document,
                        "hash value '" + std::string(item) + "' has no digest");
    }
    if (auto known = v.known()) {
      if (v.hex.size() != hex_length(*known)) {
        return make_error(ErrorKind::invalid_document,
                          "hash value '" + std::string(item) + "': " + v.algorithm + " needs " +
                              std::to_string(hex_length(*known)) + " hex digits, got " +
                              std::to_string(v.hex.size()));
      }
    } else {
      out.warnings.push_back("unknown hash algorithm '" + v.algorithm + "' (kept, not verified)");
    }
    for (const auto& prev : out.values) {
      if (prev.algorithm == v.algorithm) {
        return make_error(ErrorKind::invalid_document,
                          "hash algorithm '" + v.algorithm + "' given twice");
      }
    }
    out.values.push_back(std::move(v));
  }
  if (out.values.empty()) {
    return make_error(ErrorKind::invalid_document, "hash attribute is empty");
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

std::string Hasher::finish_hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(m_impl->ctx, digest, &len);
  EVP_DigestInit_ex2(m_impl->ctx, m_impl->md, nullptr);
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out(len * 2, '0');
  for (unsigned int i = 0; i < len; ++i) {
    out[2 * i] = k_hex[digest[i] >> 4];
    out[2 * i + 1] = k_hex[digest[i] & 0xf];
  }
  return out;
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
  for (auto& h : m_hashers) {
    out.push_back(HashValue{std::string(to_token(h.algorithm())), h.finish_hex()});
  }
  return out;
}

bool hashes_match(const std::vector<HashValue>& expected, const std::vector<HashValue>& actual,
                  std::string* mismatch) {
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

#include "resourcesync/websub.h"

#include "common/percent.h"
#include "resourcesync/hash.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <array>
#include <stdexcept>

namespace tributary::rs::websub {

namespace {

std::string hmac_hex(const EVP_MD* md, std::string_view key, std::string_view body) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> out{};
  unsigned int len = 0;
  if (!HMAC(md, key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(body.data()),
            body.size(), out.data(), &len)) {
    return {};
  }
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    hex.push_back(k_hex[out[i] >> 4]);
    hex.push_back(k_hex[out[i] & 0xf]);
  }
  return hex;
}

} // namespace

std::optional<std::map<std::string, std::string>> parse_form(std::string_view body) {
  auto pairs = form_pairs(body);
  if (!pairs) {
    return std::nullopt;
  }
  std::map<std::string, std::string> out;
  for (auto& [name, value] : *pairs) {
    out.emplace(std::move(name), std::move(value)); // the first of a repeated name
  }
  return out;
}

std::string encode_form(const std::map<std::string, std::string>& fields) {
  std::string out;
  for (const auto& [k, v] : fields) {
    out += (out.empty() ? "" : "&") + percent_encode(k) + "=" + percent_encode(v);
  }
  return out;
}

std::string signature(std::string_view secret, std::string_view body) {
  return "sha256=" + hmac_hex(EVP_sha256(), secret, body);
}

SignatureCheck check_signature(const std::string* header, std::string_view secret, std::string_view body) {
  if (!header) {
    return SignatureCheck::missing;
  }
  const size_t eq = header->find('=');
  if (eq == std::string::npos) {
    return SignatureCheck::malformed;
  }
  const std::string method = header->substr(0, eq);
  std::string given = header->substr(eq + 1);
  for (char& c : given) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  const EVP_MD* md = method == "sha1"     ? EVP_sha1()
                     : method == "sha256" ? EVP_sha256()
                     : method == "sha384" ? EVP_sha384()
                     : method == "sha512" ? EVP_sha512()
                                          : nullptr;
  if (!md) {
    return SignatureCheck::malformed;
  }
  const std::string want = hmac_hex(md, secret, body);
  if (want.empty() || given.size() != want.size()) {
    return SignatureCheck::mismatch;
  }
  return CRYPTO_memcmp(given.data(), want.data(), want.size()) == 0 ? SignatureCheck::valid
                                                                    : SignatureCheck::mismatch;
}

std::string_view to_string(SignatureCheck c) {
  switch (c) {
  case SignatureCheck::valid:
    return "valid";
  case SignatureCheck::missing:
    return "no X-Hub-Signature although a secret was given";
  case SignatureCheck::malformed:
    return "malformed X-Hub-Signature";
  case SignatureCheck::mismatch:
    return "X-Hub-Signature does not match the content";
  }
  return "?";
}

std::string random_hex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes)) != 1) {
    throw std::runtime_error("no random bytes to be had from OpenSSL");
  }
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : raw) {
    hex.push_back(k_hex[c >> 4]);
    hex.push_back(k_hex[c & 0xf]);
  }
  return hex;
}

std::string callback_label(std::string_view callback) {
  std::string origin;
  if (const size_t scheme = callback.find("://"); scheme != std::string_view::npos) {
    const size_t end = callback.find_first_of("/?#", scheme + 3);
    origin = std::string(callback.substr(0, end));
    if (const size_t at = origin.find('@', scheme + 3); at != std::string::npos) {
      origin.erase(scheme + 3, at + 1 - (scheme + 3)); // no userinfo either
    }
  }
  return (origin.empty() ? std::string("(not a URL)") : origin) + " #" +
         hash_hex(HashAlgorithm::sha256, callback).substr(0, 8);
}

std::string link_header(std::string_view hub, std::string_view topic) {
  return "<" + std::string(hub) + ">; rel=\"hub\", <" + std::string(topic) + ">; rel=\"self\"";
}

} // namespace tributary::rs::websub

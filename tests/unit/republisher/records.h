#pragma once

// Resource records as the sync engine stores them, for the republisher's
// unit tests.
#include "../../common/documents.h"
#include "resourcesync/reader.h"
#include "store/store.h"

#include <string>

namespace tributary::test {

// A live resource holding `content` as text/plain, with its MD5 and SHA-256.
inline store::ResourceRecord record(const std::string& uri, const std::string& content) {
  store::ResourceRecord r;
  r.uri = uri;
  r.lastmod = ts("2026-01-01T10:00:00Z");
  r.length = content.size();
  r.hashes = {{"md5", rs::hash_hex(rs::HashAlgorithm::md5, content)},
              {"sha-256", rs::hash_hex(rs::HashAlgorithm::sha256, content)}};
  r.type = "text/plain";
  r.blob_sha256 = rs::hash_hex(rs::HashAlgorithm::sha256, content);
  return r;
}

} // namespace tributary::test

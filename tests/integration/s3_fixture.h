#pragma once
// The S3 tests' shared helpers (test_s3.cpp, test_s3_cluster.cpp): the test
// bucket's config from the environment deploy/test.sh sets, and small reads.
#include "../common/scratch_dir.h"
#include "daemon_client.h"
#include "sync_fixture.h"

#include "resourcesync/hash.h"
#include "store/blob/blob_store.h"
#include "store/pg/pg_object_index.h"
#include "store/s3/object_tier.h"
#include "store/s3/s3_client.h"

#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <fstream>

namespace tributary::test {


inline store::S3Config s3_config() {
  const char* endpoint = std::getenv("TRIBUTARY_TEST_S3_ENDPOINT");
  REQUIRE_MESSAGE(endpoint != nullptr, "TRIBUTARY_TEST_S3_ENDPOINT is not set: run the tests through deploy/test.sh");
  static std::atomic<int> n{0};
  store::S3Config c;
  c.endpoint = endpoint;
  c.bucket = "t" + std::to_string(::getpid()) + "-" + std::to_string(n++);
  c.access_key = std::getenv("TRIBUTARY_TEST_S3_ACCESS_KEY") ? std::getenv("TRIBUTARY_TEST_S3_ACCESS_KEY") : "";
  c.secret_key = std::getenv("TRIBUTARY_TEST_S3_SECRET_KEY") ? std::getenv("TRIBUTARY_TEST_S3_SECRET_KEY") : "";
  return c;
}

inline std::string get_all(store::S3Client& s3, const std::string& key, uint64_t offset, uint64_t length) {
  std::string out;
  auto r = s3.get(key, offset, length, [&](const char* d, size_t n) {
    out.append(d, n);
    return true;
  });
  REQUIRE_MESSAGE(r, (r ? std::string() : r.error().message));
  return out;
}

// A config's "content" for the test bucket, its keys read from the
// environment deploy/test.sh sets.
inline json s3_content(const store::S3Config& s3) {
  return {{"store", "s3"},
          {"endpoint", s3.endpoint},
          {"bucket", s3.bucket},
          {"access_key_env", "TRIBUTARY_TEST_S3_ACCESS_KEY"},
          {"secret_key_env", "TRIBUTARY_TEST_S3_SECRET_KEY"}};
}

inline std::string write_config(const std::filesystem::path& path, const json& config) {
  std::ofstream(path) << config.dump(2);
  return path.string();
}

// Reads each of `contents` through a blob store at `root` (empty or not)
// with the test bucket's tier: what it lacks comes from the bucket.
inline void read_back(const std::filesystem::path& root, const store::S3Config& s3, const std::string& conninfo,
               const std::vector<std::string>& contents) {
  auto blobs = store::BlobStore::open(root);
  REQUIRE(blobs);
  auto tier = store::ObjectTier::open(s3, std::make_shared<store::PgObjectIndex>(conninfo));
  REQUIRE(tier);
  (*blobs)->set_remote(*tier);
  for (const auto& bytes : contents) {
    auto got = (*blobs)->read(rs::hash_hex(rs::HashAlgorithm::sha256, bytes));
    REQUIRE_MESSAGE(got, (got ? std::string() : got.error().message));
    CHECK(*got == bytes);
  }
}

inline long count(const std::string& conninfo, const std::string& sql) {
  pqxx::connection c(conninfo);
  pqxx::read_transaction tx(c);
  return tx.exec1(sql)[0].as<long>();
}


} // namespace tributary::test

#pragma once

#include "common/result.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

// A small client for S3-compatible object storage (AWS S3, Ceph RGW, MinIO):
// the five requests the content store needs, signed with AWS Signature
// Version 4 by libcurl itself (CURLOPT_AWS_SIGV4), not by hand-written
// signing code.
namespace tributary::store {

struct S3Config {
  std::string endpoint;            // http(s)://host[:port], no path
  std::string bucket;
  std::string region = "us-east-1";
  bool path_style = true;          // endpoint/bucket/key; else bucket.host/key
  std::string access_key;
  std::string secret_key;
  long connect_timeout_ms = 10000;
  long timeout_ms = 600000;        // one whole request (a 5 GB PUT included)
};

class S3Client {
public:
  explicit S3Client(S3Config config);
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  const S3Config& config() const;
  // New keys for every request from now on (a rotated secret).
  void set_credentials(std::string access_key, std::string secret_key);
  // The object's URL (no signature).
  std::string url(const std::string& key) const;

  // Creates the bucket; one that exists and is ours is fine.
  Result<void> create_bucket();
  // PUT of a whole object from memory. `sha256_hex` is the body's SHA-256,
  // sent as x-amz-content-sha256 so that the server checks the bytes it
  // got; the object is visible whole once this returns.
  Result<void> put(const std::string& key, std::string_view body, const std::string& sha256_hex);
  // PUT of `length` bytes of `file` from `offset`.
  Result<void> put_file(const std::string& key, const std::filesystem::path& file, uint64_t offset, uint64_t length,
                        const std::string& sha256_hex);
  // GET of `length` bytes from `offset` (a Range request), to `sink` (false
  // stops). not_found when the object is missing; an error when fewer bytes
  // came than asked.
  Result<void> get(const std::string& key, uint64_t offset, uint64_t length,
                   const std::function<bool(const char*, size_t)>& sink);
  // The object's size; nullopt when it is missing.
  Result<std::optional<uint64_t>> head(const std::string& key);
  // DELETE; a missing object is fine.
  Result<void> remove(const std::string& key);

  struct Handle; // the pool of libcurl handles (kept-alive connections), in the .cpp

private:
  S3Config m_config;
  std::unique_ptr<Handle> m_handles; // a pool of libcurl handles (kept-alive connections)
};

} // namespace tributary::store

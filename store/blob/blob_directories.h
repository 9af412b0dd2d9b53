#pragma once

// Where blobs too large for a pack live: <root>/blobs/<first 2 hex>/<name>,
// one level of 256 directories made as first needed, and the durability of
// their names. This class owns which directories exist and which hold
// names not yet flushed.

#include "common/result.h"

#include <array>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>

namespace tributary::store::blob_detail {

class BlobDirectories {
public:
  explicit BlobDirectories(std::filesystem::path root) : m_root(std::move(root)) {}

  // Where the blob `sha256` (a valid name) has its file; its directory made
  // if this process has not yet.
  std::filesystem::path file_path(const std::string& sha256);
  // blobs/<sub> (two hex digits), made if this process has not yet.
  std::filesystem::path dir(const std::string& sub);
  // A blob was named (linked) in `dir`: the next sync() flushes it.
  void named(const std::filesystem::path& dir);
  // Makes the names given since the last call durable (one syncfs, or an
  // fsync per directory); a caller returns only once every directory named
  // before its call is durable, even when another caller took that
  // directory into its own flush.
  Result<void> sync();

private:
  std::filesystem::path m_root;
  std::array<std::atomic<bool>, 256> m_made{};
  std::mutex m_sync_mutex; // held through a whole sync()
  std::mutex m_mutex;      // guards m_dirty
  std::set<std::filesystem::path> m_dirty;
};

} // namespace tributary::store::blob_detail

#pragma once

// The blob store's small helpers and on-disk record format, used by each of
// its rooms: names (hex and raw), whole reads and writes, directory
// flushes, and pack file names. Not for use outside store/blob/.

#include "common/result.h"
#include "store/blob/blob_store.h"

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace tributary::store::blob_detail {

std::string errno_text();
bool valid_name(const std::string& s);
// The 32 bytes a valid name spells (the index key).
std::array<unsigned char, 32> raw_name(const std::string& hex);
std::string hex_of(const unsigned char* raw, size_t n);
// Writes all of `data` to `fd` (a temporary blob file of the store at `root`).
Result<void> write_all(int fd, const char* data, size_t size, const std::filesystem::path& root);
// Reads exactly `size` bytes at `offset`; false at the end of the file.
bool pread_all(int fd, void* buf, size_t size, uint64_t offset);
// Flushes a directory's entries (tests replace it: testing::set_directory_sync).
Result<void> fsync_dir(const std::filesystem::path& dir);
// Whether a test replaced fsync_dir.
bool fsync_dir_replaced();
std::filesystem::path pack_path(const std::filesystem::path& root, uint32_t id);
// The pack files under `root`, by id.
std::vector<std::pair<uint32_t, std::filesystem::path>> list_packs(const std::filesystem::path& root);

// A pack record: this header, then `length` bytes. The header makes a pack
// self-describing (the index can be rebuilt from the packs).
struct RecordHeader {
  char magic[4] = {'T', 'R', 'B', '1'};
  uint32_t flags = 0;
  uint64_t length = 0;
  unsigned char sha256[32] = {};
};
static_assert(sizeof(RecordHeader) == 48);

// Records start at multiples of 8, so that check() can find the next record
// past a damaged or never-written one.
inline uint64_t aligned(uint64_t n) { return (n + 7) & ~uint64_t{7}; }

} // namespace tributary::store::blob_detail

// `tributary check` of the blob store: every pack record, index entry
// and loose file checked against its name; the index rebuilt on request.
#include "store/blob/blob_internal.h"

#include "resourcesync/hash.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>

namespace tributary::store::blob_detail {

namespace fs = std::filesystem;

namespace {

// Every index entry points at an intact record of its name.
Result<void> check_index(const BlobIndex& index, const fs::path& root, BlobCheck& out) {
  // (The scan of the packs proved each intact record's bytes match its
  // header.)
  std::map<uint32_t, int> fds;
  auto r = index.for_each_raw([&](const BlobName& key, const std::optional<IndexValue>& value) {
    ++out.index_entries;
    const std::string name = hex_of(key.data(), key.size());
    if (!value) {
      out.problems.push_back("index entry " + name + ": malformed");
      return;
    }
    const IndexValue& iv = *value;
    auto [it, opened] = fds.try_emplace(iv.pack, -1);
    if (opened) {
      it->second = ::open(pack_path(root, iv.pack).c_str(), O_RDONLY | O_CLOEXEC);
    }
    RecordHeader h;
    if (it->second < 0 || iv.offset < sizeof h || !pread_all(it->second, &h, sizeof h, iv.offset - sizeof h) ||
        std::memcmp(h.magic, "TRB1", 4) != 0 || std::memcmp(h.sha256, key.data(), 32) != 0 ||
        h.length != iv.length) {
      out.problems.push_back("index entry " + name + ": no record of it at offset " + std::to_string(iv.offset) +
                             " of " + pack_path(root, iv.pack).string());
    }
  });
  for (auto& [id, fd] : fds) {
    if (fd >= 0) {
      ::close(fd);
    }
  }
  return r;
}

// Blob files hash to their names.
void check_files(const fs::path& root, BlobCheck& out) {
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(root / "blobs", ec)) {
    if (!e.is_regular_file()) {
      continue;
    }
    const std::string name = e.path().filename().string();
    ++out.files;
    out.file_bytes += e.file_size();
    rs::Hasher hasher(rs::HashAlgorithm::sha256);
    const int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
    char buf[65536];
    ssize_t n = 0;
    while (fd >= 0 && ((n = ::read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))) {
      hasher.update(buf, static_cast<size_t>(std::max<ssize_t>(n, 0)));
    }
    if (fd >= 0) {
      ::close(fd);
    }
    if (fd < 0 || n < 0 || !valid_name(name) || hasher.finish_hex() != name) {
      out.problems.push_back(e.path().string() + ": does not hash to its name");
    }
  }
}

} // namespace

Result<BlobCheck> check_store(BlobIndex& index, const fs::path& root, bool reindex) {
  BlobCheck out;
  const std::vector<std::pair<uint32_t, fs::path>> packs = list_packs(root);
  std::vector<std::pair<std::string, IndexValue>> missing;
  auto flush_missing = [&]() -> Result<void> {
    if (!missing.empty()) {
      if (auto r = index.add(missing); !r) {
        return r;
      }
      out.reindexed += missing.size();
      missing.clear();
    }
    return {};
  };
  std::string bytes;
  for (const auto& [id, path] : packs) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      out.problems.push_back(path.string() + ": cannot open: " + errno_text());
      continue;
    }
    struct stat st {};
    ::fstat(fd, &st);
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    ++out.packs;
    out.pack_bytes += size;
    uint64_t at = 0;
    std::optional<uint64_t> lost_from; // looking for the next record from here
    while (at + sizeof(RecordHeader) <= size) {
      RecordHeader h;
      if (!pread_all(fd, &h, sizeof h, at) || std::memcmp(h.magic, "TRB1", 4) != 0 || h.length > BlobStore::k_pack_max ||
          h.length > size - at - sizeof h) {
        // Not a record: space reserved by a write a crash cut short, or
        // damage. The next record starts at a later multiple of 8.
        lost_from = lost_from ? lost_from : at;
        at += 8;
        continue;
      }
      bytes.resize(h.length);
      if (!pread_all(fd, bytes.data(), bytes.size(), at + sizeof h)) {
        out.problems.push_back(path.string() + ": cannot read the record at offset " + std::to_string(at) + ": " +
                               errno_text());
        break;
      }
      const std::string name = hex_of(h.sha256, sizeof h.sha256);
      const uint64_t data_at = at + sizeof h;
      auto found = index.lookup(name);
      if (!found) {
        ::close(fd);
        return tl::unexpected(found.error());
      }
      const bool named_here = *found && (*found)->pack == id && (*found)->offset == data_at;
      if (rs::hash_hex(rs::HashAlgorithm::sha256, bytes) != name) {
        if (lost_from && !named_here) {
          at += 8; // "TRB1" by chance inside lost space
          continue;
        }
        if (named_here) {
          out.problems.push_back(path.string() + ": the record at offset " + std::to_string(at) +
                                 " does not hash to its name " + name + " (the index serves it)");
        } else {
          out.unreadable_bytes += aligned(data_at + h.length) - at;
        }
        at = aligned(data_at + h.length);
        continue;
      }
      if (lost_from) {
        out.unreadable_bytes += at - *lost_from;
        lost_from.reset();
      }
      ++out.records;
      if (named_here) {
        ++out.indexed;
        out.indexed_bytes += h.length;
      } else if (!*found && reindex) {
        missing.emplace_back(name, IndexValue{id, 0, data_at, h.length});
        ++out.indexed;
        out.indexed_bytes += h.length;
        if (missing.size() >= 10000) {
          if (auto r = flush_missing(); !r) {
            ::close(fd);
            return tl::unexpected(r.error());
          }
        }
      }
      at = aligned(data_at + h.length);
    }
    out.unreadable_bytes += size - std::min(size, lost_from.value_or(at));
    ::close(fd);
  }
  if (auto r = flush_missing(); !r) {
    return tl::unexpected(r.error());
  }
  if (auto r = check_index(index, root, out); !r) {
    return tl::unexpected(r.error());
  }
  check_files(root, out);
  return out;
}


} // namespace tributary::store::blob_detail

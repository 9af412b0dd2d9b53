// The blob store's side of garbage collection that spans its rooms: the
// walk of every blob, removal (index entries and files together), and
// repack (the rewrite of packs mostly dead).
#include "store/blob/blob_internal.h"

#include "resourcesync/hash.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>

namespace tributary::store::blob_detail {

namespace fs = std::filesystem;

Result<void> for_each_blob(const BlobIndex& index, const fs::path& root,
                           const std::function<void(const BlobName&, uint64_t)>& fn) {
  if (auto r = index.for_each([&](const BlobName& n, const IndexValue& iv) { fn(n, iv.length); }); !r) {
    return r;
  }
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root / "blobs", ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    auto name = it->is_regular_file(ec) ? BlobStore::name_of(it->path().filename().string()) : std::nullopt;
    if (name) {
      fn(*name, it->file_size(ec));
    }
  }
  if (ec) {
    return make_error(ErrorKind::io, "list " + (root / "blobs").string() + ": " + ec.message());
  }
  return {};
}

Result<RemoveReport> remove_blobs(BlobIndex& index, BlobDirectories& files, const std::vector<BlobName>& names,
                                  bool only_condemned) {
  // A file blob is unlinked inside the index's transaction: a writer's
  // lift either ran before (and the mark was gone) or runs after and finds
  // the file gone.
  return index.remove(names, only_condemned, [&](const BlobName& name, RemoveReport& slice) {
    const fs::path f = files.file_path(hex_of(name.data(), 32));
    struct stat st {};
    if (::stat(f.c_str(), &st) == 0 && ::unlink(f.c_str()) == 0) {
      ++slice.blobs;
      slice.bytes += static_cast<uint64_t>(st.st_size);
    }
  });
}

Result<RepackReport> repack_packs(BlobIndex& index, PackAppender& appender, const fs::path& root,
                                  double live_below) {
  RepackReport out;
  // Live bytes per pack, from the index.
  std::map<uint32_t, uint64_t> live;
  if (auto r = index.for_each([&](const BlobName&, const IndexValue& iv) {
        live[iv.pack] += sizeof(RecordHeader) + aligned(iv.length);
      });
      !r) {
    return tl::unexpected(r.error());
  }
  const std::vector<std::pair<uint32_t, fs::path>> packs = list_packs(root);
  std::string bytes;
  for (const auto& [pack_id, path] : packs) {
    const uint32_t id = pack_id; // a plain variable: clang 14 cannot capture a structured binding
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      continue;
    }
    struct stat st {};
    ::fstat(fd, &st);
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    const uint64_t in_use = live.count(id) ? live[id] : 0;
    if (size == 0 || static_cast<double>(in_use) >= live_below * static_cast<double>(size)) {
      ::close(fd);
      continue;
    }
    // A pack some writer still appends to holds a shared lock.
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ++out.busy;
      ::close(fd);
      continue;
    }
    // This pack's live records, from one index snapshot; copied to this
    // process's pack, made durable, then the index moved to the copies
    // where it still names the old record.
    std::vector<std::pair<BlobName, IndexValue>> records;
    if (auto r = index.for_each([&](const BlobName& name, const IndexValue& iv) {
          if (iv.pack == id) {
            records.emplace_back(name, iv);
          }
        });
        !r) {
      ::close(fd);
      return tl::unexpected(r.error());
    }
    bool keep = false;
    std::vector<std::pair<BlobName, IndexValue>> moved; // the new places
    std::vector<std::shared_ptr<BlobPack>> written;
    uint64_t moved_bytes = 0;
    for (const auto& [name, iv] : records) {
      bytes.resize(iv.length);
      if (!pread_all(fd, bytes.data(), bytes.size(), iv.offset) ||
          rs::hash_hex(rs::HashAlgorithm::sha256, bytes) != hex_of(name.data(), 32)) {
        out.problems.push_back(path.string() + ": the record at offset " + std::to_string(iv.offset) +
                               " does not hash to its name " + hex_of(name.data(), 32) + " (the pack is kept)");
        keep = true;
        continue;
      }
      RecordHeader header;
      header.length = iv.length;
      std::memcpy(header.sha256, name.data(), 32);
      auto room = appender.reserve(sizeof header + iv.length);
      if (!room) {
        ::close(fd);
        return tl::unexpected(room.error());
      }
      iovec parts[2] = {{&header, sizeof header}, {bytes.data(), bytes.size()}};
      const ssize_t n = ::pwritev(room->first->fd(), parts, 2, static_cast<off_t>(room->second));
      if (n != static_cast<ssize_t>(sizeof header + bytes.size())) {
        const std::string why = n < 0 ? errno_text() : std::string("short write");
        appender.abandon(room->first, room->second, sizeof header + bytes.size());
        ::close(fd);
        return make_error(ErrorKind::io, "write " + room->first->path().string() + ": " + why);
      }
      if (std::find(written.begin(), written.end(), room->first) == written.end()) {
        written.push_back(room->first);
      }
      moved.emplace_back(name, IndexValue{room->first->id(), 0, room->second + sizeof header, iv.length});
      moved_bytes += iv.length;
    }
    for (const auto& p : written) {
      if (::fdatasync(p->fd()) != 0) {
        ::close(fd);
        return make_error(ErrorKind::io, "fdatasync " + p->path().string() + ": " + errno_text());
      }
    }
    if (auto r = index.move(id, moved); !r) {
      ::close(fd);
      return tl::unexpected(r.error());
    }
    if (!keep) {
      ::unlink(path.c_str());
      ++out.packs;
      out.freed_bytes += size > moved_bytes ? size - moved_bytes : 0;
    }
    out.moved += moved.size();
    out.moved_bytes += moved_bytes;
    ::close(fd);
  }
  if (out.packs > 0) {
    if (auto r = fsync_dir(root / "packs"); !r) {
      return tl::unexpected(r.error());
    }
  }
  return out;
}


} // namespace tributary::store::blob_detail

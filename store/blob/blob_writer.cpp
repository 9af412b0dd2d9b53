// Writing blobs: a Writer spools and hashes one blob; publish() places a
// batch of them (packed small ones, linked large ones) and indexes them in
// one transaction.
#include "store/blob/blob_internal.h"

#include "common/temp_files.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>

namespace tributary::store {

namespace fs = std::filesystem;
using blob_detail::BlobPack;
using blob_detail::IndexValue;
using blob_detail::PackAppender;
using blob_detail::RecordHeader;
using blob_detail::errno_text;
using blob_detail::write_all;

BlobStore::Writer::Writer(BlobStore& store, std::vector<rs::HashAlgorithm> algorithms)
    : m_store(&store), m_algorithms(algorithms), m_hasher(algorithms) {}

BlobStore::Writer::Writer(Writer&& o) noexcept
    : m_store(o.m_store), m_tmp(std::move(o.m_tmp)), m_fd(o.m_fd), m_buffer(std::move(o.m_buffer)),
      m_placed(std::move(o.m_placed)), m_size(o.m_size), m_algorithms(std::move(o.m_algorithms)),
      m_hasher(std::move(o.m_hasher)), m_digested(o.m_digested), m_finished(o.m_finished),
      m_info(std::move(o.m_info)) {
  o.m_fd = -1;
  o.m_finished = true;
}

BlobStore::Writer& BlobStore::Writer::operator=(Writer&& o) noexcept {
  if (this != &o) {
    this->~Writer();
    new (this) Writer(std::move(o));
  }
  return *this;
}

BlobStore::Writer::~Writer() {
  if (m_placed && m_placed->pending) {
    // Never published: its reservation stays a record never written, which
    // check() steps over.
    m_store->m_state->packs.undefer(m_size);
  }
  if (m_fd >= 0) {
    ::close(m_fd);
  }
  if (!m_finished && !m_tmp.empty()) {
    std::error_code ec;
    fs::remove(m_tmp, ec);
  }
}

Result<void> BlobStore::Writer::spill() {
  static std::atomic<uint64_t> counter{0};
  const fs::path& root = m_store->m_root;
  // The unnamed file is made in one of the 256 directories in turn: ext4
  // allocates an inode near its directory, so this spreads allocation (and
  // its locks) over block groups instead of queueing on one.
  static constexpr char k_hex[] = "0123456789abcdef";
  const uint64_t spread = counter.fetch_add(1);
  const std::string sub{k_hex[(spread >> 4) & 15], k_hex[spread & 15]};
  m_fd = ::open(m_store->m_state->files.dir(sub).c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
  if (m_fd < 0) {
    // File systems without O_TMPFILE: a named temporary file, renamed later.
    m_tmp = root / "tmp" / temp_file_name("blob", ".part");
    m_fd = ::open(m_tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (m_fd < 0) {
      const std::string why = errno_text();
      m_tmp.clear();
      return make_error(ErrorKind::io, "create a temporary blob file under " + root.string() + ": " + why);
    }
  }
  if (auto r = write_all(m_fd, m_buffer.data(), m_buffer.size(), root); !r) {
    return r;
  }
  std::string().swap(m_buffer);
  return {};
}

Result<void> BlobStore::Writer::write(const char* data, size_t size) {
  if (m_digested) {
    return make_error(ErrorKind::usage, "blob writer: write after digests were taken");
  }
  m_hasher.update(data, size);
  if (m_fd < 0 && m_buffer.size() + size <= k_pack_max) {
    m_buffer.append(data, size);
    m_size += size;
    return {};
  }
  if (m_fd < 0) {
    if (auto r = spill(); !r) {
      return r;
    }
  }
  if (auto r = write_all(m_fd, data, size, m_store->m_root); !r) {
    return r;
  }
  m_size += size;
  return {};
}

const std::vector<rs::HashValue>& BlobStore::Writer::digests() {
  if (!m_digested) {
    m_info.hashes = m_hasher.finish();
    m_digested = true;
  }
  return m_info.hashes;
}

const BlobInfo& BlobStore::Writer::seal() {
  if (!m_info.sha256.empty()) {
    return m_info;
  }
  digests();
  m_info.length = m_size;
  for (const auto& h : m_info.hashes) {
    if (h.known() == rs::HashAlgorithm::sha256) {
      m_info.sha256 = h.hex;
    }
  }
  if (m_fd >= 0) {
    return m_info;
  }
  // A small blob gets its place in a pack now (unless it is stored
  // already); its record is written by publish() with the others of its
  // group, or now when it is larger or too much waits already.
  m_placed = std::make_shared<Placed>();
  State& st = *m_store->m_state;
  // New content (a baseline's) is told apart without reading the index.
  bool stored = false;
  if (st.index->may_contain(m_info.sha256)) {
    auto found = st.index->lookup(m_info.sha256); // a lookup in a memory map: no system call
    stored = found && found->has_value();
  }
  if (stored) {
    // Reused: lift any condemnation (false: collected just now).
    auto kept = st.index->lift(m_info.sha256, st.files.file_path(m_info.sha256));
    stored = kept && *kept;
  }
  if (!stored) {
    RecordHeader header;
    header.length = m_size;
    const auto raw = blob_detail::raw_name(m_info.sha256);
    std::memcpy(header.sha256, raw.data(), raw.size());
    auto room = st.packs.reserve(sizeof header + m_size);
    if (!room) {
      m_placed->error = room.error();
    } else {
      m_placed->pack = room->first;
      m_placed->offset = room->second + sizeof header;
      if (m_size <= PackAppender::k_deferred_blob_max && st.packs.defer(m_size)) {
        m_placed->pending = true; // written by publish(), the buffer kept until then
        m_placed->header = header;
        return m_info;
      }
      iovec parts[2] = {{&header, sizeof header}, {m_buffer.data(), m_buffer.size()}};
      const size_t total = sizeof header + m_buffer.size();
      size_t done = 0;
      while (done < total) {
        // One pwritev for the record; a short write finishes piece by piece.
        ssize_t n;
        if (done == 0) {
          n = ::pwritev(room->first->fd(), parts, 2, static_cast<off_t>(room->second));
        } else {
          const char* p = done < sizeof header ? reinterpret_cast<const char*>(&header) + done
                                               : m_buffer.data() + (done - sizeof header);
          const size_t left = done < sizeof header ? sizeof header - done : total - done;
          n = ::pwrite(room->first->fd(), p, left, static_cast<off_t>(room->second + done));
        }
        if (n < 0 && errno == EINTR) {
          continue;
        }
        if (n <= 0) {
          m_placed->error = Error{ErrorKind::io, "write " + room->first->path().string() + ": " +
                                                     (n < 0 ? errno_text() : std::string("no progress"))};
          st.packs.abandon(room->first, room->second, total);
          m_placed->pack.reset();
          break;
        }
        done += static_cast<size_t>(n);
      }
    }
  }
  std::string().swap(m_buffer);
  return m_info;
}

Result<BlobInfo> BlobStore::Writer::commit() {
  const BlobInfo& info = seal();
  if (m_placed) {
    std::vector<Writer*> one{this};
    return std::move(m_store->publish(one).front());
  }
  if (::fsync(m_fd) != 0) {
    return make_error(ErrorKind::io, "fsync blob " + info.sha256 + ": " + errno_text());
  }
  std::vector<Result<BlobInfo>> out;
  out.push_back(link_into_place());
  m_store->upload_published(out);
  return std::move(out.front());
}

Result<BlobInfo> BlobStore::Writer::link_into_place() {
  const BlobInfo& info = seal();
  const fs::path dest = m_store->m_state->files.file_path(info.sha256);
  if (m_tmp.empty()) {
    // An O_TMPFILE file has no name until it is linked into place: no
    // rename across directories, no half-written file ever visible.
    const std::string proc = "/proc/self/fd/" + std::to_string(m_fd);
    for (int attempt = 0;; ++attempt) {
      if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, dest.c_str(), AT_SYMLINK_FOLLOW) == 0) {
        break;
      }
      if (errno != EEXIST) {
        return make_error(ErrorKind::io, "link blob into " + dest.string() + ": " + errno_text());
      }
      // Stored already: reuse that copy, unless garbage collection removed
      // it just now (then link this one).
      auto kept = m_store->m_state->index->lift(info.sha256, dest);
      if (!kept) {
        return tl::unexpected(kept.error());
      }
      if (*kept || attempt > 0) {
        break;
      }
    }
    ::close(m_fd);
    m_fd = -1;
    m_finished = true;
  } else {
    ::close(m_fd);
    m_fd = -1;
    std::error_code ec;
    auto kept = fs::exists(dest, ec) ? m_store->m_state->index->lift(info.sha256, dest) : Result<bool>(false);
    if (kept && *kept) {
      // Same bytes already stored (content addressing): keep the old copy.
      fs::remove(m_tmp, ec);
      m_finished = true;
      return info;
    }
    if (::rename(m_tmp.c_str(), dest.c_str()) != 0) {
      return make_error(ErrorKind::io, "rename into " + dest.string() + ": " + errno_text());
    }
    m_finished = true;
  }
  m_store->m_state->files.named(dest.parent_path());
  return info;
}

void BlobStore::Writer::write_pending(State& st, std::vector<Writer*>& writers) {
  std::vector<Writer*> pending;
  for (auto* w : writers) {
    if (w->m_placed && w->m_placed->pending) {
      pending.push_back(w);
    }
  }
  std::sort(pending.begin(), pending.end(), [](const Writer* a, const Writer* b) {
    return std::make_pair(a->m_placed->pack->id(), a->m_placed->offset) <
           std::make_pair(b->m_placed->pack->id(), b->m_placed->offset);
  });
  static const char k_padding[8] = {};
  constexpr size_t k_iov_max = 1020; // IOV_MAX is 1,024 on Linux
  for (size_t i = 0; i < pending.size();) {
    // A run: records of one pack, each where the one before ended (records
    // start at multiples of 8: the padding between them is written as
    // zeros, as a hole reads).
    Writer::Placed& first = *pending[i]->m_placed;
    const uint64_t start = first.offset - sizeof(RecordHeader);
    uint64_t end = start;
    std::vector<iovec> iov;
    size_t j = i;
    for (; j < pending.size() && iov.size() + 3 <= k_iov_max; ++j) {
      Writer::Placed& p = *pending[j]->m_placed;
      if (p.pack != first.pack || p.offset - sizeof(RecordHeader) != end) {
        break;
      }
      if (end % 8 != 0) { // the record before ended off the 8-byte grid
        const uint64_t pad = 8 - end % 8;
        iov.push_back({const_cast<char*>(k_padding), pad});
        end += pad;
        if (p.offset - sizeof(RecordHeader) != end) {
          break;
        }
      }
      iov.push_back({&p.header, sizeof(RecordHeader)});
      iov.push_back({pending[j]->m_buffer.data(), pending[j]->m_buffer.size()});
      end += sizeof(RecordHeader) + pending[j]->m_buffer.size();
    }
    // Writes [start, end), a short write resumed where it stopped.
    std::optional<Error> failed;
    uint64_t done = 0;
    size_t at = 0;
    while (at < iov.size()) {
      const ssize_t n = ::pwritev(first.pack->fd(), iov.data() + at, static_cast<int>(iov.size() - at),
                                  static_cast<off_t>(start + done));
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        failed = Error{ErrorKind::io, "write " + first.pack->path().string() + ": " +
                                          (n < 0 ? errno_text() : std::string("no progress"))};
        break;
      }
      done += static_cast<uint64_t>(n);
      size_t left = static_cast<size_t>(n);
      while (at < iov.size() && left >= iov[at].iov_len) {
        left -= iov[at].iov_len;
        ++at;
      }
      if (left > 0) {
        iov[at].iov_base = static_cast<char*>(iov[at].iov_base) + left;
        iov[at].iov_len -= left;
      }
    }
    for (size_t k = i; k < j; ++k) {
      Writer& w = *pending[k];
      Writer::Placed& p = *w.m_placed;
      if (failed) {
        p.error = failed;
        st.packs.abandon(p.pack, p.offset - sizeof(RecordHeader), sizeof(RecordHeader) + w.m_size);
        p.pack.reset();
      }
      p.pending = false;
      st.packs.undefer(w.m_size);
      std::string().swap(w.m_buffer);
    }
    i = j;
  }
}

std::vector<Result<BlobInfo>> BlobStore::Writer::publish_group(State& st, std::vector<Writer*>& writers) {
  std::vector<Result<BlobInfo>> out;
  out.reserve(writers.size());
  for (auto* w : writers) {
    out.emplace_back(w->seal());
  }
  write_pending(st, writers);
  // Packed blobs: one fdatasync per pack written, then one index
  // transaction names them all.
  std::vector<BlobPack*> packs;
  for (size_t i = 0; i < writers.size(); ++i) {
    const auto& placed = writers[i]->m_placed;
    if (placed && placed->error) {
      out[i] = tl::unexpected(*placed->error);
    } else if (placed && placed->pack &&
               std::find(packs.begin(), packs.end(), placed->pack.get()) == packs.end()) {
      packs.push_back(placed->pack.get());
    }
  }
  std::map<BlobPack*, std::string> unsynced;
  for (BlobPack* p : packs) {
    if (::fdatasync(p->fd()) != 0) {
      unsynced[p] = "fdatasync " + p->path().string() + ": " + errno_text();
    }
  }
  std::vector<std::pair<std::string, IndexValue>> entries;
  std::vector<size_t> indexed;
  for (size_t i = 0; i < writers.size(); ++i) {
    const auto& placed = writers[i]->m_placed;
    if (!placed || placed->error || !out[i]) {
      continue;
    }
    if (placed->pack) {
      if (auto u = unsynced.find(placed->pack.get()); u != unsynced.end()) {
        out[i] = make_error(ErrorKind::io, u->second);
        continue;
      }
      entries.emplace_back(out[i]->sha256, IndexValue{placed->pack->id(), 0, placed->offset, out[i]->length});
    }
    indexed.push_back(i);
  }
  if (!entries.empty()) {
    if (auto r = st.index->add(entries); !r) {
      for (size_t i : indexed) {
        out[i] = tl::unexpected(r.error());
      }
      indexed.clear();
    }
  }
  for (size_t i : indexed) {
    writers[i]->m_finished = true;
    writers[i]->m_placed.reset();
  }
  // File blobs: one sync of the whole file system makes every sealed blob's
  // bytes durable; only then are they given names.
  int synced_fd = -1;
  int rc = 0;
  std::string why;
  for (size_t i = 0; i < writers.size(); ++i) {
    Writer* w = writers[i];
    if (w->m_fd < 0 || w->m_finished) {
      continue;
    }
    if (synced_fd < 0) {
      synced_fd = w->m_fd;
      rc = ::syncfs(synced_fd);
      why = rc != 0 ? errno_text() : std::string();
    }
    if (rc != 0) {
      out[i] = make_error(ErrorKind::io, "syncfs for blob " + w->m_info.sha256 + ": " + why);
    } else {
      out[i] = w->link_into_place();
    }
  }
  return out;
}


} // namespace tributary::store

#include "sync_engine/store/blob_store.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <unordered_set>

namespace tributary::sync {

namespace fs = std::filesystem;

struct BlobStore::Dirty {
  std::mutex mutex;
  std::set<fs::path> dirs;
  // Blobs known to exist (blobs are never removed behind our back), so that
  // "is this content already here?" is a lookup, not a stat.
  std::unordered_set<std::string> known;
};

namespace {

std::string errno_text() { return std::strerror(errno); }

bool valid_name(const std::string& s) {
  if (s.size() != 64) {
    return false;
  }
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

Result<void> fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return make_error(ErrorKind::io, "open " + dir.string() + ": " + errno_text());
  }
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) {
    return make_error(ErrorKind::io, "fsync " + dir.string() + ": " + errno_text());
  }
  return {};
}

} // namespace

Result<std::shared_ptr<BlobStore>> BlobStore::open(const fs::path& root) {
  std::error_code ec;
  fs::create_directories(root / "blobs", ec);
  if (!ec) {
    fs::create_directories(root / "tmp", ec);
  }
  if (ec) {
    return make_error(ErrorKind::io, "cannot create blob store under " + root.string() + ": " + ec.message());
  }
  // One level of 256 directories, made once: creating directories on the
  // hot path cost more than writing the blobs (measured on ext4 here).
  static constexpr char k_hex[] = "0123456789abcdef";
  for (int i = 0; i < 256 && !ec; ++i) {
    fs::create_directories(root / "blobs" / std::string{k_hex[i >> 4], k_hex[i & 15]}, ec);
  }
  if (ec) {
    return make_error(ErrorKind::io, "cannot create blob store under " + root.string() + ": " + ec.message());
  }
  // Temporary files of a previous run that died are garbage.
  for (const auto& e : fs::directory_iterator(root / "tmp", ec)) {
    fs::remove(e.path(), ec);
  }
  // Sealed blobs wait open until their group is published: allow plenty of
  // descriptors (the soft limit is often 1024; the hard one much higher).
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max && rl.rlim_cur < 65536) {
    rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, 65536);
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  auto store = std::shared_ptr<BlobStore>(new BlobStore(root));
  store->m_dirty = std::make_shared<Dirty>();
  return store;
}

BlobStore::Writer::Writer(BlobStore& store, fs::path tmp, int fd, std::vector<rs::HashAlgorithm> algorithms)
    : m_store(&store), m_tmp(std::move(tmp)), m_fd(fd), m_algorithms(algorithms), m_hasher(algorithms) {}

BlobStore::Writer::Writer(Writer&& o) noexcept
    : m_store(o.m_store), m_tmp(std::move(o.m_tmp)), m_fd(o.m_fd), m_size(o.m_size),
      m_algorithms(std::move(o.m_algorithms)), m_hasher(std::move(o.m_hasher)), m_digests(std::move(o.m_digests)),
      m_finished(o.m_finished), m_info(std::move(o.m_info)) {
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
  if (m_fd >= 0) {
    ::close(m_fd);
  }
  if (!m_finished && !m_tmp.empty()) {
    std::error_code ec;
    fs::remove(m_tmp, ec);
  }
}

Result<void> BlobStore::Writer::write(const char* data, size_t size) {
  if (!m_digests.empty()) {
    return make_error(ErrorKind::usage, "blob writer: write after digests were taken");
  }
  m_hasher.update(data, size);
  while (size > 0) {
    ssize_t n = ::write(m_fd, data, size);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return make_error(ErrorKind::io, "write " + m_tmp.string() + ": " + errno_text());
    }
    data += n;
    size -= static_cast<size_t>(n);
    m_size += static_cast<uint64_t>(n);
  }
  return {};
}

std::vector<rs::HashValue> BlobStore::Writer::digests() {
  if (m_digests.empty()) {
    m_digests = m_hasher.finish();
  }
  return m_digests;
}

BlobInfo BlobStore::Writer::seal() {
  if (m_info.sha256.empty()) {
    m_info.hashes = digests();
    m_info.length = m_size;
    for (const auto& h : m_info.hashes) {
      if (h.known() == rs::HashAlgorithm::sha256) {
        m_info.sha256 = h.hex;
      }
    }
  }
  return m_info;
}

Result<BlobInfo> BlobStore::Writer::commit() {
  const BlobInfo info = seal();
  if (::fsync(m_fd) != 0) {
    return make_error(ErrorKind::io, "fsync blob " + info.sha256 + ": " + errno_text());
  }
  return link_into_place();
}

Result<BlobInfo> BlobStore::Writer::link_into_place() {
  const BlobInfo info = seal();
  auto dest = m_store->path_for(info.sha256);
  if (!dest) {
    return tl::unexpected(dest.error());
  }
  if (m_tmp.empty()) {
    // An O_TMPFILE file has no name until it is linked into place: no
    // rename across directories, no half-written file ever visible.
    const std::string proc = "/proc/self/fd/" + std::to_string(m_fd);
    if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, dest->c_str(), AT_SYMLINK_FOLLOW) != 0 && errno != EEXIST) {
      return make_error(ErrorKind::io, "link blob into " + dest->string() + ": " + errno_text());
    }
    ::close(m_fd);
    m_fd = -1;
    m_finished = true;
  } else {
    ::close(m_fd);
    m_fd = -1;
    std::error_code ec;
    if (fs::exists(*dest, ec)) {
      // Same bytes already stored (content addressing): keep the old copy.
      fs::remove(m_tmp, ec);
      m_finished = true;
      return info;
    }
    if (::rename(m_tmp.c_str(), dest->c_str()) != 0) {
      return make_error(ErrorKind::io, "rename into " + dest->string() + ": " + errno_text());
    }
    m_finished = true;
  }
  {
    std::lock_guard lock(m_store->m_dirty->mutex);
    m_store->m_dirty->dirs.insert(dest->parent_path());
    m_store->remember(info.sha256);
  }
  return info;
}

std::vector<Result<BlobInfo>> BlobStore::publish(std::vector<Writer*>& writers) {
  std::vector<Result<BlobInfo>> out;
  out.reserve(writers.size());
  if (writers.empty()) {
    return out;
  }
  for (auto* w : writers) {
    w->seal();
  }
  // One sync of the whole file system makes every sealed blob's bytes
  // durable; only then are they given names.
  int rc = ::syncfs(writers.front()->m_fd);
  const std::string why = rc != 0 ? errno_text() : std::string();
  for (auto* w : writers) {
    if (rc != 0) {
      out.push_back(make_error(ErrorKind::io, "syncfs for blob " + w->m_info.sha256 + ": " + why));
    } else {
      out.push_back(w->link_into_place());
    }
  }
  return out;
}

Result<BlobStore::Writer> BlobStore::begin(const std::vector<rs::HashAlgorithm>& extra) {
  static std::atomic<uint64_t> counter{0};
  std::vector<rs::HashAlgorithm> algorithms{rs::HashAlgorithm::sha256};
  for (auto a : extra) {
    if (a != rs::HashAlgorithm::sha256) {
      algorithms.push_back(a);
    }
  }
  // The unnamed file is made in one of the 256 directories in turn: ext4
  // allocates an inode near its directory, so this spreads allocation (and
  // its locks) over block groups instead of queueing on one.
  static constexpr char k_hex[] = "0123456789abcdef";
  const uint64_t spread = counter.fetch_add(1);
  const std::string sub{k_hex[(spread >> 4) & 15], k_hex[spread & 15]};
  int fd = ::open((m_root / "blobs" / sub).c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
  if (fd >= 0) {
    return Writer(*this, fs::path(), fd, algorithms);
  }
  // File systems without O_TMPFILE: a named temporary file, renamed later.
  fs::path tmp = m_root / "tmp" /
                 ("blob-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1)) + ".part");
  fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    return make_error(ErrorKind::io, "create " + tmp.string() + ": " + errno_text());
  }
  return Writer(*this, tmp, fd, algorithms);
}

Result<BlobInfo> BlobStore::put(std::string_view data, const std::vector<rs::HashAlgorithm>& extra) {
  auto w = begin(extra);
  if (!w) {
    return tl::unexpected(w.error());
  }
  if (auto r = w->write(data.data(), data.size()); !r) {
    return tl::unexpected(r.error());
  }
  return w->commit();
}

void BlobStore::remember(const std::string& sha256) {
  // Bounded: past the cap we simply stat again.
  if (m_dirty->known.size() < 4'000'000) {
    m_dirty->known.insert(sha256);
  }
}

bool BlobStore::contains(const std::string& sha256) const {
  {
    std::lock_guard lock(m_dirty->mutex);
    if (m_dirty->known.count(sha256)) {
      return true;
    }
  }
  auto p = path_for(sha256);
  std::error_code ec;
  if (!p || !fs::exists(*p, ec)) {
    return false;
  }
  std::lock_guard lock(m_dirty->mutex);
  const_cast<BlobStore*>(this)->remember(sha256);
  return true;
}

Result<fs::path> BlobStore::path_for(const std::string& sha256) const {
  if (!valid_name(sha256)) {
    return make_error(ErrorKind::usage, "'" + sha256 + "' is not a sha-256 blob name");
  }
  return m_root / "blobs" / sha256.substr(0, 2) / sha256;
}

Result<std::string> BlobStore::read(const std::string& sha256) const {
  auto p = path_for(sha256);
  if (!p) {
    return tl::unexpected(p.error());
  }
  std::ifstream in(*p, std::ios::binary);
  if (!in) {
    return make_error(ErrorKind::not_found, "blob " + sha256 + " is not in the store");
  }
  return std::string(std::istreambuf_iterator<char>(in), {});
}

Result<void> BlobStore::sync_directories() {
  std::set<fs::path> dirs;
  {
    std::lock_guard lock(m_dirty->mutex);
    dirs.swap(m_dirty->dirs);
  }
  if (dirs.empty()) {
    return {};
  }
  if (dirs.size() > 4) {
    // Many directories: one file-system sync beats one flush per directory.
    int fd = ::open((m_root / "blobs").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
      int rc = ::syncfs(fd);
      ::close(fd);
      if (rc == 0) {
        return {};
      }
    }
  }
  for (const auto& d : dirs) {
    if (auto r = fsync_dir(d); !r) {
      return r;
    }
  }
  return {};
}

} // namespace tributary::sync

// The blob store as its callers see it: opening a root, writing and
// reading blobs, and the operations of its rooms (the index, the pack
// appender, the directories of file blobs, the remote tier) put together.
#include "store/blob/blob_internal.h"

#include "common/temp_files.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <map>
#include <mutex>
#include <numeric>
#include <unordered_map>

namespace tributary::store {

namespace fs = std::filesystem;
using blob_detail::errno_text;
using blob_detail::pack_path;
using blob_detail::valid_name;

Result<std::shared_ptr<BlobStore>> BlobStore::open(const fs::path& root, uint64_t pack_bytes) {
  std::error_code ec;
  for (const char* sub : {"blobs", "tmp", "packs", "index"}) {
    if (!ec) {
      fs::create_directories(root / sub, ec);
    }
  }
  if (ec) {
    return make_error(ErrorKind::io, "cannot create blob store under " + root.string() + ": " + ec.message());
  }
  // Sealed file blobs wait open until their group is published: allow
  // plenty of descriptors (the soft limit is often 1024; the hard one much
  // higher).
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max && rl.rlim_cur < 65536) {
    rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, 65536);
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }

  // LMDB must not be opened twice by one process: stores of one root share
  // their state.
  static std::mutex registry_mutex;
  static std::map<fs::path, std::weak_ptr<State>> registry;
  fs::path key = fs::weakly_canonical(root, ec);
  if (ec) {
    key = fs::absolute(root);
  }
  std::lock_guard lock(registry_mutex);
  auto store = std::shared_ptr<BlobStore>(new BlobStore(root));
  if (auto it = registry.find(key); it != registry.end()) {
    if (auto state = it->second.lock()) {
      store->m_state = std::move(state);
      return store;
    }
  }
  // Temporary blob files of processes that died are garbage; those of a
  // live process, and every other kind of file (a daemon's spooled
  // documents and dump packages share this directory), are not ours.
  remove_orphaned_temp_files(root / "tmp", {"blob"});
  auto index = blob_detail::BlobIndex::open(root / "index");
  if (!index) {
    return tl::unexpected(index.error());
  }
  auto state = std::shared_ptr<State>(new State{root, std::move(*index), blob_detail::PackAppender(root, pack_bytes),
                                                blob_detail::BlobDirectories(root), {}});
  registry[key] = state;
  store->m_state = std::move(state);
  return store;
}


Result<BlobStore::Writer> BlobStore::begin(const std::vector<rs::HashAlgorithm>& extra) {
  std::vector<rs::HashAlgorithm> algorithms{rs::HashAlgorithm::sha256};
  for (auto a : extra) {
    if (a != rs::HashAlgorithm::sha256) {
      algorithms.push_back(a);
    }
  }
  return Writer(*this, algorithms);
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

Result<BlobInfo> BlobStore::put_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    return make_error(ErrorKind::io, file.string() + ": cannot be read");
  }
  auto w = begin();
  if (!w) {
    return tl::unexpected(w.error());
  }
  std::vector<char> chunk(1 << 20);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    if (in.gcount() > 0) {
      if (auto r = w->write(chunk.data(), static_cast<size_t>(in.gcount())); !r) {
        return tl::unexpected(r.error());
      }
    }
  }
  if (in.bad()) {
    return make_error(ErrorKind::io, file.string() + ": cannot be read");
  }
  return w->commit();
}

bool BlobStore::contains(const std::string& sha256) const { return locate(sha256).has_value(); }

Result<BlobLocation> BlobStore::locate(const std::string& sha256) const {
  auto here = locate_here(sha256);
  if (here || here.error().kind != ErrorKind::not_found) {
    return here;
  }
  std::shared_ptr<RemoteTier> remote = m_state->remote.tier();
  if (!remote) {
    return here;
  }
  // A const store fills its cache: the state is shared, the bytes are
  // verified against their name before they are named.
  auto stored = [this](const std::string& sha) { return locate_here(sha).has_value(); };
  if (auto r = m_state->remote.fetch(const_cast<BlobStore&>(*this), *remote, sha256, stored); !r) {
    return tl::unexpected(r.error());
  }
  return locate_here(sha256);
}

std::vector<Result<BlobLocation>> BlobStore::locate_many(const std::vector<std::string>& sha256s) const {
  std::vector<size_t> order(sha256s.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sha256s[a] < sha256s[b]; });
  std::vector<Result<BlobLocation>> out(sha256s.size());
  std::unordered_map<uint32_t, fs::path> packs; // a pack's path, spelled once
  for (const size_t i : order) {
    const std::string& sha256 = sha256s[i];
    auto found = valid_name(sha256) ? m_state->index->lookup(sha256) : Result<std::optional<blob_detail::IndexValue>>{};
    if (found && *found) {
      auto [at, added] = packs.try_emplace((*found)->pack);
      if (added) {
        at->second = pack_path(m_root, (*found)->pack);
      }
      out[i] = BlobLocation{at->second, (*found)->offset, (*found)->length};
    } else {
      out[i] = locate(sha256); // a file, the bucket, or the reason why not
    }
  }
  return out;
}

Result<BlobLocation> BlobStore::locate_here(const std::string& sha256) const {
  if (!valid_name(sha256)) {
    return make_error(ErrorKind::usage, "'" + sha256 + "' is not a sha-256 blob name");
  }
  auto found = m_state->index->lookup(sha256);
  if (!found) {
    return tl::unexpected(found.error());
  }
  if (*found) {
    return BlobLocation{pack_path(m_root, (*found)->pack), (*found)->offset, (*found)->length};
  }
  // Larger blobs (and every blob of a store written before packs) are files.
  const fs::path p = m_state->files.file_path(sha256);
  struct stat st {};
  if (::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    return BlobLocation{p, 0, static_cast<uint64_t>(st.st_size)};
  }
  return make_error(ErrorKind::not_found, "blob " + sha256 + " is not in the store");
}

Result<std::string> BlobStore::read(const std::string& sha256) const {
  auto where = locate(sha256);
  if (!where) {
    return tl::unexpected(where.error());
  }
  const int fd = ::open(where->file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return make_error(ErrorKind::io, "open " + where->file.string() + ": " + errno_text());
  }
  std::string out(where->length, '\0');
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(where->offset + done));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      const std::string why = n < 0 ? errno_text() : std::string("the file ends early");
      ::close(fd);
      return make_error(ErrorKind::io, "read blob " + sha256 + " from " + where->file.string() + ": " + why);
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return out;
}


Result<BlobLocation> BlobStore::retain(const std::string& sha256) {
  auto where = locate(sha256);
  if (!where) {
    return where;
  }
  auto kept = m_state->index->lift(sha256, m_state->files.file_path(sha256));
  if (!kept) {
    return tl::unexpected(kept.error());
  }
  if (!*kept) {
    return make_error(ErrorKind::not_found, "blob " + sha256 + " is not in the store");
  }
  return locate(sha256); // where it is now (repack() may have moved it)
}

std::vector<Result<BlobInfo>> BlobStore::publish(std::vector<Writer*>& writers, std::vector<std::string>* deferred) {
  auto out = Writer::publish_group(*m_state, writers);
  upload_published(out, deferred);
  return out;
}

Result<void> BlobStore::upload(const std::vector<std::string>& sha256s) const {
  std::shared_ptr<RemoteTier> remote = m_state->remote.tier();
  if (!remote || sha256s.empty()) {
    return {};
  }
  std::vector<RemoteTier::Upload> uploads;
  for (const auto& sha : sha256s) {
    auto where = locate_here(sha);
    if (!where) {
      return tl::unexpected(where.error());
    }
    uploads.push_back(RemoteTier::Upload{BlobInfo{sha, where->length, {}}, *where});
  }
  return remote->upload(uploads);
}

void BlobStore::upload_published(std::vector<Result<BlobInfo>>& out, std::vector<std::string>* deferred) const {
  std::shared_ptr<RemoteTier> remote = m_state->remote.tier();
  if (!remote || blob_detail::BlobRemote::filling()) {
    return;
  }
  if (deferred) {
    for (const auto& r : out) {
      if (r) {
        deferred->push_back(r->sha256);
      }
    }
    return;
  }
  std::vector<RemoteTier::Upload> uploads;
  std::vector<size_t> which;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i]) {
      continue;
    }
    auto where = locate_here(out[i]->sha256);
    if (!where) {
      out[i] = tl::unexpected(where.error());
      continue;
    }
    uploads.push_back(RemoteTier::Upload{*out[i], *where});
    which.push_back(i);
  }
  if (uploads.empty()) {
    return;
  }
  if (auto r = remote->upload(uploads); !r) {
    for (size_t i : which) {
      out[i] = tl::unexpected(r.error());
    }
  }
}

void BlobStore::set_remote(std::shared_ptr<RemoteTier> tier) { m_state->remote.set(std::move(tier)); }

bool BlobStore::has_remote() const { return m_state->remote.tier() != nullptr; }

std::shared_ptr<RemoteTier> BlobStore::remote() const { return m_state->remote.tier(); }

Result<void> BlobStore::sync_directories() { return m_state->files.sync(); }

std::optional<BlobName> BlobStore::name_of(const std::string& sha256) {
  if (!valid_name(sha256)) {
    return std::nullopt;
  }
  return blob_detail::raw_name(sha256);
}

Result<void> BlobStore::for_each_blob(const std::function<void(const BlobName&, uint64_t)>& fn) const {
  return blob_detail::for_each_blob(*m_state->index, m_root, fn);
}

Result<uint64_t> BlobStore::condemn(const std::vector<BlobName>& names, int64_t at) {
  return m_state->index->condemn(names, at);
}

Result<std::vector<std::pair<BlobName, int64_t>>> BlobStore::condemned() const { return m_state->index->condemned(); }

Result<uint64_t> BlobStore::pardon(const std::vector<BlobName>& names) { return m_state->index->pardon(names); }

Result<RemoveReport> BlobStore::remove_condemned(const std::vector<BlobName>& names) {
  return blob_detail::remove_blobs(*m_state->index, m_state->files, names, /*only_condemned=*/true);
}

Result<RemoveReport> BlobStore::evict(const std::vector<BlobName>& names) {
  return blob_detail::remove_blobs(*m_state->index, m_state->files, names, /*only_condemned=*/false);
}

Result<RepackReport> BlobStore::repack(double live_below) {
  return blob_detail::repack_packs(*m_state->index, m_state->packs, m_root, live_below);
}

Result<BlobCheck> BlobStore::check(bool reindex) { return blob_detail::check_store(*m_state->index, m_root, reindex); }

} // namespace tributary::store

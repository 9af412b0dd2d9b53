// Opening the blob store, and reading it: locate, read, retain.
#include "store/blob/blob_internal.h"

#include <fstream>

namespace tributary::store {

using namespace blob_detail;

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
  auto state = std::make_shared<State>();
  state->root = root;
  state->pack_bytes = std::max<uint64_t>(pack_bytes, 1);
  auto fail = [&](int rc) {
    return make_error(ErrorKind::io, "cannot open the blob index " + (root / "index").string() + ": " + lmdb_text(rc));
  };
  if (int rc = mdb_env_create(&state->env); rc != 0) {
    state->env = nullptr;
    return fail(rc);
  }
  // Read transactions are short and taken from any thread (MDB_NOTLS); the
  // map is address space, not memory: the file grows as entries arrive.
  mdb_env_set_maxreaders(state->env, 1024);
  mdb_env_set_maxdbs(state->env, 4);
  mdb_env_set_mapsize(state->env, size_t{256} << 30);
  // MDB_NORDAHEAD: lookups are random (names are hashes); it also turns
  // off fault-around, which mapped 16 pages a lookup.
  if (int rc = mdb_env_open(state->env, (root / "index").c_str(), MDB_NOTLS | MDB_NORDAHEAD, 0644); rc != 0) {
    return fail(rc);
  }
  state->map = State::find_map(root / "index" / "data.mdb");
  if (state->map) {
    state->start_releaser();
  }
  int stale = 0;
  mdb_reader_check(state->env, &stale); // reader slots of processes that died
  MDB_txn* txn = nullptr;
  if (int rc = mdb_txn_begin(state->env, nullptr, 0, &txn); rc != 0) {
    return fail(rc);
  }
  if (int rc = mdb_dbi_open(txn, nullptr, 0, &state->dbi); rc != 0) {
    mdb_txn_abort(txn);
    return fail(rc);
  }
  // Garbage collection's marks, beside the index so that one transaction
  // sees both (a named database is a key of the unnamed one: readers of the
  // index skip keys that are not 32 bytes long).
  if (int rc = mdb_dbi_open(txn, "condemned", MDB_CREATE, &state->condemned_dbi); rc != 0) {
    mdb_txn_abort(txn);
    return fail(rc);
  }
  if (int rc = mdb_txn_commit(txn); rc != 0) {
    return fail(rc);
  }
  for (const auto& e : fs::directory_iterator(root / "packs", ec)) {
    const std::string name = e.path().filename().string();
    unsigned id = 0;
    if (std::sscanf(name.c_str(), "%10u.pack", &id) == 1 && id >= state->next_pack) {
      state->next_pack = id + 1;
    }
  }
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

fs::path BlobStore::file_path(const std::string& sha256) const {
  return blob_dir(sha256.substr(0, 2)) / sha256;
}

// One level of 256 directories, each made the first time a blob needs it
// (once a process: a flag per directory). Making all 256 when the store
// opened cost 60 ms of a 10,000-resource baseline on a fresh ext4, whose
// small blobs all go to packs; making one on the hot path for every blob
// cost more than writing it.
fs::path BlobStore::blob_dir(const std::string& sub) const {
  fs::path dir = m_root / "blobs" / sub;
  const auto digit = [](char c) { return c >= 'a' ? c - 'a' + 10 : c - '0'; };
  if (sub.size() != 2 || !m_state) {
    return dir;
  }
  std::atomic<bool>& made = m_state->made[static_cast<size_t>(digit(sub[0]) * 16 + digit(sub[1])) & 255];
  if (!made.load(std::memory_order_acquire)) {
    if (::mkdir(dir.c_str(), 0755) == 0) {
      // Durable before a blob is named in it.
      if (int fd = ::open((m_root / "blobs").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); fd >= 0) {
        ::fsync(fd);
        ::close(fd);
      }
    }
    made.store(true, std::memory_order_release);
  }
  return dir;
}

Result<BlobLocation> BlobStore::locate(const std::string& sha256) const {
  auto here = locate_here(sha256);
  if (here || here.error().kind != ErrorKind::not_found) {
    return here;
  }
  std::shared_ptr<RemoteTier> remote;
  {
    std::lock_guard lock(m_state->mutex);
    remote = m_state->remote;
  }
  if (!remote) {
    return here;
  }
  if (auto r = fetch_remote(*remote, sha256); !r) {
    return tl::unexpected(r.error());
  }
  return locate_here(sha256);
}

Result<BlobLocation> BlobStore::locate_here(const std::string& sha256) const {
  if (!valid_name(sha256)) {
    return make_error(ErrorKind::usage, "'" + sha256 + "' is not a sha-256 blob name");
  }
  auto found = m_state->lookup(sha256);
  if (!found) {
    return tl::unexpected(found.error());
  }
  if (*found) {
    return BlobLocation{pack_path(m_root, (*found)->pack), (*found)->offset, (*found)->length};
  }
  // Larger blobs (and every blob of a store written before packs) are files.
  const fs::path p = file_path(sha256);
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
  auto kept = m_state->lift(sha256, file_path(sha256));
  if (!kept) {
    return tl::unexpected(kept.error());
  }
  if (!*kept) {
    return make_error(ErrorKind::not_found, "blob " + sha256 + " is not in the store");
  }
  return locate(sha256); // where it is now (repack() may have moved it)
}

} // namespace tributary::store

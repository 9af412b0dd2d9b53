// The blob store's side of garbage collection: condemn, pardon, remove,
// evict, and repack (the rewrite of packs mostly dead).
#include "store/blob/blob_internal.h"

namespace tributary::store {

using namespace blob_detail;

std::optional<BlobName> BlobStore::name_of(const std::string& sha256) {
  if (!valid_name(sha256)) {
    return std::nullopt;
  }
  return raw_name(sha256);
}

Result<void> BlobStore::for_each_blob(const std::function<void(const BlobName&, uint64_t)>& fn) const {
  if (int rc = scan_index(m_state->env, m_state->dbi, [&](const BlobName& n, const IndexValue& iv) { fn(n, iv.length); });
      rc != 0) {
    return make_error(ErrorKind::io, "blob index under " + m_root.string() + ": " + lmdb_text(rc));
  }
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(m_root / "blobs", ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    auto name = it->is_regular_file(ec) ? name_of(it->path().filename().string()) : std::nullopt;
    if (name) {
      fn(*name, it->file_size(ec));
    }
  }
  if (ec) {
    return make_error(ErrorKind::io, "list " + (m_root / "blobs").string() + ": " + ec.message());
  }
  return {};
}

Result<uint64_t> BlobStore::condemn(const std::vector<BlobName>& names, int64_t at) {
  uint64_t marked = 0;
  for (size_t from = 0; from < names.size(); from += 10000) {
    Txn t;
    int rc = mdb_txn_begin(m_state->env, nullptr, 0, &t.txn);
    for (size_t i = from; rc == 0 && i < std::min(names.size(), from + 10000); ++i) {
      MDB_val k{32, const_cast<unsigned char*>(names[i].data())};
      MDB_val v{sizeof at, &at};
      rc = mdb_put(t.txn, m_state->condemned_dbi, &k, &v, MDB_NOOVERWRITE);
      if (rc == 0) {
        ++marked;
      } else if (rc == MDB_KEYEXIST) {
        rc = 0;
      }
    }
    if (rc == 0) {
      rc = t.commit();
    }
    if (rc != 0) {
      return make_error(ErrorKind::io, "blob index under " + m_root.string() + ": " + lmdb_text(rc));
    }
  }
  return marked;
}

Result<std::vector<std::pair<BlobName, int64_t>>> BlobStore::condemned() const {
  std::vector<std::pair<BlobName, int64_t>> out;
  const int rc = scan(m_state->env, m_state->condemned_dbi, [&](const MDB_val& k, const MDB_val& v) {
    if (k.mv_size == 32 && v.mv_size == sizeof(int64_t)) {
      std::pair<BlobName, int64_t> e;
      std::memcpy(e.first.data(), k.mv_data, 32);
      std::memcpy(&e.second, v.mv_data, sizeof e.second);
      out.push_back(e);
    }
  });
  if (rc != 0) {
    return make_error(ErrorKind::io, "blob index under " + m_root.string() + ": " + lmdb_text(rc));
  }
  return out;
}

Result<uint64_t> BlobStore::pardon(const std::vector<BlobName>& names) {
  uint64_t lifted = 0;
  Txn t;
  int rc = mdb_txn_begin(m_state->env, nullptr, 0, &t.txn);
  for (size_t i = 0; rc == 0 && i < names.size(); ++i) {
    MDB_val k{32, const_cast<unsigned char*>(names[i].data())};
    rc = mdb_del(t.txn, m_state->condemned_dbi, &k, nullptr);
    if (rc == 0) {
      ++lifted;
    } else if (rc == MDB_NOTFOUND) {
      rc = 0;
    }
  }
  if (rc == 0) {
    rc = t.commit();
  }
  if (rc != 0) {
    return make_error(ErrorKind::io, "blob index under " + m_root.string() + ": " + lmdb_text(rc));
  }
  return lifted;
}

Result<RemoveReport> BlobStore::remove_condemned(const std::vector<BlobName>& names) {
  return remove(names, /*only_condemned=*/true);
}

Result<RemoveReport> BlobStore::evict(const std::vector<BlobName>& names) {
  return remove(names, /*only_condemned=*/false);
}

Result<RemoveReport> BlobStore::remove(const std::vector<BlobName>& names, bool only_condemned) {
  RemoveReport out;
  std::set<fs::path> dirs;
  for (size_t from = 0; from < names.size(); from += 10000) {
    // One transaction per slice: it holds LMDB's writer lock, which every
    // writer reusing a blob (lift) and every index commit waits for.
    Txn t;
    RemoveReport slice;
    int rc = mdb_txn_begin(m_state->env, nullptr, 0, &t.txn);
    for (size_t i = from; rc == 0 && i < std::min(names.size(), from + 10000); ++i) {
      MDB_val k{32, const_cast<unsigned char*>(names[i].data())};
      MDB_val v{};
      rc = mdb_get(t.txn, m_state->condemned_dbi, &k, &v);
      if (rc == MDB_NOTFOUND) {
        rc = 0;
        if (only_condemned) {
          continue; // lifted since: a writer reuses it
        }
      } else if (rc == 0) {
        rc = mdb_del(t.txn, m_state->condemned_dbi, &k, nullptr);
      }
      if (rc == 0) {
        rc = mdb_get(t.txn, m_state->dbi, &k, &v);
        if (rc == 0 && v.mv_size == sizeof(IndexValue)) {
          IndexValue iv;
          std::memcpy(&iv, v.mv_data, sizeof iv);
          rc = mdb_del(t.txn, m_state->dbi, &k, nullptr);
          ++slice.blobs;
          slice.bytes += iv.length;
        } else if (rc == MDB_NOTFOUND) {
          rc = 0;
        }
      }
      if (rc == 0) {
        // A file blob is unlinked inside the transaction: a writer's lift
        // either ran before (and the mark was gone) or runs after and
        // finds the file gone.
        const fs::path f = file_path(hex_of(names[i].data(), 32));
        struct stat st {};
        if (::stat(f.c_str(), &st) == 0 && ::unlink(f.c_str()) == 0) {
          ++slice.blobs;
          slice.bytes += static_cast<uint64_t>(st.st_size);
          dirs.insert(f.parent_path());
        }
      }
    }
    if (rc == 0) {
      rc = t.commit();
    }
    if (rc != 0) {
      return make_error(ErrorKind::io, "blob index under " + m_root.string() + ": " + lmdb_text(rc));
    }
    out.blobs += slice.blobs;
    out.bytes += slice.bytes;
  }
  return out;
}

namespace {

// Moves the index of the records copied out of pack `from` to their new
// places: only entries that still name that pack's record (a collection
// may have removed some since). An LMDB error code, 0 when committed.
int move_index(MDB_env* env, MDB_dbi dbi, uint32_t from,
               const std::vector<std::pair<BlobName, IndexValue>>& moved) {
  Txn t;
  int rc = mdb_txn_begin(env, nullptr, 0, &t.txn);
  for (size_t i = 0; rc == 0 && i < moved.size(); ++i) {
    MDB_val k{32, const_cast<unsigned char*>(moved[i].first.data())};
    MDB_val v{};
    rc = mdb_get(t.txn, dbi, &k, &v);
    if (rc == MDB_NOTFOUND) {
      rc = 0;
      continue;
    }
    IndexValue now;
    if (rc == 0 && v.mv_size == sizeof now) {
      std::memcpy(&now, v.mv_data, sizeof now);
      if (now.pack == from) {
        MDB_val nv{sizeof(IndexValue), const_cast<IndexValue*>(&moved[i].second)};
        rc = mdb_put(t.txn, dbi, &k, &nv, 0);
      }
    }
  }
  if (rc == 0) {
    rc = t.commit();
  }
  return rc;
}

} // namespace

Result<RepackReport> BlobStore::repack(double live_below) {
  RepackReport out;
  auto index_error = [&](int rc) {
    return make_error(ErrorKind::io, "blob index under " + m_root.string() + ": " + lmdb_text(rc));
  };
  // Live bytes per pack, from the index.
  std::map<uint32_t, uint64_t> live;
  if (int rc = scan_index(m_state->env, m_state->dbi, [&](const BlobName&, const IndexValue& iv) {
        live[iv.pack] += sizeof(RecordHeader) + ((iv.length + 7) & ~uint64_t{7});
      });
      rc != 0) {
    return index_error(rc);
  }
  const std::vector<std::pair<uint32_t, fs::path>> packs = list_packs(m_root);
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
    if (int rc = scan_index(m_state->env, m_state->dbi, [&](const BlobName& name, const IndexValue& iv) {
          if (iv.pack == id) {
            records.emplace_back(name, iv);
          }
        });
        rc != 0) {
      ::close(fd);
      return index_error(rc);
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
      auto room = m_state->reserve(sizeof header + iv.length);
      if (!room) {
        ::close(fd);
        return tl::unexpected(room.error());
      }
      iovec parts[2] = {{&header, sizeof header}, {bytes.data(), bytes.size()}};
      const ssize_t n = ::pwritev(room->first->fd, parts, 2, static_cast<off_t>(room->second));
      if (n != static_cast<ssize_t>(sizeof header + bytes.size())) {
        const std::string why = n < 0 ? errno_text() : std::string("short write");
        m_state->abandon(room->first, room->second, sizeof header + bytes.size());
        ::close(fd);
        return make_error(ErrorKind::io, "write " + room->first->path.string() + ": " + why);
      }
      if (std::find(written.begin(), written.end(), room->first) == written.end()) {
        written.push_back(room->first);
      }
      moved.emplace_back(name, IndexValue{room->first->id, 0, room->second + sizeof header, iv.length});
      moved_bytes += iv.length;
    }
    for (const auto& p : written) {
      if (::fdatasync(p->fd) != 0) {
        ::close(fd);
        return make_error(ErrorKind::io, "fdatasync " + p->path.string() + ": " + errno_text());
      }
    }
    const int rc = move_index(m_state->env, m_state->dbi, id, moved);
    if (rc != 0) {
      ::close(fd);
      return index_error(rc);
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
    if (auto r = fsync_dir(m_root / "packs"); !r) {
      return tl::unexpected(r.error());
    }
  }
  return out;
}


} // namespace tributary::store

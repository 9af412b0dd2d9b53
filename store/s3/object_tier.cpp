#include "store/s3/object_tier.h"

#include "resourcesync/hash.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <atomic>
#include <set>
#include <thread>
#include <vector>

namespace tributary::store {

namespace {

Result<void> read_range(const BlobLocation& where, std::string& out) {
  const int fd = ::open(where.file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return make_error(ErrorKind::io, "open " + where.file.string() + ": " + std::strerror(errno));
  }
  const size_t start = out.size();
  out.resize(start + where.length);
  size_t done = 0;
  while (done < where.length) {
    const ssize_t n = ::pread(fd, out.data() + start + done, where.length - done,
                              static_cast<off_t>(where.offset + done));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      ::close(fd);
      return make_error(ErrorKind::io, "read " + where.file.string() + ": " +
                                           (n < 0 ? std::strerror(errno) : "the file ends early"));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return {};
}

} // namespace

ObjectTier::ObjectTier(S3Config s3, std::shared_ptr<ObjectIndex> index, uint64_t pack_object_bytes)
    : m_client(std::move(s3)), m_pack_object_bytes(pack_object_bytes), m_db(std::move(index)) {}

ObjectTier::~ObjectTier() = default;

Result<std::shared_ptr<ObjectTier>> ObjectTier::open(S3Config s3, std::shared_ptr<ObjectIndex> index,
                                                     uint64_t pack_object_bytes) {
  std::shared_ptr<ObjectTier> tier(new ObjectTier(std::move(s3), std::move(index), pack_object_bytes));
  if (auto r = tier->m_client.create_bucket(); !r) {
    return tl::unexpected(Error{r.error().kind, "content store: bucket '" + tier->m_client.config().bucket +
                                                    "': " + r.error().message});
  }
  auto checked = tier->m_db->check();
  if (!checked) {
    return tl::unexpected(Error{checked.error().kind, checked.error().message + " (run `tributary migrate`)"});
  }
  return tier;
}

ObjectTier::Counters ObjectTier::counters() const {
  std::lock_guard lock(m_counters_mutex);
  return m_counters;
}


Result<void> ObjectTier::upload(const std::vector<Upload>& blobs) {
  std::vector<std::string> names;
  std::set<std::string> unique;
  for (const auto& b : blobs) {
    if (unique.insert(b.info.sha256).second) {
      names.push_back(b.info.sha256);
    }
  }
  // One transaction from the lookup to the rows: it holds each object's
  // lock (shared) from before its PUT until the rows naming it commit. A
  // broken connection runs it all again (the PUTs are idempotent).
  Result<void> failed;
  Counters add;
  auto r = m_db->with("upload", [&](ObjectIndex::Work& tx) {
    failed = {};
    add = Counters{};
    // What the bucket already has (another node's, or an earlier run's);
    // a row the collection marked counts as absent: the blob goes up again
    // and the mark is cleared.
    const std::set<std::string> known = tx.known(names);
    add.blobs_known = known.size();
    // The rest: small ones packed, large ones alone. Rows only after PUTs.
    std::vector<ObjectIndex::Row> rows;
    std::string pack;
    std::vector<std::pair<std::string, uint64_t>> in_pack; // (sha, offset)
    std::vector<uint64_t> in_pack_length;
    auto put_pack = [&]() -> Result<void> {
      if (in_pack.empty()) {
        return {};
      }
      const std::string sha = rs::hash_hex(rs::HashAlgorithm::sha256, pack);
      const std::string key = "packs/" + sha;
      tx.lock_object(key, false);
      if (auto p = m_client.put(key, pack, sha); !p) {
        return p;
      }
      ++add.objects_put;
      add.bytes_put += pack.size();
      for (size_t k = 0; k < in_pack.size(); ++k) {
        rows.push_back({in_pack[k].first, {key, in_pack[k].second, in_pack_length[k]}});
      }
      pack.clear();
      in_pack.clear();
      in_pack_length.clear();
      return {};
    };
    std::set<std::string> done;
    std::vector<const Upload*> large;
    for (const auto& b : blobs) {
      if (known.count(b.info.sha256) || !done.insert(b.info.sha256).second) {
        continue;
      }
      ++add.blobs_uploaded;
      if (b.where.length > BlobStore::k_pack_max) {
        large.push_back(&b);
        continue;
      }
      if (!pack.empty() && pack.size() + b.where.length > m_pack_object_bytes) {
        if (failed = put_pack(); !failed) {
          return;
        }
      }
      in_pack.emplace_back(b.info.sha256, pack.size());
      in_pack_length.push_back(b.where.length);
      if (failed = read_range(b.where, pack); !failed) {
        return;
      }
    }
    if (failed = put_pack(); !failed) {
      return;
    }
    // Larger blobs, an object each, four PUTs at a time (one at a time, a
    // batch of 10 MB resources went up at about half the local rate).
    if (!large.empty()) {
      for (const Upload* b : large) {
        tx.lock_object("blobs/" + b->info.sha256, false);
      }
      std::vector<Result<void>> put(large.size());
      std::atomic<size_t> next{0};
      auto work = [&] {
        for (size_t k = next++; k < large.size(); k = next++) {
          const Upload& b = *large[k];
          put[k] = m_client.put_file("blobs/" + b.info.sha256, b.where.file, b.where.offset, b.where.length,
                                     b.info.sha256);
        }
      };
      std::vector<std::thread> threads;
      for (size_t t = 1; t < std::min<size_t>(4, large.size()); ++t) {
        threads.emplace_back(work);
      }
      work();
      for (auto& t : threads) {
        t.join();
      }
      for (size_t k = 0; k < large.size(); ++k) {
        if (failed = put[k]; !failed) {
          return;
        }
        ++add.objects_put;
        add.bytes_put += large[k]->where.length;
        rows.push_back({large[k]->info.sha256, {"blobs/" + large[k]->info.sha256, 0, large[k]->where.length}});
      }
    }
    tx.name(rows);
  });
  if (!r) {
    return r;
  }
  if (!failed) {
    return failed;
  }
  std::lock_guard lock(m_counters_mutex);
  m_counters.objects_put += add.objects_put;
  m_counters.bytes_put += add.bytes_put;
  m_counters.blobs_uploaded += add.blobs_uploaded;
  m_counters.blobs_known += add.blobs_known;
  return {};
}

Result<ObjectTier::Collected> ObjectTier::collect(std::chrono::seconds grace, bool dry_run) {
  // 1. The rows.
  auto rows = m_db->collect_rows(grace, dry_run);
  if (!rows) {
    return tl::unexpected(rows.error());
  }
  Collected out;
  static_cast<ObjectIndex::Collected&>(out) = *rows;
  if (dry_run) {
    return out;
  }
  // 2. The objects no row names: each under its key's lock, exclusive,
  //    checked again; one whose DELETE fails stays listed for next time.
  auto dead = m_db->dead_objects();
  if (!dead) {
    return tl::unexpected(dead.error());
  }
  for (const auto& key : *dead) {
    Result<void> removed;
    auto r = m_db->with("delete an object", [&](ObjectIndex::Work& tx) {
      tx.lock_object(key, true);
      if (tx.names_object(key)) {
        ++out.objects_kept; // an uploader put it again and named it
      } else if (removed = m_client.remove(key); !removed) {
        return;
      } else {
        ++out.objects_deleted;
      }
      tx.forget_dead(key);
    });
    if (!r || !removed) {
      out.problems.push_back(key + ": " + (!r ? r.error().message : removed.error().message));
    }
  }
  return out;
}

Result<std::optional<ObjectTier::Place>> ObjectTier::find(const std::string& sha256) { return m_db->find(sha256); }

Result<void> ObjectTier::download(const std::string& sha256, const std::function<bool(const char*, size_t)>& sink) {
  auto place = find(sha256);
  if (!place) {
    return tl::unexpected(place.error());
  }
  if (!*place) {
    return make_error(ErrorKind::not_found, "blob " + sha256 + " is neither here nor in the bucket");
  }
  {
    std::lock_guard lock(m_counters_mutex);
    ++m_counters.ranges_read;
  }
  return m_client.get((*place)->object, (*place)->offset, (*place)->length, sink);
}

Result<bool> ObjectTier::download_group(const std::string& sha256, const KeepGroup& keep) {
  auto place = find(sha256);
  if (!place) {
    return tl::unexpected(place.error());
  }
  if (!*place || (*place)->object.rfind("packs/", 0) != 0) {
    return false; // missing (download() says so), or a large blob's own object
  }
  const std::string object = (*place)->object;
  std::vector<Neighbour> group;
  std::vector<Place> members;
  uint64_t end = 0;
  auto rows = m_db->members(object);
  if (!rows) {
    return tl::unexpected(rows.error());
  }
  for (auto& row : *rows) {
    group.push_back(Neighbour{row.sha256, {}});
    members.push_back(row.place);
    end = std::max(end, row.place.offset + row.place.length);
  }
  if (group.size() < 2 || end > k_group_read_max) {
    return false;
  }
  {
    std::unique_lock lock(m_group_mutex);
    if (m_group_reads.count(object)) {
      // Another thread reads and keeps this object's blobs.
      m_group_cv.wait(lock, [&] { return m_group_reads.count(object) == 0; });
      return true;
    }
    m_group_reads.insert(object);
  }
  auto done = [&] {
    {
      std::lock_guard lock(m_group_mutex);
      m_group_reads.erase(object);
    }
    m_group_cv.notify_all();
  };
  std::string bytes;
  auto got = m_client.get(object, 0, end, [&](const char* d, size_t n) {
    bytes.append(d, n);
    return bytes.size() <= end;
  });
  if (!got || bytes.size() != end) {
    done();
    if (!got) {
      return tl::unexpected(got.error());
    }
    return make_error(ErrorKind::io, object + ": read " + std::to_string(bytes.size()) + " bytes, expected " +
                                         std::to_string(end));
  }
  {
    std::lock_guard lock(m_counters_mutex);
    ++m_counters.ranges_read;
  }
  for (size_t i = 0; i < group.size(); ++i) {
    group[i].bytes = bytes.substr(members[i].offset, members[i].length);
  }
  std::string().swap(bytes);
  auto kept = keep(group);
  done();
  if (!kept) {
    return tl::unexpected(kept.error());
  }
  return true;
}

} // namespace tributary::store

#include "store/object_tier.h"

#include "resourcesync/hash.h"
#include "store/pg_store.h"

#include <pqxx/pqxx>

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

std::string text_array(const std::vector<std::string>& items) {
  // Only hex names and our own object keys go in: no quoting needed, but
  // quote anyway so that a surprise cannot change the query's meaning.
  std::string out = "{";
  for (size_t i = 0; i < items.size(); ++i) {
    out += (i ? ",\"" : "\"");
    for (char c : items[i]) {
      if (c == '"' || c == '\\') {
        out.push_back('\\');
      }
      out.push_back(c);
    }
    out.push_back('"');
  }
  return out + "}";
}

std::string bigint_array(const std::vector<uint64_t>& v) {
  std::string out = "{";
  for (size_t i = 0; i < v.size(); ++i) {
    out += (i ? "," : "") + std::to_string(v[i]);
  }
  return out + "}";
}

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

// A few connections, each used by one caller at a time: uploads come from
// every source's committer thread, downloads from the server's workers.
struct ObjectTier::Db {
  std::string conninfo;
  std::mutex mutex;
  std::vector<std::unique_ptr<pqxx::connection>> idle;

  std::unique_ptr<pqxx::connection> take() {
    {
      std::lock_guard lock(mutex);
      if (!idle.empty()) {
        auto c = std::move(idle.back());
        idle.pop_back();
        return c;
      }
    }
    return std::make_unique<pqxx::connection>(conninfo);
  }
  void give(std::unique_ptr<pqxx::connection> c) {
    std::lock_guard lock(mutex);
    // As many as the server's blocking workers (16): a connection made per
    // lookup cost more than the lookup (measured: cold reads at 286/s).
    if (c && c->is_open() && idle.size() < 16) {
      idle.push_back(std::move(c));
    }
  }
  // Runs `fn` in a transaction on a pooled connection; a broken connection
  // is dropped and the work tried once more on a new one.
  template <typename Fn>
  Result<void> with(const char* what, Fn&& fn) {
    for (int attempt = 0;; ++attempt) {
      try {
        auto c = take();
        {
          pqxx::work tx(*c);
          fn(tx);
          tx.commit();
        }
        give(std::move(c));
        return {};
      } catch (const pqxx::broken_connection& e) {
        {
          // The server went away: the idle ones are as dead as this one.
          std::lock_guard lock(mutex);
          idle.clear();
        }
        if (attempt > 0) {
          return make_error(ErrorKind::io, std::string("content_object ") + what + ": " + e.what());
        }
      } catch (const std::exception& e) {
        return make_error(ErrorKind::io, std::string("content_object ") + what + ": " + e.what());
      }
    }
  }
};

ObjectTier::ObjectTier(S3Config s3, std::string conninfo, uint64_t pack_object_bytes)
    : m_client(std::move(s3)), m_conninfo(std::move(conninfo)), m_pack_object_bytes(pack_object_bytes),
      m_db(std::make_unique<Db>()) {
  m_db->conninfo = m_conninfo;
}

ObjectTier::~ObjectTier() = default;

Result<std::shared_ptr<ObjectTier>> ObjectTier::open(S3Config s3, const std::string& conninfo,
                                                     uint64_t pack_object_bytes) {
  std::shared_ptr<ObjectTier> tier(new ObjectTier(std::move(s3), conninfo, pack_object_bytes));
  if (auto r = tier->m_client.create_bucket(); !r) {
    return tl::unexpected(Error{r.error().kind, "content store: bucket '" + tier->m_client.config().bucket +
                                                    "': " + r.error().message});
  }
  auto checked = tier->m_db->with("check", [](pqxx::work& tx) { tx.exec("SELECT 1 FROM content_object LIMIT 1"); });
  if (!checked) {
    return tl::unexpected(Error{checked.error().kind, checked.error().message + " (run `tributary migrate`)"});
  }
  return tier;
}

ObjectTier::Counters ObjectTier::counters() const {
  std::lock_guard lock(m_counters_mutex);
  return m_counters;
}

namespace {
// Session-less advisory locks on object keys, two-key form: this constant,
// then the key's hash. An uploader holds its keys' locks shared from before
// their PUTs until the rows naming them commit; the bucket's collection
// takes one exclusively to delete an object no row names (see collect()).
constexpr int k_object_lock_space = 0x7472626f; // "trbo"

void lock_object(pqxx::work& tx, const std::string& key, bool exclusive) {
  tx.exec_params(exclusive ? "SELECT pg_advisory_xact_lock($1, hashtext($2))"
                           : "SELECT pg_advisory_xact_lock_shared($1, hashtext($2))",
                 k_object_lock_space, key);
}
} // namespace

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
  auto r = m_db->with("upload", [&](pqxx::work& tx) {
    failed = {};
    add = Counters{};
    // What the bucket already has (another node's, or an earlier run's);
    // a row the collection marked counts as absent: the blob goes up again
    // and the mark is cleared.
    std::set<std::string> known;
    for (const auto& row : tx.exec_params("SELECT sha256 FROM content_object WHERE sha256 = ANY($1::text[]) "
                                          "AND condemned_at IS NULL",
                                          text_array(names))) {
      known.insert(row[0].as<std::string>());
    }
    add.blobs_known = known.size();
    // The rest: small ones packed, large ones alone. Rows only after PUTs.
    std::vector<std::string> row_sha, row_object;
    std::vector<uint64_t> row_offset, row_length;
    std::string pack;
    std::vector<std::pair<std::string, uint64_t>> in_pack; // (sha, offset)
    std::vector<uint64_t> in_pack_length;
    auto put_pack = [&]() -> Result<void> {
      if (in_pack.empty()) {
        return {};
      }
      const std::string sha = rs::hash_hex(rs::HashAlgorithm::sha256, pack);
      const std::string key = "packs/" + sha;
      lock_object(tx, key, false);
      if (auto p = m_client.put(key, pack, sha); !p) {
        return p;
      }
      ++add.objects_put;
      add.bytes_put += pack.size();
      for (size_t k = 0; k < in_pack.size(); ++k) {
        row_sha.push_back(in_pack[k].first);
        row_object.push_back(key);
        row_offset.push_back(in_pack[k].second);
        row_length.push_back(in_pack_length[k]);
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
        lock_object(tx, "blobs/" + b->info.sha256, false);
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
        row_sha.push_back(large[k]->info.sha256);
        row_object.push_back("blobs/" + large[k]->info.sha256);
        row_offset.push_back(0);
        row_length.push_back(large[k]->where.length);
      }
    }
    if (!row_sha.empty()) {
      tx.exec_params("INSERT INTO content_object (sha256, object, \"offset\", length) "
                     "SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) "
                     "ON CONFLICT (sha256) DO UPDATE SET object = EXCLUDED.object, \"offset\" = EXCLUDED.\"offset\", "
                     "length = EXCLUDED.length, condemned_at = NULL WHERE content_object.condemned_at IS NOT NULL",
                     text_array(row_sha), text_array(row_object), bigint_array(row_offset),
                     bigint_array(row_length));
    }
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
  Collected out;
  const std::string unnamed = "NOT EXISTS (SELECT 1 FROM gc_named n WHERE n.sha = c.sha256)";
  const std::string due = "c.condemned_at < now() - $1 * interval '1 second'";
  const long long grace_s = grace.count();
  // 1. The rows, in one transaction: what the database names now, read
  //    once into a table of this transaction, joined as a whole.
  auto r = m_db->with("collect", [&](pqxx::work& tx) {
    out = Collected{};
    tx.exec0(std::string("CREATE TEMP TABLE gc_named ON COMMIT DROP AS SELECT DISTINCT blob_sha256 AS sha FROM (") +
             PgStore::referenced_blobs_sql() + ") x");
    tx.exec0("ANALYZE gc_named");
    out.rows = tx.exec1("SELECT count(*) FROM content_object")[0].as<uint64_t>();
    if (dry_run) {
      out.pardoned = tx.exec1("SELECT count(*) FROM content_object c WHERE c.condemned_at IS NOT NULL AND NOT " +
                              unnamed)[0]
                         .as<uint64_t>();
      out.condemned =
          tx.exec1("SELECT count(*) FROM content_object c WHERE c.condemned_at IS NULL AND " + unnamed)[0].as<uint64_t>();
      auto removed = tx.exec_params1("SELECT count(*), coalesce(sum(length), 0) FROM content_object c WHERE " + due +
                                         " AND " + unnamed,
                                     grace_s);
      out.removed = removed[0].as<uint64_t>();
      out.removed_bytes = removed[1].as<uint64_t>();
      return;
    }
    out.pardoned = tx.exec0("UPDATE content_object c SET condemned_at = NULL WHERE c.condemned_at IS NOT NULL AND "
                            "NOT " + unnamed)
                       .affected_rows();
    // Deleted (with the objects they leave empty recorded) before the new
    // marks, which are all younger than any grace.
    std::set<std::string> emptied;
    for (const auto& row : tx.exec_params("DELETE FROM content_object c WHERE " + due + " AND " + unnamed +
                                              " RETURNING c.object, c.length",
                                          grace_s)) {
      ++out.removed;
      out.removed_bytes += row[1].as<uint64_t>();
      emptied.insert(row[0].as<std::string>());
    }
    tx.exec_params("INSERT INTO content_object_dead (object) SELECT o FROM unnest($1::text[]) o "
                   "WHERE NOT EXISTS (SELECT 1 FROM content_object c WHERE c.object = o) ON CONFLICT DO NOTHING",
                   text_array(std::vector<std::string>(emptied.begin(), emptied.end())));
    out.condemned =
        tx.exec0("UPDATE content_object c SET condemned_at = now() WHERE c.condemned_at IS NULL AND " + unnamed)
            .affected_rows();
    out.waiting = tx.exec1("SELECT count(*) FROM content_object WHERE condemned_at IS NOT NULL")[0].as<uint64_t>();
  });
  if (!r) {
    return tl::unexpected(r.error());
  }
  if (dry_run) {
    return out;
  }
  // 2. The objects no row names: each under its key's lock, exclusive,
  //    checked again; one whose DELETE fails stays listed for next time.
  std::vector<std::string> dead;
  r = m_db->with("list dead objects", [&](pqxx::work& tx) {
    for (const auto& row : tx.exec("SELECT object FROM content_object_dead ORDER BY object")) {
      dead.push_back(row[0].as<std::string>());
    }
  });
  if (!r) {
    return tl::unexpected(r.error());
  }
  for (const auto& key : dead) {
    Result<void> removed;
    r = m_db->with("delete an object", [&](pqxx::work& tx) {
      lock_object(tx, key, true);
      if (!tx.exec_params("SELECT 1 FROM content_object WHERE object = $1 LIMIT 1", key).empty()) {
        ++out.objects_kept; // an uploader put it again and named it
      } else if (removed = m_client.remove(key); !removed) {
        return;
      } else {
        ++out.objects_deleted;
      }
      tx.exec_params("DELETE FROM content_object_dead WHERE object = $1", key);
    });
    if (!r || !removed) {
      out.problems.push_back(key + ": " + (!r ? r.error().message : removed.error().message));
    }
  }
  return out;
}

Result<std::optional<ObjectTier::Place>> ObjectTier::find(const std::string& sha256) {
  std::optional<Place> out;
  auto r = m_db->with("lookup", [&](pqxx::work& tx) {
    auto rows = tx.exec_params("SELECT object, \"offset\", length FROM content_object WHERE sha256 = $1", sha256);
    if (!rows.empty()) {
      out = Place{rows[0][0].as<std::string>(), rows[0][1].as<uint64_t>(), rows[0][2].as<uint64_t>()};
    }
  });
  if (!r) {
    return tl::unexpected(r.error());
  }
  return out;
}

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
  auto r = m_db->with("group lookup", [&](pqxx::work& tx) {
    auto rows = tx.exec_params("SELECT sha256, \"offset\", length FROM content_object WHERE object = $1 "
                               "ORDER BY \"offset\"",
                               object);
    for (const auto& row : rows) {
      group.push_back(Neighbour{row[0].as<std::string>(), {}});
      members.push_back(Place{object, row[1].as<uint64_t>(), row[2].as<uint64_t>()});
      end = std::max(end, members.back().offset + members.back().length);
    }
  });
  if (!r) {
    return tl::unexpected(r.error());
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

// The blob store's remote tier (the shared bucket), seen from this node:
// the tier attached, and reads of what this node lacks, stored here as a
// group.
#include "store/blob/blob_remote.h"

namespace tributary::store::blob_detail {

namespace {
// Set while a blob fetched from the remote tier is stored here: it is
// there already.
thread_local bool t_from_remote = false;

// Publishes `writers` as blobs read from the tier.
std::vector<Result<BlobInfo>> publish_fetched(BlobStore& store, std::vector<BlobStore::Writer*>& writers) {
  t_from_remote = true;
  auto results = store.publish(writers);
  t_from_remote = false;
  return results;
}
} // namespace

void BlobRemote::set(std::shared_ptr<RemoteTier> tier) {
  std::lock_guard lock(m_mutex);
  m_tier = std::move(tier);
}

std::shared_ptr<RemoteTier> BlobRemote::tier() const {
  std::lock_guard lock(m_mutex);
  return m_tier;
}

bool BlobRemote::filling() { return t_from_remote; }

// First the blob's whole group, with one request, when the tier can: each
// blob verified against its name, those that fail left out (the one asked
// for then comes alone), all stored with one publish().
Result<void> BlobRemote::fetch_group(BlobStore& store, RemoteTier& tier, const std::string& sha256,
                                     const std::function<bool(const std::string&)>& stored, bool& done) {
  auto grouped = tier.download_group(sha256, [&](std::vector<RemoteTier::Neighbour>& group) -> Result<void> {
    std::vector<BlobStore::Writer> held;
    held.reserve(group.size());
    for (auto& n : group) {
      if (stored(n.sha256)) {
        continue; // stored here already
      }
      auto w = store.begin();
      if (!w) {
        return tl::unexpected(w.error());
      }
      if (auto wr = w->write(n.bytes.data(), n.bytes.size()); !wr) {
        return wr;
      }
      std::string().swap(n.bytes);
      const auto& digests = w->digests();
      if (!digests.empty() && digests.front().hex == n.sha256) {
        held.push_back(std::move(*w));
      }
    }
    std::vector<BlobStore::Writer*> writers;
    for (auto& w : held) {
      writers.push_back(&w);
    }
    for (auto& res : publish_fetched(store, writers)) {
      if (!res) {
        return tl::unexpected(res.error());
      }
    }
    return {};
  });
  done = grouped && *grouped && stored(sha256);
  return {};
}

Result<void> BlobRemote::fetch(BlobStore& store, RemoteTier& tier, const std::string& sha256,
                               const std::function<bool(const std::string&)>& stored) {
  bool done = false;
  if (auto r = fetch_group(store, tier, sha256, stored, done); !r || done) {
    return r;
  }
  auto w = store.begin();
  if (!w) {
    return tl::unexpected(w.error());
  }
  Result<void> written;
  auto got = tier.download(sha256, [&](const char* d, size_t n) {
    written = w->write(d, n);
    return static_cast<bool>(written);
  });
  if (!written) {
    return written;
  }
  if (!got) {
    return got;
  }
  const auto& digests = w->digests();
  if (digests.empty() || digests.front().hex != sha256) {
    return make_error(ErrorKind::io, "blob " + sha256 + " from the remote tier hashes to " +
                                         (digests.empty() ? std::string("nothing") : digests.front().hex));
  }
  // Group commit: the first reader to find no one storing stores every
  // blob queued so far with one publish(); the others wait for theirs.
  // (One publish each, two syncs each, held cold reads to 284/s.)
  Fill fill{&*w, std::nullopt};
  std::unique_lock lock(m_fill_mutex);
  m_fill_queue.push_back(&fill);
  while (!fill.result) {
    if (m_fill_leader) {
      m_fill_cv.wait(lock);
      continue;
    }
    m_fill_leader = true;
    std::vector<Fill*> group;
    group.swap(m_fill_queue);
    lock.unlock();
    std::vector<BlobStore::Writer*> writers;
    for (auto* g : group) {
      writers.push_back(g->writer);
    }
    auto results = publish_fetched(store, writers);
    lock.lock();
    for (size_t i = 0; i < group.size(); ++i) {
      group[i]->result = std::move(results[i]);
    }
    m_fill_leader = false;
    m_fill_cv.notify_all();
  }
  if (!*fill.result) {
    return tl::unexpected(fill.result->error());
  }
  return {};
}

} // namespace tributary::store::blob_detail

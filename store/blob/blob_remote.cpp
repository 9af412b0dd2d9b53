// The blob store's remote tier (the shared bucket): uploads after
// publish, and reads of what this node lacks, stored here as a group.
#include "store/blob/blob_internal.h"

namespace tributary::store {

using namespace blob_detail;

namespace {
// Set while a blob fetched from the remote tier is stored here: it is
// there already.
thread_local bool t_from_remote = false;
} // namespace

void BlobStore::set_remote(std::shared_ptr<RemoteTier> tier) {
  std::lock_guard lock(m_state->mutex);
  m_state->remote = std::move(tier);
}

bool BlobStore::has_remote() const {
  std::lock_guard lock(m_state->mutex);
  return m_state->remote != nullptr;
}

std::shared_ptr<RemoteTier> BlobStore::remote() const {
  std::lock_guard lock(m_state->mutex);
  return m_state->remote;
}

Result<void> BlobStore::upload(const std::vector<std::string>& sha256s) const {
  std::shared_ptr<RemoteTier> remote;
  {
    std::lock_guard lock(m_state->mutex);
    remote = m_state->remote;
  }
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
  std::shared_ptr<RemoteTier> remote;
  {
    std::lock_guard lock(m_state->mutex);
    remote = m_state->remote;
  }
  if (!remote || t_from_remote) {
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

Result<void> BlobStore::fetch_remote(RemoteTier& tier, const std::string& sha256) const {
  // A const store fills its cache: the state is shared, the bytes are
  // verified against their name before they are named.
  BlobStore& self = const_cast<BlobStore&>(*this);
  // First the blob's whole group, with one request, when the tier can: each
  // blob verified against its name, those that fail left out (the one asked
  // for then comes alone, below), all stored with one publish().
  auto grouped = tier.download_group(sha256, [&](std::vector<RemoteTier::Neighbour>& group) -> Result<void> {
    std::vector<Writer> held;
    held.reserve(group.size());
    for (auto& n : group) {
      if (auto here = m_state->lookup(n.sha256); here && here->has_value()) {
        continue; // stored here already
      }
      auto w = self.begin();
      if (!w) {
        return tl::unexpected(w.error());
      }
      if (auto wr = w->write(n.bytes.data(), n.bytes.size()); !wr) {
        return wr;
      }
      std::string().swap(n.bytes);
      const auto digests = w->digests();
      if (!digests.empty() && digests.front().hex == n.sha256) {
        held.push_back(std::move(*w));
      }
    }
    std::vector<Writer*> writers;
    for (auto& w : held) {
      writers.push_back(&w);
    }
    t_from_remote = true;
    auto results = self.publish(writers);
    t_from_remote = false;
    for (auto& res : results) {
      if (!res) {
        return tl::unexpected(res.error());
      }
    }
    return {};
  });
  if (grouped && *grouped) {
    if (auto here = locate_here(sha256); here) {
      return {};
    }
  }
  auto w = self.begin();
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
  const auto digests = w->digests();
  if (digests.empty() || digests.front().hex != sha256) {
    return make_error(ErrorKind::io, "blob " + sha256 + " from the remote tier hashes to " +
                                         (digests.empty() ? std::string("nothing") : digests.front().hex));
  }
  // Group commit: the first reader to find no one storing stores every
  // blob queued so far with one publish(); the others wait for theirs.
  // (One publish each, two syncs each, held cold reads to 284/s.)
  State& st = *m_state;
  State::Fill fill{&*w, std::nullopt};
  std::unique_lock lock(st.fill_mutex);
  st.fill_queue.push_back(&fill);
  while (!fill.result) {
    if (st.fill_leader) {
      st.fill_cv.wait(lock);
      continue;
    }
    st.fill_leader = true;
    std::vector<State::Fill*> group;
    group.swap(st.fill_queue);
    lock.unlock();
    std::vector<Writer*> writers;
    for (auto* g : group) {
      writers.push_back(g->writer);
    }
    t_from_remote = true;
    auto results = self.publish(writers);
    t_from_remote = false;
    lock.lock();
    for (size_t i = 0; i < group.size(); ++i) {
      group[i]->result = std::move(results[i]);
    }
    st.fill_leader = false;
    st.fill_cv.notify_all();
  }
  if (!*fill.result) {
    return tl::unexpected(fill.result->error());
  }
  return {};
}


} // namespace tributary::store

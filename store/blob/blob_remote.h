#pragma once

// The blob store's remote tier, seen from this node: which tier is
// attached, and the cache fill that stores here, as one group, the blobs
// readers asked for and this node lacked. This class owns the tier pointer
// and the fill queue.

#include "common/result.h"
#include "store/blob/blob_store.h"

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace tributary::store::blob_detail {

class BlobRemote {
public:
  void set(std::shared_ptr<RemoteTier> tier);
  std::shared_ptr<RemoteTier> tier() const;

  // True in a thread storing blobs it read from the tier: they are there
  // already, so what it publishes is not uploaded again.
  static bool filling();

  // Reads the blob `sha256` from `tier` into `store`: its whole group with
  // one request where the tier can (`stored` tells which of them this node
  // holds already), else the blob alone, verified against its name, and
  // stored with the other readers' blobs of the moment in one publish().
  Result<void> fetch(BlobStore& store, RemoteTier& tier, const std::string& sha256,
                     const std::function<bool(const std::string&)>& stored);

private:
  Result<void> fetch_group(BlobStore& store, RemoteTier& tier, const std::string& sha256,
                           const std::function<bool(const std::string&)>& stored, bool& done);

  mutable std::mutex m_mutex; // guards m_tier
  std::shared_ptr<RemoteTier> m_tier;
  // Blobs read from the tier wait here to be stored as a group: one pack
  // sync and one index transaction for every reader that came meanwhile,
  // not two syncs each.
  struct Fill {
    BlobStore::Writer* writer;
    std::optional<Result<BlobInfo>> result;
  };
  std::mutex m_fill_mutex; // guards the three below
  std::condition_variable m_fill_cv;
  std::vector<Fill*> m_fill_queue;
  bool m_fill_leader = false;
};

} // namespace tributary::store::blob_detail

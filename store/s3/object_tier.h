#pragma once

#include "store/blob/blob_store.h"
#include "store/object_index.h"
#include "store/s3/s3_client.h"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>

// Content on S3-compatible object storage, shared by every node of one
// database (issue #18): the RemoteTier behind a BlobStore.
//
// Object storage charges a request per object, and a request costs
// milliseconds; repository metadata is mostly a few kilobytes a resource.
// So the small blobs a publish() names (one sync batch, up to 2,500) go up
// together as one immutable pack object, `packs/<sha-256 of its bytes>`,
// and each blob's place in it (object, offset, length) is a row of
// `content_object` in PostgreSQL, written only once the PUT succeeded. A
// blob over BlobStore::k_pack_max is an object of its own, `blobs/<sha-256>`.
// Any node finds any blob with one indexed query and reads it with one
// Range GET. Objects are content-addressed and never rewritten, so a PUT
// repeated after a crash writes the same bytes under the same key.
namespace tributary::store {

class ObjectTier : public RemoteTier {
public:
  // Checks the bucket's index (content_object, through `index`) and makes
  // sure the bucket exists. `pack_object_bytes`: a pack object is closed
  // past this.
  static Result<std::shared_ptr<ObjectTier>> open(S3Config s3, std::shared_ptr<ObjectIndex> index,
                                                  uint64_t pack_object_bytes = 64ull << 20);
  ~ObjectTier() override;

  Result<void> upload(const std::vector<Upload>& blobs) override;
  Result<void> download(const std::string& sha256, const std::function<bool(const char*, size_t)>& sink) override;
  // A pack object up to k_group_read_max is read whole, with one GET, and
  // every blob in it handed back: a cold node then stores a batch's blobs
  // for one request instead of one Range GET each (measured: a cold pass
  // over 10,000 small resources at 0.23x the local store's rate, Ceph's CPU
  // per request being most of it). One read per object at a time.
  static constexpr uint64_t k_group_read_max = 16ull << 20;
  Result<bool> download_group(const std::string& sha256, const KeepGroup& keep) override;

  // Where a blob is in the bucket; nullopt when the tier lacks it.
  using Place = ObjectIndex::Place;
  Result<std::optional<Place>> find(const std::string& sha256);

  S3Client& client() { return m_client; }

  // Garbage collection of the bucket (`tributary gc`; schema 0011). Rows of
  // blobs the database names nowhere are marked, rows named again are
  // unmarked, and rows marked more than `grace` ago and still named nowhere
  // are deleted; then each object no row names any more is deleted from
  // the bucket, under an exclusive lock on its key, after checking again
  // that no row names it (an uploader holds the key's lock, shared, from
  // before its PUT until its rows commit). An object whose DELETE failed is
  // tried again by the next collection. `grace` must outlast the longest
  // time a writer holds a blob before naming it (a batch). With `dry_run`,
  // counts only.
  struct Collected : ObjectIndex::Collected {
    uint64_t objects_deleted = 0;
    uint64_t objects_kept = 0; // their rows went, but a row names them again
    std::vector<std::string> problems; // objects not deleted (tried again next time)
  };
  Result<Collected> collect(std::chrono::seconds grace, bool dry_run);

  // What upload() did since the tier was opened (for tests and /metrics).
  struct Counters {
    uint64_t objects_put = 0;
    uint64_t bytes_put = 0;
    uint64_t blobs_uploaded = 0;
    uint64_t blobs_known = 0; // skipped: the bucket had them
    uint64_t ranges_read = 0;
  };
  Counters counters() const;

private:
  ObjectTier(S3Config s3, std::shared_ptr<ObjectIndex> index, uint64_t pack_object_bytes);
  S3Client m_client;
  uint64_t m_pack_object_bytes;
  std::shared_ptr<ObjectIndex> m_db;
  mutable std::mutex m_counters_mutex;
  Counters m_counters;
  std::mutex m_group_mutex;
  std::condition_variable m_group_cv;
  std::set<std::string> m_group_reads; // objects being read whole
};

} // namespace tributary::store

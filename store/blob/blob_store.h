#pragma once

#include "common/result.h"
#include "resourcesync/hash.h"

#include <filesystem>
#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tributary::store {

// What a committed blob is.
struct BlobInfo {
  std::string sha256;
  uint64_t length = 0;
  std::vector<rs::HashValue> hashes; // sha-256 plus any extra algorithms asked for
};

// Where a blob's bytes are: a region of a file.
struct BlobLocation {
  std::filesystem::path file;
  uint64_t offset = 0;
  uint64_t length = 0;
};

// Content-addressed storage on disk, named by sha-256. Identical content from
// any source is stored once.
//
// Small blobs (up to k_pack_max bytes, which is nearly all repository
// metadata) are appended to pack files, <root>/packs/<n>.pack, each record a
// 48-byte header (magic, length, sha-256) and the bytes, at a multiple of 8; an LMDB index under
// <root>/index maps sha-256 to (pack, offset, length). A file per blob cost
// an inode allocation per resource, which on ext4 capped a dump baseline at
// 6,000-10,000 blobs/s; packs cost one fdatasync per batch. Larger blobs
// keep a file each, <root>/blobs/<first 2 hex>/<sha-256>, written to an
// unnamed O_TMPFILE file (or a temporary file under <root>/tmp) and linked
// into place. Either way a blob is named (indexed or linked) only after its
// bytes are durable, so a reader never sees a half-written blob; bytes of a
// pack record that never got indexed (a crash, an abandoned batch) are dead
// space, never wrong content.
//
// A process writes only to pack files it created, so several processes may
// share a store (LMDB serialises the index writers); one process opening the
// same root twice shares one state.
//
// This class is a facade: the index (blob_index.h), the pack appender
// (pack_appender.h), the directories of file blobs (blob_directories.h) and
// the remote tier (blob_remote.h) each own their state and lock.
// What BlobStore::check() found.
struct BlobCheck {
  uint64_t packs = 0;
  uint64_t pack_bytes = 0;     // all pack files
  uint64_t records = 0;        // intact records in them
  uint64_t indexed = 0;        // records the index names (the others are dead space)
  uint64_t indexed_bytes = 0;  // their bytes
  uint64_t unreadable_bytes = 0; // pack space holding no intact record (cut short by a crash, or damaged)
  uint64_t reindexed = 0;      // records added to the index (with `reindex`)
  uint64_t index_entries = 0;
  uint64_t files = 0;          // blobs with a file of their own
  uint64_t file_bytes = 0;
  // Damage to what the store serves, each naming the file, offset and
  // reason. Lost space nothing names is not a problem.
  std::vector<std::string> problems;
};

// What BlobStore::repack() did.
struct RepackReport {
  uint64_t packs = 0;         // pack files rewritten and removed
  uint64_t moved = 0;         // live records copied to a new pack
  uint64_t moved_bytes = 0;
  uint64_t freed_bytes = 0;   // disk given back (the old packs' size less what moved)
  uint64_t busy = 0;          // packs passed over: a writer appends to them
  std::vector<std::string> problems; // records that did not hash to their name (their pack is kept)
};

// What BlobStore::remove_condemned() removed.
struct RemoveReport {
  uint64_t blobs = 0;
  uint64_t bytes = 0;
};

// A blob's name as the index keys it: the 32 bytes of its sha-256.
using BlobName = std::array<unsigned char, 32>;

// A second home for blobs that several machines share (object storage; see
// store/object_tier.h). With one attached, a blob counts as stored only
// once the tier has it: publish() and commit() upload what they name
// before they return, and a blob this store lacks is fetched from the tier
// when it is located, then kept here as a cache.
class RemoteTier {
public:
  virtual ~RemoteTier() = default;
  // A blob as the local store holds it, to be uploaded.
  struct Upload {
    BlobInfo info;
    BlobLocation where;
  };
  // Makes these blobs durable in the tier (those it already has are
  // skipped). A failure means none of them may be named in the database.
  virtual Result<void> upload(const std::vector<Upload>& blobs) = 0;
  // Streams a blob's bytes to `sink` (false stops); not_found when the tier
  // lacks it.
  virtual Result<void> download(const std::string& sha256,
                                const std::function<bool(const char*, size_t)>& sink) = 0;
  // The blobs stored together with `sha256` in the tier (it among them),
  // read with one request and handed to `keep` as (sha-256, bytes): a node
  // that lacks one blob of a batch usually lacks the rest. False when the
  // tier reads blobs one at a time (the default) or this one is not in a
  // group; true also when another thread was reading the same group (this
  // call returns once that one's `keep` ended).
  struct Neighbour {
    std::string sha256;
    std::string bytes;
  };
  using KeepGroup = std::function<Result<void>(std::vector<Neighbour>&)>;
  virtual Result<bool> download_group(const std::string& sha256, const KeepGroup& keep) {
    (void)sha256;
    (void)keep;
    return false;
  }
};

class BlobStore {
  struct State; // the open store's rooms, shared by every BlobStore of one root in this process

public:
  static constexpr uint64_t k_pack_max = 1024 * 1024;  // larger blobs get a file
  static constexpr uint64_t k_pack_bytes = 1ull << 30;  // a pack file is closed past this

  // Creates the directories if needed; fails (io) if it cannot.
  // `pack_bytes`: where a pack file is closed (tests make it small); the
  // first open of a root in a process sets it.
  static Result<std::shared_ptr<BlobStore>> open(const std::filesystem::path& root,
                                                 uint64_t pack_bytes = k_pack_bytes);

  // Streams one blob in: held in memory up to k_pack_max, then in a
  // temporary file. Destroying an uncommitted writer removes its temporary
  // file.
  class Writer {
  public:
    ~Writer();
    Writer(Writer&&) noexcept;
    Writer& operator=(Writer&&) noexcept;
    Writer(const Writer&) = delete;

    Result<void> write(const char* data, size_t size);
    uint64_t size() const { return m_size; }
    // The digests so far are final: fsyncs, renames into place (or drops
    // the copy if the blob already exists) and returns what was stored.
    Result<BlobInfo> commit();
    // The digests so far are final; the bytes wait, unnamed and not yet
    // durable, for BlobStore::publish() to make a whole group durable with
    // one sync and then name each blob. A small blob's pack record is
    // reserved now; its bytes are written by publish() with the group's
    // others (held in memory until then, up to 16 MiB a store; past that,
    // or past 64 KiB a blob, written now). A failure to write is reported
    // by publish() or commit().
    const BlobInfo& seal();
    // Digests of what was written, without committing (for verification
    // before deciding to keep the bytes).
    const std::vector<rs::HashValue>& digests();
    // The sha-256 seal() or commit() found (empty before).
    const std::string& sealed_sha256() const { return m_info.sha256; }

  private:
    friend class BlobStore;
    Writer(BlobStore& store, std::vector<rs::HashAlgorithm> algorithms);
    BlobStore* m_store;
    std::filesystem::path m_tmp; // the named temporary file, if O_TMPFILE was not available
    int m_fd = -1;               // the temporary file, once the blob outgrew memory
    std::string m_buffer;        // the bytes while they fit in a pack record
    struct Placed;               // where seal() appended a small blob
    std::shared_ptr<Placed> m_placed;
    uint64_t m_size = 0;
    std::vector<rs::HashAlgorithm> m_algorithms;
    rs::MultiHasher m_hasher;
    bool m_digested = false; // m_info.hashes are final
    bool m_finished = false;
    BlobInfo m_info;         // its hashes once digested; its sha256 and length once sealed
    Result<void> spill();               // from memory to a temporary file
    Result<BlobInfo> link_into_place(); // after the bytes are durable
    // Writes the pack records seal() left to publish (see Placed::pending).
    static void write_pending(State& st, std::vector<Writer*>& writers);
    // publish() but for the upload to the remote tier.
    static std::vector<Result<BlobInfo>> publish_group(State& st, std::vector<Writer*>& writers);
  };

  // Publishes sealed writers: one syncfs() makes all their bytes durable,
  // then each is linked under its name (one device flush for the group
  // instead of one per blob). Returns one result per writer, in order.
  // With a remote tier attached, the blobs are uploaded before this
  // returns, unless `deferred` is given: their names are then appended to
  // it, for upload() before the database names them.
  std::vector<Result<BlobInfo>> publish(std::vector<Writer*>& writers, std::vector<std::string>* deferred = nullptr);
  // Uploads these stored blobs to the remote tier (none attached: nothing
  // to do). A failure means none of them may be named in the database.
  Result<void> upload(const std::vector<std::string>& sha256s) const;

  // A writer that computes sha-256 and `extra` digests as bytes arrive.
  Result<Writer> begin(const std::vector<rs::HashAlgorithm>& extra = {});
  // Stores a whole buffer.
  Result<BlobInfo> put(std::string_view data, const std::vector<rs::HashAlgorithm>& extra = {});
  // Stores a file's bytes, read in 1 MiB pieces (a dump package may be as
  // large as a gigabyte); io when the file cannot be read.
  Result<BlobInfo> put_file(const std::filesystem::path& file);

  bool contains(const std::string& sha256) const;
  // Where the blob's bytes are: not_found if it is not stored, usage for a
  // name that is not 64 lower-case hex digits (so nothing outside the store
  // is reachable).
  Result<BlobLocation> locate(const std::string& sha256) const;
  // locate() of each name (a dump package's), the results in their order:
  // looked up in the order of the names, so that one lookup after another
  // reads the index's neighbouring pages (a dump package's names, taken in
  // its order, each faulted pages of their own back in).
  std::vector<Result<BlobLocation>> locate_many(const std::vector<std::string>& sha256s) const;
  Result<std::string> read(const std::string& sha256) const;
  // locate() for a writer about to name a stored blob in the database
  // without writing its bytes again (a deduplicated fetch): also lifts any
  // condemnation, so garbage collection keeps it. not_found if it is gone.
  Result<BlobLocation> retain(const std::string& sha256);

  // The index key a name spells; nullopt unless 64 lower-case hex digits.
  static std::optional<BlobName> name_of(const std::string& sha256);

  // Garbage collection, in two steps a grace period apart (see
  // store/garbage.h): condemn() marks blobs nothing referenced; every path
  // by which a writer reuses a stored blob (seal() or commit() of bytes
  // already stored, retain()) lifts the mark; remove_condemned() removes
  // only blobs still marked, each in the same index transaction that
  // checks the mark, so a blob is never removed under a writer that just
  // reused it.
  //
  // Every stored blob: its name and length (index entries, then files).
  Result<void> for_each_blob(const std::function<void(const BlobName&, uint64_t length)>& fn) const;
  // Marks blobs as condemned at `at` (unix seconds); one already marked
  // keeps its first time. Returns how many were newly marked.
  Result<uint64_t> condemn(const std::vector<BlobName>& names, int64_t at);
  // Condemned blobs, with the time they were marked.
  Result<std::vector<std::pair<BlobName, int64_t>>> condemned() const;
  // Lifts the mark of these blobs (found referenced again).
  Result<uint64_t> pardon(const std::vector<BlobName>& names);
  // Removes those of `names` still condemned (their index entry or file);
  // lifts their mark.
  Result<RemoveReport> remove_condemned(const std::vector<BlobName>& names);
  // Removes these blobs' copies here, condemned or not: for blobs a shared
  // bucket holds, when this store is a cache of it (a later locate() reads
  // them from the bucket again). Lifts their mark.
  Result<RemoveReport> evict(const std::vector<BlobName>& names);
  // Rewrites pack files whose live records (those the index names) fill
  // less than `live_below` of them: the live records are copied to a new
  // pack, the index moved to the copies, and the old pack removed. A pack
  // a writer still appends to (locked by it) is passed over. A reader that
  // located a blob in a removed pack finds the file gone and locates it
  // again.
  Result<RepackReport> repack(double live_below);

  // Reads the whole store: every pack record is re-hashed against the name
  // in its header, every index entry must point at an intact record of its
  // name, every blob file must hash to its name. With `reindex`, intact
  // records the index lacks are added (a lost or older index is rebuilt
  // from the packs): only while no other writer is at work, since a record
  // being written is intact before it is durable. Slow (reads everything);
  // for operators.
  Result<BlobCheck> check(bool reindex);

  // Attaches a remote tier for every store of this root in this process
  // (nullptr detaches it).
  void set_remote(std::shared_ptr<RemoteTier> tier);
  bool has_remote() const;
  std::shared_ptr<RemoteTier> remote() const;

  // Makes the names of blobs stored since the last call durable (one
  // syncfs, or an fsync per directory on the fallback path), before the
  // database commits rows that point at them.
  Result<void> sync_directories();

  const std::filesystem::path& root() const { return m_root; }

private:
  explicit BlobStore(std::filesystem::path root) : m_root(std::move(root)) {}
  Result<BlobLocation> locate_here(const std::string& sha256) const;
  // Uploads what publish() named (results in `out`, in order); a failure
  // turns every one of them into that error.
  void upload_published(std::vector<Result<BlobInfo>>& out, std::vector<std::string>* deferred = nullptr) const;
  std::filesystem::path m_root;
  std::shared_ptr<State> m_state;
};

namespace testing {
// Replaces how sync_directories() flushes one directory (to delay or fail
// it), for every store of this process; an empty function restores fsync.
void set_directory_sync(std::function<Result<void>(const std::filesystem::path&)> fn);
} // namespace testing

} // namespace tributary::store

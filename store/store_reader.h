#pragma once

#include "store/store.h"

#include <optional>
#include <string>
#include <vector>

// The read side of the store, all that the republisher needs: it never
// writes, so several republishers can serve one database beside one syncing
// process.
namespace tributary::store {

struct FeedInfo {
  int64_t feed_id = 0;
  int64_t source_id = 0;
  std::string source_name;
  std::string capability_list_url;
};

// One entry of the append-only change log.
struct LoggedChange {
  int64_t seq = 0;
  int64_t feed_id = 0;
  rs::Change change = rs::Change::updated;
  Timestamp recorded_at;
  std::optional<Timestamp> upstream_datetime;
  ResourceRecord resource; // the resource's state after the change
};

// Which resource one change-log entry was about (the republisher maps it to
// the Resource List part that must be rendered again).
struct ChangedKey {
  int64_t seq = 0;
  int64_t feed_id = 0;
  std::string uri;
};

// What the change log's retention compacted of one published set (see
// schema/0007): its Change List parts 1..`parts` of `part_size` changes
// over `feeds` are gone; the last of them ended with change `last_seq` at
// `until` (its `until` as published), and numbering and time go on from
// there.
struct Compaction {
  std::string set_name;
  std::vector<int64_t> feeds;
  size_t part_size = 0;
  size_t parts = 0;
  int64_t last_seq = 0;
  Timestamp until;
  bool operator==(const Compaction& o) const {
    return set_name == o.set_name && feeds == o.feeds && part_size == o.part_size && parts == o.parts &&
           last_seq == o.last_seq && until == o.until;
  }
};

// What the status API reports of one source.
struct SourceStats {
  int64_t source_id = 0;
  std::string name;
  std::string url;
  // What it publishes: "resourcesync", "resource-list-only",
  // "plain-sitemap"; empty until a run has found out.
  std::string kind;
  // How far ahead of our clock its last Change List dated changes, past its
  // tolerance; none when its clock looked right.
  std::optional<double> clock_ahead_seconds;
  Timestamp created_at{}; // when its first run recorded it (the source row)
  // When the first of the failed runs since its last success (or partial
  // success) started; none when no run failed since.
  std::optional<Timestamp> failing_since;
  uint64_t live = 0;    // resources held live
  uint64_t deleted = 0; // resources held as deleted
  uint64_t bytes = 0;   // sum of the live resources' lengths
  uint64_t retrying = 0; // resources whose content failed and is retried
  // When the oldest of them first failed (none without retries, or where
  // the store does not keep it).
  std::optional<Timestamp> retrying_since;
  std::optional<Timestamp> newest_change; // newest upstream change applied (watermarks' last time)
  std::optional<Timestamp> baseline_at;   // newest `at` a baseline came from
  std::optional<RunInfo> last_success;    // newest succeeded run
  std::optional<RunInfo> last_failure;    // newest failed run
  std::optional<RunInfo> last_run;        // newest run of any status
  std::vector<DeletionHold> deletion_holds; // feeds whose deletions wait for an operator
};

// A resource we hold, with the time its last change entered our change log
// (its datestamp on our OAI-PMH face, #52).
struct DatedResource {
  int64_t feed_id = 0;
  ResourceRecord resource; // live or deleted
  Timestamp datestamp;     // the database's clock, microseconds
};

// Where a listing by datestamp goes on: after this (datestamp, feed, URI).
struct DatedKey {
  Timestamp datestamp;
  int64_t feed_id = 0;
  std::string uri;
};

// A page of the resources held, by (datestamp, feed, URI).
struct DatedQuery {
  std::vector<int64_t> feed_ids;         // of these feeds (empty: none)
  std::optional<Timestamp> from;         // datestamp >= from
  Timestamp before;                      // datestamp < before
  std::optional<DatedKey> after;         // past this one
  // Only resources carrying a rel="collection" link with this href (an
  // upstream OAI-PMH set, as our harvester names it); empty: any.
  std::string collection_link;
  size_t limit = 100;
};

class StoreReader {
public:
  virtual ~StoreReader() = default;

  // Every feed we publish, ordered by source name, then feed id: those of
  // sources removed from the configuration (schema 0021) are not.
  virtual Result<std::vector<FeedInfo>> feeds() = 0;
  // The names of sources removed from the configuration whose data is kept
  // until purged: their documents answer 410 Gone.
  virtual Result<std::vector<std::string>> removed_sources() { return std::vector<std::string>{}; }
  // Live resources of a feed ordered by URI (the store's collation), those
  // after `after_uri` (all when empty), at most `limit`.
  virtual Result<std::vector<ResourceRecord>> live_resources(int64_t feed_id, const std::string& after_uri,
                                                             size_t limit) = 0;
  // One resource of a feed, live or deleted; nullopt when never held.
  virtual Result<std::optional<ResourceRecord>> resource(int64_t feed_id, const std::string& uri) = 0;
  // The change log of these feeds in seq order, entries after `after_seq`,
  // at most `limit`.
  virtual Result<std::vector<LoggedChange>> changes(const std::vector<int64_t>& feed_ids, int64_t after_seq,
                                                    size_t limit) = 0;
  // Which resources of these feeds the change log entries after `after_seq`
  // up to `up_to_seq` were about, in seq order, at most `limit`.
  virtual Result<std::vector<ChangedKey>> changed_keys(const std::vector<int64_t>& feed_ids, int64_t after_seq,
                                                       int64_t up_to_seq, size_t limit) = 0;
  // The highest change-log seq overall (0 when empty): documents are
  // rendered again when it moves.
  virtual Result<int64_t> last_seq() = 0;
  // One line per source ever synced, ordered by name.
  virtual Result<std::vector<SourceStats>> source_stats() = 0;
  // The newest `limit` runs of the source named `name`, newest first (empty
  // for an unknown source).
  virtual Result<std::vector<RunInfo>> recent_runs(const std::string& name, size_t limit) = 0;
  // The feeds with change-log entries after `after_seq` up to `up_to_seq`
  // (the refresher renders only their sets again).
  virtual Result<std::vector<int64_t>> changed_feeds(int64_t after_seq, int64_t up_to_seq) = 0;
  // How far a listing by datestamp may go now: no change committed from now
  // on carries a datestamp before this (the database's clock, read under
  // the change log's lock). unsupported: a store without datestamps.
  virtual Result<Timestamp> datestamp_horizon() {
    return make_error(ErrorKind::permanent, "this store keeps no datestamps");
  }
  // The resources held, by datestamp (see DatedQuery).
  virtual Result<std::vector<DatedResource>> dated_resources(const DatedQuery& q) {
    (void)q;
    return make_error(ErrorKind::permanent, "this store keeps no datestamps");
  }
  // One resource with its datestamp; nullopt when never held.
  virtual Result<std::optional<DatedResource>> dated_resource(int64_t feed_id, const std::string& uri) {
    (void)feed_id;
    (void)uri;
    return make_error(ErrorKind::permanent, "this store keeps no datestamps");
  }
  // The distinct hrefs of the rel=`rel` links of these feeds' resources, in
  // order, at most `limit` (the upstream sets of our OAI-PMH face's
  // ListSets). Reads every resource of the feeds.
  virtual Result<std::vector<std::string>> link_targets(const std::vector<int64_t>& /*feed_ids*/,
                                                        const std::string& /*rel*/, size_t /*limit*/) {
    return std::vector<std::string>{};
  }
  // The oldest datestamp held (nullopt: nothing held).
  virtual Result<std::optional<Timestamp>> earliest_datestamp() {
    return make_error(ErrorKind::permanent, "this store keeps no datestamps");
  }
  // What retention compacted, one per published set it ever compacted,
  // ordered by set name (a store without retention: none).
  virtual Result<std::vector<Compaction>> compactions() { return std::vector<Compaction>{}; }
};

} // namespace tributary::store

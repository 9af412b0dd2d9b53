#pragma once

#include "common/result.h"
#include "resourcesync/datetime.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

// The documents of our own that ResourceSync Archives list (schema 0013):
// each a blob named by the URL path it is served under, so that every node
// serves the same archived bytes and the archive outlives the change log's
// retention.
namespace tributary::store {

struct ArchivedDocument {
  std::string url_path;
  std::string set_name;
  // "changelist", "resourcelist", "changedump" (an archived Change Dump of
  // one package) or "changedump-package" (its ZIP, or the ZIP's manifest)
  std::string kind;
  // A Change List part: its number and span.
  size_t part = 0;
  std::optional<rs::Timestamp> from;
  std::optional<rs::Timestamp> until;
  // A Resource List snapshot: its name, `at`, `completed`; is_index: the
  // document the archive names (the list, or its index when in parts).
  std::string snapshot;
  std::optional<rs::Timestamp> at;
  std::optional<rs::Timestamp> completed;
  bool is_index = true;
  std::string sha256;
  uint64_t length = 0;
  rs::Timestamp archived_at;
};

class ArchiveStore {
public:
  virtual ~ArchiveStore() = default;
  // Records documents (one already recorded under a path is kept as it is:
  // archived bytes never change).
  virtual Result<void> put_archived(const std::vector<ArchivedDocument>& docs) = 0;
  // A set's archived documents of a kind, oldest first (Change List parts
  // by number, snapshots by `at`).
  virtual Result<std::vector<ArchivedDocument>> archived(const std::string& set, const std::string& kind) = 0;
  // The one served under `url_path`, if any.
  virtual Result<std::optional<ArchivedDocument>> archived_document(const std::string& url_path) = 0;
  // Retention: removes Change List parts that ended, and snapshots taken,
  // before `before`; how many documents went.
  virtual Result<uint64_t> expire_archived(rs::Timestamp before) = 0;
};

} // namespace tributary::store

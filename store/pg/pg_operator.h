#pragma once

// Room store/pg/pg_operator: the operator's side of the database (schema
// 0021): pauses kept there (so that they hold on every node and across
// restarts), the log of who did what, the removed sources and their purge,
// and the actions that are a statement each (retry now, refuse held
// deletions). A store object of its own (a pooled connection per call),
// one statement at a time.

#include "resourcesync/datetime.h"
#include "common/result.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tributary::store {

// A source an operator paused (schema 0021).
struct PauseInfo {
  std::string source;
  rs::Timestamp at;
  std::string by;
  std::string reason;
};

// An operator's action on a source (schema 0021).
struct OperatorAction {
  int64_t id = 0;
  std::string source;
  std::string action; // pause, resume, sync, audit, retry, confirm-deletions, refuse-deletions, retire
  std::string actor;  // who: the name the operator gave, and the client's address
  rs::Timestamp at;
  std::string detail;
};

class PgOperatorStore {
public:
  // Connects and checks the schema version.
  static Result<std::unique_ptr<PgOperatorStore>> open(const std::string& conninfo);
  ~PgOperatorStore();

  // Every paused source.
  Result<std::vector<PauseInfo>> pauses();
  // Pauses (again: the newest word stands) and records the action.
  Result<void> pause(const std::string& source, const std::string& by, const std::string& reason);
  // Resumes and records the action; false when it was not paused.
  Result<bool> resume(const std::string& source, const std::string& by);
  Result<void> record_action(const std::string& source, const std::string& action, const std::string& actor,
                             const std::string& detail);
  // The source's newest `limit` actions, newest first.
  Result<std::vector<OperatorAction>> actions(const std::string& source, size_t limit);
  // Every resource of the source waiting for a retry is due now; how many.
  Result<uint64_t> retry_now(const std::string& source);
  // Removed sources (schema 0021).
  // Sources held in the database but not in `configured` are marked
  // removed (since now, if not already); configured ones are unmarked.
  // The newly removed, by name.
  Result<std::vector<std::string>> mark_removed(const std::vector<std::string>& configured);
  // Purges every trace of a source that is not configured: its feeds,
  // resources, change log, runs and history (content blobs become
  // garbage for `tributary gc`), its pause and removal mark. Its operator
  // actions are kept. False when there was nothing of it. With
  // `keep_mark` (tributary retire) its removal mark stays, so that its URLs
  // answer 410 Gone until removed_source_retention has passed since its
  // removal (gc then purges the mark: 404 from then on).
  Result<bool> purge_source(const std::string& source, bool keep_mark = false);
  // The removed sources marked longer ago than `older_than`.
  Result<std::vector<std::string>> removed_before(std::chrono::seconds older_than);
  // The operator refuses the source's held deletions: the holds are
  // dropped, nothing is deleted (a later baseline whose list still lacks
  // the resources holds again); how many holds were dropped.
  Result<uint64_t> refuse_deletions(const std::string& source);

private:
  struct Impl;
  explicit PgOperatorStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

} // namespace tributary::store

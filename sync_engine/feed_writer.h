#pragma once

// Room sync_engine/feed_writer: the batch path. Every write a run makes to a
// feed goes through here: what a batch holds is decided from what the store
// holds (held_for, the overlay of the batch in flight), what is fetched is
// fetched, and the batch, its change log entries (which the store admits by
// the one rule of store/history_rule.h) and the watermark it reaches are
// handed to the committer together. The ways of syncing (baseline.cpp,
// incremental.cpp, change_dump.cpp, list_poll.cpp, audit.cpp) and the other
// kinds of Source (oai/, iiif/) call these functions; none builds a
// store::Batch of its own.

#include "sync_engine/run_context.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tributary::sync {

// Applies one batch of a baseline: what is held unchanged is skipped, the
// rest comes from `source` (the network by default, a dump package, or an
// OAI-PMH page); `reached`, when given, is committed with it.
Result<void> baseline_batch(RunContext& ctx, int64_t feed, std::vector<rs::Entry>& all,
                            const ContentSource& source = {}, const std::optional<Watermark>& reached = std::nullopt);

// Ends a baseline: everything listed was seen, so what we hold beyond it is
// gone upstream (through the mass-deletion guard; not with
// `delete_unlisted` false, when earlier runs saw part of the list). The
// watermark starts a safe overlap before `at` (see k_list_overlap).
Result<void> close_baseline(RunContext& ctx, int64_t feed, std::optional<rs::Timestamp> at,
                            std::optional<rs::Timestamp> completed = std::nullopt, bool delete_unlisted = true);

// Deletes what the run did not see of the feed (Store::delete_unseen, into
// the baseline's log window when there is one), through the mass-deletion
// guard: the deletions counted, a hold counted and said in the run's notes,
// `lacks` naming what no longer names them ("the list lacks").
Result<store::DeletionOutcome> delete_unseen(RunContext& ctx, int64_t feed, const Watermark& w,
                                             const std::string& lacks);

// A change to apply, in order.
struct PendingChange {
  rs::Entry entry;
  rs::Timestamp time;
  int64_t position = 0; // among changes of the same time in its list
  bool selected = true; // by the source's include/exclude filters
  // The entry says created or updated only as "not deleted" (an OAI-PMH
  // record): change_batch decides which from what we hold.
  bool kind_open = false;
};
// Applies a batch of changes of one list in one transaction with the
// watermark it reaches (incremental.cpp; also the Change Dump's way).
// `settle`, when given, decides the watermark the batch reaches instead (a
// kind whose lists are not in time order: OAI-PMH).
Result<void> change_batch(RunContext& ctx, int64_t feed, const std::string& list_url,
                          std::vector<PendingChange>& changes, Watermark& w, const ContentSource& source = {},
                          const std::function<void(Watermark&)>& settle = {});

// Moves the feed's watermark alone, once every batch submitted has
// committed: `edit` changes the settled watermark, and the result commits in
// a batch of its own.
Result<void> move_watermark(RunContext& ctx, int64_t feed, const std::function<void(Watermark&)>& edit);
// Commits `w` as the feed's watermark, with nothing else, after the batch in
// flight (no wait: an OAI-PMH page with no record moves where the harvest
// goes on).
Result<void> commit_watermark(RunContext& ctx, int64_t feed, const Watermark& w);
// Commits that the run saw these URIs listed (Batch::seen: what a later
// delete_unseen keeps), with nothing else.
Result<void> commit_seen(RunContext& ctx, int64_t feed, std::vector<std::string> uris);
// Fetches the content of these failed resources again, in one batch: each
// one stored now is logged as the change it was (a resource a listing named
// is created, or updated if we held it); each failure waits twice as long.
Result<void> retry_batch(RunContext& ctx, int64_t feed, const std::vector<store::RetryRecord>& due);
// Commits changes for the log alone (a baseline's log window, flushed), in
// batches of the run's batch size.
Result<void> commit_log(RunContext& ctx, int64_t feed, std::vector<ChangeRecord> changes);

// Within the batch path (feed_writer.cpp, change_batch.cpp): the content
// of `to_fetch` from `source` (the network when empty), or, with `ended`
// set to what the batch returns, nothing: a cancelled run commits `batch`
// as it is (the store refuses it: nothing is applied), a full disk fails
// the batch whole.
std::optional<std::vector<Result<FetchedContent>>> fetch_for_batch(RunContext& ctx, const ContentSource& source,
                                                                   const std::vector<const rs::Entry*>& to_fetch,
                                                                   store::Batch& batch, Result<void>& ended);

} // namespace tributary::sync

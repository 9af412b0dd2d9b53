#include "sync_engine/run_context.h"

// The retry of failed content: resources whose content failed (every
// location failed, or the bytes did not verify) are kept in the store's
// retry table with the entry they came from, and fetched again here by later
// incremental runs once due.
namespace tributary::sync {

// Fetches the feed's failed resources that are due again (up to a
// thousand a run): each one stored now is logged as the change it was (a
// resource a listing named is created, or updated if we held it); each
// failure waits twice as long.
Result<void> retry_failed(RunContext& ctx, int64_t feed) {
  if (auto r = ctx.drain(); !r) {
    return r;
  }
  auto due = ctx.store.due_retries(
      feed, std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now()), 1000);
  if (!due) {
    return tl::unexpected(due.error());
  }
  if (due->empty()) {
    return {};
  }
  store::Batch batch;
  batch.feed_id = feed;
  batch.run_id = ctx.run_id;
  std::vector<const rs::Entry*> to_fetch;
  std::vector<std::string> uris;
  for (const auto& r : *due) {
    to_fetch.push_back(&r.entry);
    uris.push_back(r.uri);
  }
  auto held = ctx.held_for(feed, uris);
  if (!held) {
    return tl::unexpected(held.error());
  }
  auto results = ctx.fetch_all(to_fetch);
  if (ctx.cancelled()) {
    return ctx.commit(batch); // refused: nothing is applied
  }
  if (auto full = RunContext::disk_full(results)) {
    return tl::unexpected(*full); // nothing of this batch is applied; the run waits for space
  }
  size_t stored = 0;
  for (size_t i = 0; i < due->size(); ++i) {
    const store::RetryRecord& was = (*due)[i];
    const rs::Entry& e = was.entry;
    if (!results[i]) {
      ++batch.counters.failed;
      ctx.error(e.loc,
                results[i].error().message + " (failed before: attempt " + std::to_string(was.attempts + 1) + ")");
      batch.retries.push_back(
          ctx.retry_for(e, was.change, was.change_datetime, results[i].error().message, was.attempts + 1));
      continue;
    }
    ++stored;
    ResourceRecord rec = record_for(e, results[i]->blob, results[i]->served_from, results[i]->type);
    batch.counters.bytes += results[i]->blob.length;
    auto it = held->find(e.loc);
    const bool had = it != held->end() && it->second.state == ResourceState::live;
    if (had && it->second.blob_sha256 == rec.blob_sha256) {
      ++batch.counters.unchanged;
    } else {
      const rs::Change change = had ? rs::Change::updated : was.change.value_or(rs::Change::created);
      ++(change == rs::Change::created ? batch.counters.created : batch.counters.updated);
      batch.changes.push_back(ChangeRecord{change, was.change_datetime ? was.change_datetime : e.change_time(), rec});
    }
    batch.upserts.push_back(std::move(rec));
  }
  ctx.note("retried " + std::to_string(due->size()) + " resource" + (due->size() == 1 ? "" : "s") +
           " whose content failed before: " + std::to_string(stored) + " stored, " +
           std::to_string(due->size() - stored) + " still failing");
  if (auto r = ctx.commit(batch); !r) {
    return r;
  }
  return ctx.drain();
}

} // namespace tributary::sync

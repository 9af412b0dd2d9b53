#include "sync_engine/feed_writer.h"
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
  auto due = ctx.store().due_retries(
      feed, std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now()), 1000);
  if (!due) {
    return tl::unexpected(due.error());
  }
  if (due->empty()) {
    return {};
  }
  return retry_batch(ctx, feed, *due);
}

} // namespace tributary::sync

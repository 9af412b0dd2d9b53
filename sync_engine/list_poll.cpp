#include "sync_engine/feed_writer.h"
#include "sync_engine/run_context.h"

// Following a Source that publishes no Change List: its Resource List (or
// index, or plain sitemap) is polled at every run, and what changed becomes
// our own change log.
namespace tributary::sync {

Result<void> poll_list(RunContext& ctx, int64_t feed, const std::string& rl_url) {
  auto doc = ctx.spool(rl_url, rs::Capability::resourcelist, /*conditional=*/true);
  if (!doc) {
    return tl::unexpected(doc.error());
  }
  if (!(*doc)->not_modified()) {
    ctx.note("no Change List offered: compared the Resource List " + rl_url + " with what we hold");
    return baseline_from_spooled(ctx, feed, std::move(*doc), /*remember=*/true);
  }
  // The index is unchanged: its parts may not be (a Source rewrites the
  // part that changed). Any part changed: the whole list is compared
  // again, since what it no longer lists can be told only from all of it.
  const auto known = ctx.validators().get(ctx.src().name + " " + rl_url);
  const std::vector<std::string> parts = known ? known->parts : std::vector<std::string>{};
  for (const auto& part : parts) {
    auto p = ctx.spool(part, rs::Capability::resourcelist, /*conditional=*/true);
    if (!p) {
      return tl::unexpected(p.error());
    }
    if (!(*p)->not_modified()) {
      ctx.note("no Change List offered: a part of the Resource List Index " + rl_url +
               " changed; compared the whole list with what we hold");
      auto top = ctx.spool(rl_url, rs::Capability::resourcelist);
      if (!top) {
        return tl::unexpected(top.error());
      }
      return baseline_from_spooled(ctx, feed, std::move(*top), /*remember=*/true);
    }
  }
  ctx.note("no Change List offered: the Resource List " + rl_url + " is not modified since it was last compared");
  return {};
}

} // namespace tributary::sync

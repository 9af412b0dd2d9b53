#include "sync_engine/feed_writer.h"
#include "sync_engine/run_context.h"

#include <unordered_set>

// Audit: how what we hold of a feed compares with its Resource List (in
// sync, missing, extra, changed); with repair, a baseline.
namespace tributary::sync {

Result<void> audit(RunContext& ctx, int64_t feed, const std::string& rl_url) {
  if (auto r = ctx.drain(); !r) {
    return r;
  }
  auto doc = ctx.spool(rl_url, rs::Capability::resourcelist);
  if (!doc) {
    return tl::unexpected(doc.error());
  }
  std::vector<std::unique_ptr<SpooledDocument>> parts;
  if ((*doc)->header().root == rs::RootElement::sitemapindex) {
    CollectingHandler h;
    if (auto r = (*doc)->read(h); !r) {
      return tl::unexpected(r.error());
    }
    for (const auto& e : h.document.entries) {
      auto p = ctx.spool(e.loc, rs::Capability::resourcelist);
      if (!p) {
        return tl::unexpected(p.error());
      }
      parts.push_back(std::move(*p));
    }
  } else {
    parts.push_back(std::move(*doc));
  }
  std::unordered_set<std::string> listed;
  AuditCounts& a = ctx.report().audit;
  Result<void> status;
  for (const auto& p : parts) {
    ChunkHandler h(ctx.opt().batch_size, [&](std::vector<rs::Entry>& entries) {
      std::vector<std::string> uris;
      for (const auto& e : entries) {
        if (ctx.src().selects(e.loc, e.md ? e.md->type : std::nullopt)) {
          uris.push_back(e.loc);
        }
      }
      auto held = ctx.store().resources(feed, uris);
      if (!held) {
        status = tl::unexpected(held.error());
        return false;
      }
      for (const auto& e : entries) {
        if (!ctx.src().selects(e.loc, e.md ? e.md->type : std::nullopt)) {
          continue;
        }
        listed.insert(e.loc);
        auto it = held->find(e.loc);
        if (it == held->end() || it->second.state == ResourceState::deleted) {
          ++a.missing;
        } else if (same_content(it->second, e) ||
                   (!rs::strongest_hash(offered_hashes(e)) && !e.lastmod &&
                    (!e.md || !e.md->length || e.md->length == it->second.length))) {
          ++a.in_sync;
        } else {
          ++a.changed;
        }
      }
      return true;
    });
    ctx.watch_rejections(h, p->url());
    if (auto r = p->read(h); !r) {
      return tl::unexpected(r.error());
    }
    h.finish();
    for (auto& u : ctx.take_rejected_uris()) {
      listed.insert(std::move(u)); // listed, with a bad value: not extra
    }
    if (!status) {
      return status;
    }
  }
  auto each = ctx.store().for_each_resource(feed, [&](const ResourceRecord& r) {
    if (r.state == ResourceState::live && !listed.count(r.uri)) {
      ++a.extra;
    }
  });
  if (!each) {
    return each;
  }
  ctx.note("audit: in sync " + std::to_string(a.in_sync) + ", missing " + std::to_string(a.missing) + ", extra " +
       std::to_string(a.extra) + ", changed " + std::to_string(a.changed));
  if (ctx.opt().repair && (a.missing || a.extra || a.changed)) {
    ctx.note("repair: baseline from the Resource List");
    return baseline_from_list(ctx, feed, rl_url);
  }
  return {};
}

} // namespace tributary::sync

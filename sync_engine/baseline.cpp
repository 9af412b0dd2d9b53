#include "sync_engine/feed_writer.h"
#include "sync_engine/run_context.h"

#include "sync_engine/read_ahead.h"

#include "common/thread_name.h"

#include <future>
#include <unordered_map>

// A baseline: make what we hold of a feed equal to its Resource List (or
// Resource Dump), then start the watermark at the list's `at`.
namespace tributary::sync {

namespace {

Result<void> baseline_document(RunContext& ctx, int64_t feed, const SpooledDocument& doc) {
  if (doc.deferred()) {
    // Its first batch is fetched while it is validated; nothing of it is
    // committed before the verdict.
    ctx.hold_commits_until([&ctx, &doc]() -> Result<void> {
      auto r = ctx.check_spooled(doc, rs::Capability::resourcelist);
      if (r) {
        ctx.add_total(doc.summary().entries);
      }
      return r;
    });
  } else {
    ctx.add_total(doc.summary().entries);
  }
  Result<void> status;
  ChunkHandler h(ctx.opt().batch_size, [&](std::vector<rs::Entry>& entries) {
    status = baseline_batch(ctx, feed, entries);
    ctx.add_done(entries.size());
    ctx.progress(doc.url());
    return static_cast<bool>(status);
  });
  ctx.watch_rejections(h, doc.url());
  // A first batch of an eighth: fetching starts once 125 entries are read
  // rather than 1,000 (3 ms of a 10,000-resource baseline's first 30).
  const size_t first = ctx.opt().batch_size >= 64 ? ctx.opt().batch_size / 8 : ctx.opt().batch_size;
  h.set_first_chunk(first);
  auto r = read_ahead(doc, h, ctx.opt().batch_size, [&] { return !status; }, first);
  // The verdict, if no commit asked for it yet (every entry unchanged, or
  // the reading stopped): never left behind for a later commit.
  auto valid = ctx.pass_commit_gate();
  if (!status) {
    return status;
  }
  if (!valid) {
    return valid;
  }
  if (!r) {
    return tl::unexpected(r.error());
  }
  if (h.finish() && status) {
    if (auto rest = ctx.take_rejected_uris(); !rest.empty()) {
      status = commit_seen(ctx, feed, std::move(rest)); // rejected entries after the last batch: listed all the same
    }
  }
  return status;
}

} // namespace


Result<void> baseline_from_list(RunContext& ctx, int64_t feed, const std::string& rl_url) {
  ctx.validators().forget_prefix(ctx.src().name + " "); // the watermark moves: ask for everything again
  auto doc = ctx.spool(rl_url, rs::Capability::resourcelist, false, /*defer_validation=*/true);
  if (!doc) {
    return tl::unexpected(doc.error());
  }
  // Its validators are kept: a Source that offers no Change List is then
  // polled with a conditional request from the first run after this one.
  return baseline_from_spooled(ctx, feed, std::move(*doc), true);
}

Result<void> baseline_from_spooled(RunContext& ctx, int64_t feed, std::unique_ptr<SpooledDocument> top,
                                   bool remember) {
  auto* doc = &top; // as the Result it was
  std::vector<std::string> parts;
  const rs::DocumentHeader* early = (*doc)->early_header();
  if ((early ? early->root : (*doc)->header().root) == rs::RootElement::sitemapindex) {
    if ((*doc)->deferred()) {
      if (auto v = ctx.check_spooled(**doc, rs::Capability::resourcelist); !v) {
        return v; // an index is read whole here: validated first
      }
    }
    CollectingHandler h;
    if (auto r = (*doc)->read(h); !r) {
      return tl::unexpected(r.error());
    }
    for (const auto& e : h.document.entries) {
      parts.push_back(e.loc);
    }
  }
  ctx.restart_progress();
  if (parts.empty()) {
    if (auto r = baseline_document(ctx, feed, **doc); !r) {
      return r;
    }
  } else {
    for (const auto& part : parts) {
      auto p = ctx.spool(part, rs::Capability::resourcelist, false, /*defer_validation=*/true);
      if (!p) {
        return tl::unexpected(p.error());
      }
      if (auto r = baseline_document(ctx, feed, **p); !r) {
        return r;
      }
      if (remember) {
        ctx.remember_validators(**p);
      }
    }
  }
  // (Read once validated: a header element after the entries counts too.)
  const auto at = (*doc)->header().md->at;
  const auto completed = (*doc)->header().md->completed;
  if (auto r = close_baseline(ctx, feed, at, completed); !r) {
    return r;
  }
  if (remember) {
    ctx.remember_validators(*top, parts);
  }
  return {};
}

// A baseline from a Resource Dump (or its index): each package is
// downloaded to a file, verified against its rs:md, checked whole, and
// applied in one transaction; the manifests' earliest `at` is where
// incremental sync continues.
constexpr size_t k_dump_slice = 2500;

Result<void> baseline_from_dump(RunContext& ctx, int64_t feed, const std::string& rd_url) {
  ctx.validators().forget_prefix(ctx.src().name + " ");
  std::optional<rs::Timestamp> at;
  auto packages = dump_packages(ctx, rd_url, rs::Capability::resourcedump, at);
  if (!packages) {
    return tl::unexpected(packages.error());
  }
  if (packages->empty()) {
    return make_error(ErrorKind::invalid_document, rd_url + ": the Resource Dump lists no package");
  }
  ctx.restart_progress();
  std::optional<rs::Timestamp> manifest_at;
  // The next package is downloaded, verified and opened on a thread of its
  // own while this one is applied: done in turn, each package's download
  // and check left the store idle, and the applying (bound by the store)
  // left the network idle. One ahead: two packages on disk at most.
  auto fetch_at = [&ctx, &packages](size_t i) {
    return std::async(std::launch::async, [&ctx, &pkg = (*packages)[i]] {
      name_thread("next package");
      return fetch_package(ctx, pkg, rs::Capability::resourcedump_manifest);
    });
  };
  std::future<Result<OpenedPackage>> next = fetch_at(0);
  for (size_t i = 0; i < packages->size(); ++i) {
    const rs::Entry& pkg = (*packages)[i];
    auto opened = next.get();
    if (!opened) {
      return tl::unexpected(opened.error());
    }
    note_warnings(ctx, *opened);
    if (i + 1 < packages->size()) {
      next = fetch_at(i + 1); // waited for on any return below (the future's destructor)
    }
    const DumpPackage& package = *opened->package;
    if (auto a = package.header().md->at; a && (!manifest_at || *a < *manifest_at)) {
      manifest_at = a;
    }
    // In slices, each its own transaction, read from the manifest as they
    // are applied: a package of 10,000 applied as one batch held every
    // record, its change and its seen mark at once (about 100 MB at a
    // million resources). A baseline needs no package applied whole: an
    // interrupted one is run again, and what it applied is then unchanged.
    // Slices of 2,500 (or batch_size, if larger): at 1,000 the commits (a
    // pack sync and an index sync each) cost a quarter of the rate.
    ctx.add_total(package.size());
    const size_t step = std::max<size_t>(ctx.opt().batch_size, k_dump_slice);
    auto r = package.read_manifest(step, [&](std::vector<rs::Entry>& entries, size_t from) -> Result<void> {
      const rs::Entry* first = entries.data();
      auto applied = baseline_batch(ctx, feed, entries, [&](const std::vector<const rs::Entry*>& wanted) {
        return extract_entries(ctx, package, wanted,
                               [first, from](const rs::Entry* e) { return from + static_cast<size_t>(e - first); });
      });
      ctx.add_done(entries.size());
      ctx.progress(pkg.loc);
      return applied;
    });
    if (!r) {
      return r;
    }
  }
  if (auto r = close_baseline(ctx, feed, manifest_at ? manifest_at : at); !r) {
    return r;
  }
  ctx.note("baselined from the Resource Dump " + rd_url + " (" + std::to_string(packages->size()) + " package" +
           (packages->size() == 1 ? "" : "s") + ")");
  return {};
}

} // namespace tributary::sync

#include "sync_engine/run_context.h"

#include "sync_engine/url_resolve.h"

#include <algorithm>
#include <unordered_map>

// Catch-up from a Change Dump (or index): whole packages of changes, each
// applied in one transaction with the watermark it reaches.
namespace tributary::sync {

namespace {

// The changes of a manifest (of the package at `loc`) strictly after the
// watermark, in order: (index in the manifest, time, position among
// changes of the same time).
struct ChangeAt {
  size_t index;
  rs::Timestamp time;
  int64_t position;
};
Result<std::vector<ChangeAt>> changes_after(const std::vector<rs::Entry>& entries, const std::string& loc,
                                            const Watermark& w) {
  std::vector<ChangeAt> out;
  std::optional<rs::Timestamp> prev_time;
  int64_t position = -1;
  for (size_t i = 0; i < entries.size(); ++i) {
    const rs::Entry& e = entries[i];
    const auto t = e.change_time();
    if (!t || !e.change()) {
      return make_error(ErrorKind::invalid_document, loc + ": manifest entry " + e.loc + " has no change time");
    }
    if (prev_time && *t < *prev_time) {
      return make_error(ErrorKind::invalid_document, loc + ": manifest not in forward chronological order");
    }
    position = prev_time && *prev_time == *t ? position + 1 : 0;
    prev_time = t;
    const bool after = !w.last_time || *t > *w.last_time ||
                       (*t == *w.last_time && (w.change_list_url && *w.change_list_url == loc
                                                   ? position > w.last_position
                                                   : e.loc != w.last_uri));
    if (after) {
      out.push_back(ChangeAt{i, *t, position});
    }
  }
  return out;
}

// What the manifest copy a Change Dump package links (rel="contents")
// says of it: its first and last change, how many changes it holds and
// how many are after the watermark. Nothing when there is no copy or it
// is unusable (the package is then downloaded, which is always correct).
struct ManifestSpan {
  std::optional<rs::Timestamp> first, last;
  size_t entries = 0;
  size_t after = 0;
};
std::optional<ManifestSpan> manifest_copy_span(RunContext& ctx, const rs::Entry& pkg, const Watermark& w) {
  const rs::Link* contents = nullptr;
  for (const auto& l : pkg.links) {
    if (l.rel == "contents") {
      contents = &l;
    }
  }
  if (!contents) {
    return std::nullopt;
  }
  const std::string url = resolve_reference(pkg.loc, contents->href).value_or(contents->href);
  CollectingHandler h;
  auto after = [&]() -> Result<std::vector<ChangeAt>> {
    auto doc = ctx.spool(url, rs::Capability::changedump_manifest);
    if (!doc) {
      return tl::unexpected(doc.error());
    }
    if (auto r = (*doc)->read(h); !r) {
      return tl::unexpected(r.error());
    }
    return changes_after(h.document.entries, pkg.loc, w);
  }();
  if (!after) {
    ctx.note("the manifest copy of " + pkg.loc + " is unusable, so the package is downloaded: " + after.error().message);
    return std::nullopt;
  }
  ManifestSpan span;
  span.entries = h.document.entries.size();
  span.after = after->size();
  // The manifest's own period when it states one; else its first and
  // last change (which cannot show that no change fell before the first).
  const auto& md = h.document.header.md;
  span.first = md && md->from ? md->from : std::nullopt;
  span.last = md && md->until ? md->until : std::nullopt;
  if (!h.document.entries.empty()) {
    span.first = span.first ? span.first : h.document.entries.front().change_time();
    span.last = span.last ? span.last : h.document.entries.back().change_time();
  }
  return span;
}

} // namespace

// Catch-up from a Change Dump (or index): its packages in forward
// chronological order, each manifest's changes strictly after the
// watermark applied in one transaction with the watermark. Packages that
// end before the watermark are not downloaded. "auto" takes the dump only
// when it covers the watermark and at least one whole package of changes
// is waiting; "dumps" whenever it covers the watermark. Otherwise the
// Change List does the work.
Result<void> incremental_from_dump(RunContext& ctx, int64_t feed, const std::string& cd_url) {
  auto wm = ctx.settled_watermark(feed);
  if (!wm) {
    return tl::unexpected(wm.error());
  }
  Watermark w = *wm;
  std::optional<rs::Timestamp> unused_at;
  auto listed = dump_packages(ctx, cd_url, rs::Capability::changedump, unused_at, w.last_time);
  if (!listed) {
    return tl::unexpected(listed.error());
  }
  std::vector<rs::Entry> packages = std::move(*listed);
  // An undated package (no from/until, a deviation real Sources make) is
  // dated by its manifest copy (rel="contents"), which also says whether
  // anything in it is new, so that an applied package is not downloaded
  // again.
  std::vector<std::pair<rs::Entry, std::optional<ManifestSpan>>> dated;
  size_t dated_by_manifest = 0;
  for (auto& p : packages) {
    std::optional<ManifestSpan> span;
    if ((!p.md || !p.md->from || !p.md->until) && w.last_time) {
      span = manifest_copy_span(ctx, p, w);
    }
    if (span) {
      ++dated_by_manifest;
      if (!p.md) {
        p.md = rs::Metadata{};
      }
      p.md->from = p.md->from ? p.md->from : span->first;
    }
    dated.emplace_back(std::move(p), span);
  }
  // Forward chronological order, by each package's `from`.
  std::stable_sort(dated.begin(), dated.end(), [](const auto& a, const auto& b) {
    const auto fa = a.first.md ? a.first.md->from : std::nullopt;
    const auto fb = b.first.md ? b.first.md->from : std::nullopt;
    return fa && fb && *fa < *fb;
  });
  std::vector<const rs::Entry*> todo;
  bool covers = !w.last_time;
  size_t whole = 0;
  for (const auto& [p, span] : dated) {
    // Plain values, not optionals: GCC 12 warns of optional<time_point>
    // read uninitialised here (it is not).
    const bool has_from = p.md && p.md->from && w.last_time;
    const bool has_until = p.md && p.md->until && w.last_time;
    const rs::Timestamp last = w.last_time.value_or(rs::Timestamp{});
    const rs::Timestamp from = has_from ? *p.md->from : rs::Timestamp{};
    const rs::Timestamp until = has_until ? *p.md->until : rs::Timestamp{};
    if (span ? span->after == 0 : (has_until && until < last)) {
      continue; // already applied
    }
    if (todo.empty() && has_from && from <= last) {
      covers = true;
    }
    if (span ? span->after == span->entries : (has_from && has_until && from >= last)) {
      ++whole;
    }
    todo.push_back(&p);
  }
  if (dated_by_manifest > 0) {
    ctx.note(std::to_string(dated_by_manifest) + " Change Dump package" + (dated_by_manifest == 1 ? "" : "s") +
         " without from/until dated by the manifest copy they link (rel=\"contents\")");
  }
  if (todo.empty()) {
    return {};
  }
  if (!covers) {
    return make_error(ErrorKind::invalid_document, cd_url + ": the Change Dump starts after the last change applied");
  }
  if (ctx.src.strategy == "auto" && whole == 0) {
    return {}; // a small backlog: the Change List is cheaper
  }
  ctx.progress_start = std::chrono::steady_clock::now();
  for (const rs::Entry* pkg : todo) {
    const std::string& loc = pkg->loc;
    auto opened = open_package(ctx, *pkg, rs::Capability::changedump_manifest);
    if (!opened) {
      return tl::unexpected(opened.error());
    }
    const DumpPackage& package = *opened->package;
    // The manifest's changes after the watermark, in order, each
    // remembering its place in the manifest (for its bitstream).
    const auto& entries = package.manifest().entries;
    std::vector<PendingChange> pending;
    std::vector<size_t> manifest_index;
    auto after = changes_after(entries, loc, w);
    if (!after) {
      return tl::unexpected(after.error());
    }
    for (const auto& [i, t, position] : *after) {
      const rs::Entry& e = entries[i];
      pending.push_back(PendingChange{e, t, position, ctx.src.selects(e.loc, e.md ? e.md->type : std::nullopt)});
      manifest_index.push_back(i);
    }
    ctx.total += entries.size();
    if (!pending.empty()) {
      std::unordered_map<const rs::Entry*, size_t> index_of;
      for (size_t k = 0; k < pending.size(); ++k) {
        index_of[&pending[k].entry] = manifest_index[k];
      }
      auto r = change_batch(ctx, feed, loc, pending, w, [&](const std::vector<const rs::Entry*>& wanted) {
        return extract_entries(ctx, package, wanted, [&index_of](const rs::Entry* e) { return index_of.at(e); });
      });
      if (!r) {
        return r;
      }
      if (auto d = ctx.drain(); !d) {
        return d;
      }
    }
    ctx.done += entries.size();
    ctx.progress(loc);
  }
  ctx.note("caught up from the Change Dump " + cd_url + " (" + std::to_string(todo.size()) + " package" +
       (todo.size() == 1 ? "" : "s") + ")");
  return {};
}

} // namespace tributary::sync

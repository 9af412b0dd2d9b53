#include "sync_engine/feed_writer.h"
#include "sync_engine/run_context.h"

#include "common/url_resolve.h"

#include <algorithm>
#include <set>
#include <unordered_map>

// Catch-up from a Change Dump (or index): packages of changes, each applied
// in slices, every slice in one transaction with the watermark it reaches.
namespace tributary::sync {

namespace {

// Walks the changes of a manifest (of the package at `loc`) in order,
// saying of each whether it comes strictly after the watermark, and with
// which time and position among changes of the same time. A change without
// a time, or out of forward chronological order, stops the walk.
struct ChangeAt {
  rs::Timestamp time;
  int64_t position;
};
class ChangeOrder {
public:
  ChangeOrder(const std::string& loc, const Watermark& w) : m_loc(loc), m_w(w) {}
  // The change's time and position when it is after the watermark.
  Result<std::optional<ChangeAt>> next(const rs::Entry& e) {
    const auto t = e.change_time();
    if (!t || !e.change()) {
      return make_error(ErrorKind::invalid_document, m_loc + ": manifest entry " + e.loc + " has no change time");
    }
    if (m_prev && *t < *m_prev) {
      return make_error(ErrorKind::invalid_document, m_loc + ": manifest not in forward chronological order");
    }
    m_position = m_prev && *m_prev == *t ? m_position + 1 : 0;
    m_prev = t;
    const bool after = !m_w.last_time || *t > *m_w.last_time ||
                       (*t == *m_w.last_time && (m_w.change_list_url && *m_w.change_list_url == m_loc
                                                     ? m_position > m_w.last_position
                                                     : e.loc != m_w.last_uri));
    if (!after) {
      return std::nullopt;
    }
    return ChangeAt{*t, m_position};
  }

private:
  std::string m_loc;
  Watermark m_w;
  std::optional<rs::Timestamp> m_prev;
  int64_t m_position = -1;
};

// What the manifest copy a Change Dump package links (rel="contents")
// says of it: its first and last change, how many changes it holds and
// how many are after the watermark. Nothing when there is no copy or it
// is unusable (the package is then downloaded, which is always correct).
struct ManifestSpan {
  std::optional<rs::Timestamp> first, last;
  size_t entries = 0;
  size_t after = 0;
};

// Counts a manifest copy's changes as they stream past.
class SpanHandler : public rs::DocumentHandler {
public:
  SpanHandler(const std::string& loc, const Watermark& w) : m_order(loc, w) {}
  void on_header(const rs::DocumentHeader& h) override { m_header = h; }
  void on_entry(rs::Entry&& e, uint64_t) override {
    if (!m_status) {
      return;
    }
    auto after = m_order.next(e);
    if (!after) {
      m_status = tl::unexpected(after.error());
      return;
    }
    m_span.first = m_span.first ? m_span.first : e.change_time();
    m_span.last = e.change_time();
    ++m_span.entries;
    m_span.after += *after ? 1 : 0;
  }
  // The span, with the manifest's own period when it states one (the first
  // and last change cannot show that no change fell before the first).
  Result<ManifestSpan> span() const {
    if (!m_status) {
      return tl::unexpected(m_status.error());
    }
    ManifestSpan out = m_span;
    const auto& md = m_header.md;
    out.first = md && md->from ? md->from : out.first;
    out.last = md && md->until ? md->until : out.last;
    return out;
  }

private:
  ChangeOrder m_order;
  rs::DocumentHeader m_header;
  ManifestSpan m_span;
  Result<void> m_status;
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
  SpanHandler h(pkg.loc, w);
  auto span = [&]() -> Result<ManifestSpan> {
    auto doc = ctx.spool(url, rs::Capability::changedump_manifest);
    if (!doc) {
      return tl::unexpected(doc.error());
    }
    if (auto r = (*doc)->read(h); !r) {
      return tl::unexpected(r.error());
    }
    return h.span();
  }();
  if (!span) {
    ctx.note("the manifest copy of " + pkg.loc + " is unusable, so the package is downloaded: " + span.error().message);
    return std::nullopt;
  }
  return *span;
}

// Applies one package: its manifest's changes after the watermark, read
// and applied in slices, each in one transaction with the watermark it
// reaches, so that memory holds one slice however large the package. An
// interrupted package (a bitstream that fails its hash, a crash) resumes
// at the first change of the slice that did not commit: the watermark
// carries the package's URL and the position within a time, as for a
// Change List.
constexpr size_t k_dump_slice = 2500;

Result<void> apply_package(RunContext& ctx, int64_t feed, const rs::Entry& pkg, Watermark& w) {
  const std::string& loc = pkg.loc;
  auto opened = open_package(ctx, pkg, rs::Capability::changedump_manifest);
  if (!opened) {
    return tl::unexpected(opened.error());
  }
  const DumpPackage& package = *opened->package;
  ctx.add_total(package.size());
  ChangeOrder order(loc, w);
  const size_t step = std::max<size_t>(ctx.opt().batch_size, k_dump_slice);
  auto r = package.read_manifest(step, [&](std::vector<rs::Entry>& entries, size_t from) -> Result<void> {
    std::vector<PendingChange> pending;
    std::vector<size_t> manifest_index;
    for (size_t k = 0; k < entries.size(); ++k) {
      auto after = order.next(entries[k]);
      if (!after) {
        return tl::unexpected(after.error());
      }
      if (*after) {
        rs::Entry& e = entries[k];
        const bool selected = ctx.src().selects(e.loc, e.md ? e.md->type : std::nullopt);
        pending.push_back(PendingChange{std::move(e), (*after)->time, (*after)->position, selected});
        manifest_index.push_back(from + k);
      }
    }
    ctx.add_done(entries.size());
    if (pending.empty()) {
      return {};
    }
    std::unordered_map<const rs::Entry*, size_t> index_of;
    for (size_t k = 0; k < pending.size(); ++k) {
      index_of[&pending[k].entry] = manifest_index[k];
    }
    auto applied = change_batch(ctx, feed, loc, pending, w, [&](const std::vector<const rs::Entry*>& wanted) {
      return extract_entries(ctx, package, wanted, [&index_of](const rs::Entry* e) { return index_of.at(e); });
    });
    ctx.progress(loc);
    return applied;
  });
  if (!r) {
    return r;
  }
  return ctx.drain();
}

} // namespace

// Catch-up from a Change Dump (or index): its packages in forward
// chronological order, each manifest's changes strictly after the
// watermark applied in slices, each with the watermark it reaches. Packages that
// end before the watermark are not downloaded. "auto" takes the dump only
// when it covers the watermark and at least one whole package of changes
// is waiting; "dumps" whenever it covers the watermark. Otherwise the
// Change List does the work.
namespace {

// The packages of a Change Dump (and of its archive) still to apply, in
// order: each dated (by its manifest copy when undated), those applied
// already left out.
class DumpPlan {
public:
  DumpPlan(RunContext& ctx, const Watermark& w) : m_ctx(ctx), m_w(w) {}

  // Adds packages. An undated package (no from/until, a deviation real
  // Sources make) is dated by its manifest copy (rel="contents"), which
  // also says whether anything in it is new, so that an applied package is
  // not downloaded again.
  void date(std::vector<rs::Entry>& more) {
    const Watermark& w = m_w;
    RunContext& ctx = m_ctx;
    for (auto& p : more) {
      std::optional<ManifestSpan> span;
      if ((!p.md || !p.md->from || !p.md->until) && w.last_time) {
        span = manifest_copy_span(ctx, p, w);
      }
      if (span) {
        ++m_dated_by_manifest;
        if (!p.md) {
          p.md = rs::Metadata{};
        }
        p.md->from = p.md->from ? p.md->from : span->first;
      }
      m_dated.emplace_back(std::move(p), span);
    }
    // Forward chronological order, by each package's `from`.
    std::stable_sort(m_dated.begin(), m_dated.end(), [](const auto& a, const auto& b) {
      const auto fa = a.first.md ? a.first.md->from : std::nullopt;
      const auto fb = b.first.md ? b.first.md->from : std::nullopt;
      return fa && fb && *fa < *fb;
    });
  }

  // What is still to apply, from the watermark.
  void plan() {
    const Watermark& w = m_w;
    m_todo.clear();
    m_covers = !w.last_time;
    m_whole = 0;
    for (const auto& [p, span] : m_dated) {
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
      if (m_todo.empty() && has_from && from <= last) {
        m_covers = true;
      }
      if (span ? span->after == span->entries : (has_from && has_until && from >= last)) {
        ++m_whole;
      }
      m_todo.push_back(&p);
    }
  }

  // The packages the Source's Change Dump Archive holds beyond the Change
  // Dump `cd_url` (ResourceSync Archives, section 7), added and planned
  // when they reach back to the watermark (else said in the run's notes).
  Result<void> bridge_from_archive(const std::string& cd_url, const std::string& cda_url) {
    RunContext& ctx = m_ctx;
    const Watermark& w = m_w;
    std::optional<rs::Timestamp> unused_at;
    const rs::Timestamp earliest = *m_todo.front()->md->from;
    auto archived = archived_spans(ctx, cda_url, rs::Capability::changedump_archive, *w.last_time);
    if (!archived) {
      ctx.note("the Change Dump Archive " + cda_url + " could not be read: " + archived.error().message);
      return {};
    }
    if (!bridges(*archived, *w.last_time, earliest)) {
      ctx.note("the Change Dump Archive " + cda_url + " does not reach back to the last change applied (" +
               rs::format_w3c_datetime(*w.last_time) + ")");
      return {};
    }
    std::set<std::string> have;
    for (const auto& d : m_dated) {
      have.insert(d.first.loc);
    }
    std::vector<rs::Entry> more;
    for (const auto& a : *archived) {
      if (a.url == cd_url) {
        continue; // the live one, read above
      }
      auto from_archive = dump_packages(ctx, a.url, rs::Capability::changedump, unused_at, w.last_time);
      if (!from_archive) {
        return tl::unexpected(from_archive.error());
      }
      for (auto& p : *from_archive) {
        if (have.insert(p.loc).second) {
          more.push_back(std::move(p));
        }
      }
    }
    const size_t found = more.size();
    date(more);
    plan();
    ctx.note("caught up through the Change Dump Archive " + cda_url + ": " + std::to_string(found) +
             " archived package(s) from " + rs::format_w3c_datetime(archived->front().from));
    return {};
  }

  const std::vector<const rs::Entry*>& todo() const { return m_todo; }
  bool covers() const { return m_covers; }
  size_t whole() const { return m_whole; }
  size_t dated_by_manifest() const { return m_dated_by_manifest; }

private:
  RunContext& m_ctx;
  const Watermark& m_w;
  std::vector<std::pair<rs::Entry, std::optional<ManifestSpan>>> m_dated;
  size_t m_dated_by_manifest = 0;
  std::vector<const rs::Entry*> m_todo;
  bool m_covers = false;
  size_t m_whole = 0; // packages entirely after the watermark
};

} // namespace

Result<void> incremental_from_dump(RunContext& ctx, int64_t feed, const std::string& cd_url,
                                   const std::string& cda_url) {
  auto wm = ctx.settled_watermark(feed);
  if (!wm) {
    return tl::unexpected(wm.error());
  }
  // Dumps apply no overlap before a baseline's `at` (see k_list_overlap):
  // a package is applied whole, once; the Change List covers the overlap.
  Watermark w = *wm;
  w.last_time = applied_through(w);
  std::optional<rs::Timestamp> unused_at;
  auto listed = dump_packages(ctx, cd_url, rs::Capability::changedump, unused_at, w.last_time);
  if (!listed) {
    return tl::unexpected(listed.error());
  }
  DumpPlan plan(ctx, w);
  plan.date(*listed);
  plan.plan();
  if (!plan.todo().empty() && !plan.covers() && !cda_url.empty() && plan.todo().front()->md &&
      plan.todo().front()->md->from) {
    if (auto r = plan.bridge_from_archive(cd_url, cda_url); !r) {
      return r;
    }
  }
  if (const size_t n = plan.dated_by_manifest(); n > 0) {
    ctx.note(std::to_string(n) + " Change Dump package" + (n == 1 ? "" : "s") +
             " without from/until dated by the manifest copy they link (rel=\"contents\")");
  }
  const auto& todo = plan.todo();
  if (todo.empty()) {
    return {};
  }
  if (!plan.covers()) {
    return make_error(ErrorKind::invalid_document, cd_url + ": the Change Dump starts after the last change applied");
  }
  if (ctx.src().strategy == "auto" && plan.whole() == 0) {
    return {}; // a small backlog: the Change List is cheaper
  }
  ctx.restart_progress();
  for (const rs::Entry* pkg : todo) {
    if (auto r = apply_package(ctx, feed, *pkg, w); !r) {
      return r;
    }
  }
  ctx.note("caught up from the Change Dump " + cd_url + " (" + std::to_string(todo.size()) + " package" +
       (todo.size() == 1 ? "" : "s") + ")");
  return {};
}

} // namespace tributary::sync

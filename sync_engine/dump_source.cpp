#include "sync_engine/feed_writer.h"
#include "sync_engine/run_context.h"

#include "common/url_resolve.h"

// What the Resource Dump and Change Dump ways share: listing a dump's
// packages, downloading and opening one, extracting a batch from it.
namespace tributary::sync {

Result<std::vector<rs::Entry>> dump_packages(RunContext& ctx, const std::string& url, rs::Capability kind,
                                             std::optional<rs::Timestamp>& at,
                                             std::optional<rs::Timestamp> skip_before) {
  auto doc = ctx.spool(url, kind);
  if (!doc) {
    return tl::unexpected(doc.error());
  }
  at = (*doc)->header().md->at;
  CollectingHandler h;
  if (auto r = (*doc)->read(h); !r) {
    return tl::unexpected(r.error());
  }
  std::vector<rs::Entry> packages;
  auto take = [&](std::vector<rs::Entry>& entries, const std::string& base) {
    for (auto& e : entries) {
      e.loc = resolve_reference(base, e.loc).value_or(e.loc);
      packages.push_back(std::move(e));
    }
  };
  if ((*doc)->header().root != rs::RootElement::sitemapindex) {
    take(h.document.entries, url);
    return packages;
  }
  for (const auto& part : h.document.entries) {
    if (part.md && part.md->until && skip_before && *part.md->until < *skip_before) {
      continue; // a part of packages entirely before the watermark
    }
    const std::string part_url = resolve_reference(url, part.loc).value_or(part.loc);
    auto p = ctx.spool(part_url, kind);
    if (!p) {
      return tl::unexpected(p.error());
    }
    CollectingHandler ph;
    if (auto r = (*p)->read(ph); !r) {
      return tl::unexpected(r.error());
    }
    take(ph.document.entries, part_url);
  }
  return packages;
}

OpenedPackage::~OpenedPackage() {
  std::error_code ec;
  if (!file.empty()) {
    std::filesystem::remove(file, ec);
  }
}

Result<OpenedPackage> open_package(RunContext& ctx, const rs::Entry& pkg, rs::Capability manifest_kind) {
  auto out = fetch_package(ctx, pkg, manifest_kind);
  if (out) {
    note_warnings(ctx, *out);
  }
  return out;
}

void note_warnings(RunContext& ctx, const OpenedPackage& opened) {
  for (const auto& w : opened.package->warnings()) {
    ctx.note(w);
  }
}

Result<OpenedPackage> fetch_package(const RunContext& ctx, const rs::Entry& pkg, rs::Capability manifest_kind) {
  Expected expected;
  if (pkg.md) {
    expected.length = pkg.md->length;
    expected.hashes = pkg.md->hash;
  }
  OpenedPackage out;
  auto file = download_package(*ctx.fetcher(), pkg.loc, pkg.links, ctx.fetch_options(), expected, ctx.tmp());
  if (!file) {
    return tl::unexpected(file.error());
  }
  out.file = *file;
  auto opened = DumpPackage::open(out.file, pkg.loc, manifest_kind);
  if (!opened) {
    return tl::unexpected(opened.error());
  }
  out.package = std::move(*opened);
  return out;
}

std::vector<Result<FetchedContent>> extract_entries(RunContext& ctx, const DumpPackage& package,
                                                    const std::vector<const rs::Entry*>& wanted,
                                                    const std::function<size_t(const rs::Entry*)>& index_of) {
  std::vector<size_t> indices;
  indices.reserve(wanted.size());
  for (const rs::Entry* e : wanted) {
    indices.push_back(index_of(e));
  }
  auto results = package.extract_many(wanted, indices, ctx.blobs());
  ctx.stage_sealed(results);
  return results;
}

} // namespace tributary::sync

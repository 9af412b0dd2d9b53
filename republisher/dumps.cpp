#include "republisher/dumps.h"

#include "resourcesync/datetime.h"
#include "resourcesync/hash.h"
#include "republisher/package_writer.h"

#include <fstream>

namespace tributary::pub {

namespace {

struct Package {
  rs::Document manifest;
  std::vector<std::pair<std::string, store::BlobLocation>> files; // name in ZIP -> the blob's bytes
  uint64_t bytes = 0;
};

// `manifest_xml`: pkg.manifest as written (a Change Dump keeps a copy of
// it beside the package, rendered once for both).
Result<rs::HashValue> write_package(const std::filesystem::path& dest, const Package& pkg,
                                    const std::string& manifest_xml) {
  std::vector<PackageFile> files;
  files.reserve(pkg.files.size());
  for (const auto& [name, blob] : pkg.files) {
    files.push_back(PackageFile{name, std::nullopt, blob});
  }
  return pub::write_package(dest, manifest_xml, files);
}

} // namespace

Result<BuiltDump> build_resource_dump(store::StoreReader& reader, const store::BlobStore& blobs, const UrlScheme& urls,
                                      const PublishedSet& set, const DumpOptions& options, rs::Timestamp at) {
  BuiltDump out;
  std::string gen = rs::format_w3c_datetime(at);
  for (char& c : gen) {
    if (c == ':' || c == '.') {
      c = '-';
    }
  }
  out.generation = gen;
  const std::filesystem::path folder = options.dir / set.name / gen;
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) {
    return make_error(ErrorKind::io, "cannot create " + folder.string() + ": " + ec.message());
  }
  auto fail = [&](Error e) -> Result<BuiltDump> {
    std::filesystem::remove_all(folder, ec);
    return tl::unexpected(std::move(e));
  };

  rs::Document dump;
  dump.header.md = rs::Metadata{};
  dump.header.md->capability = "resourcedump";
  dump.header.md->at = at;
  dump.header.links.push_back(rs::Link{.rel = "up", .href = urls.capability_list(set.name)});
  const auto held = held_in(reader, set);

  Package pkg;
  auto start_package = [&] {
    pkg = Package{};
    pkg.manifest.header.md = rs::Metadata{};
    pkg.manifest.header.md->capability = "resourcedump-manifest";
    pkg.manifest.header.md->at = at;
    pkg.manifest.header.links.push_back(rs::Link{.rel = "up", .href = urls.capability_list(set.name)});
  };
  auto flush = [&]() -> Result<void> {
    if (pkg.manifest.entries.empty()) {
      return {};
    }
    const size_t n = dump.entries.size() + 1;
    const std::filesystem::path file = folder / (std::to_string(n) + ".zip");
    auto digest = write_package(file, pkg, rs::write_document(pkg.manifest));
    if (!digest) {
      return tl::unexpected(digest.error());
    }
    const std::string url = urls.resource_dump_package(set.name, gen, n);
    rs::Entry e;
    e.loc = url;
    e.md = rs::Metadata{};
    e.md->at = at;
    e.md->hash = {*digest};
    e.md->length = std::filesystem::file_size(file);
    e.md->type = "application/zip";
    dump.entries.push_back(std::move(e));
    out.files[urls.path_of(url)] = file;
    start_package();
    return {};
  };
  start_package();
  for (int64_t feed : set.feeds) {
    std::string after;
    for (;;) {
      auto page = reader.live_resources(feed, after, 5000);
      if (!page) {
        return fail(page.error());
      }
      std::vector<std::string> names; // the page's bitstreams, located at once
      for (const auto& r : *page) {
        if (r.blob_sha256) {
          names.push_back(*r.blob_sha256);
        }
      }
      auto located = blobs.locate_many(names);
      size_t next = 0;
      for (const auto& r : *page) {
        if (!r.blob_sha256) {
          continue;
        }
        auto& where = located[next++];
        if (!where) {
          return fail(where.error());
        }
        const uint64_t size = r.length.value_or(0);
        if (!pkg.manifest.entries.empty() &&
            (pkg.manifest.entries.size() >= options.package_entries || pkg.bytes + size > options.package_bytes)) {
          if (auto f = flush(); !f) {
            return fail(f.error());
          }
        }
        rs::Entry e = resource_entry(urls, set.name, r, held);
        const std::string name = "resources/" + std::to_string(pkg.manifest.entries.size() + 1);
        e.md->path = "/" + name;
        pkg.manifest.entries.push_back(std::move(e));
        pkg.files.emplace_back(name, std::move(*where));
        pkg.bytes += size;
      }
      if (page->size() < 5000) {
        break;
      }
      after = page->back().uri;
    }
  }
  if (auto f = flush(); !f) {
    return fail(f.error());
  }
  out.document = rs::write_document(dump);
  return out;
}

Result<ChangePackage> build_change_package(store::StoreReader& reader, const store::BlobStore& blobs,
                                           const UrlScheme& urls, const PublishedSet& set, const DumpOptions& options,
                                           size_t n, const ClosedParts::Part& part, int64_t after_seq,
                                           size_t part_size) {
  ChangePackage out;
  out.n = n;
  out.from = part.from;
  out.until = part.until;
  const std::filesystem::path folder = options.dir / set.name / "changes";
  out.file = folder / (std::to_string(n) + ".zip");
  out.manifest_file = folder / (std::to_string(n) + "-manifest.xml");
  std::error_code ec;
  if (!std::filesystem::exists(out.file, ec) || !std::filesystem::exists(out.manifest_file, ec)) {
    std::filesystem::create_directories(folder, ec);
    if (ec) {
      return make_error(ErrorKind::io, "cannot create " + folder.string() + ": " + ec.message());
    }
    auto changes = reader.changes(set.feeds, after_seq, part_size);
    if (!changes) {
      return tl::unexpected(changes.error());
    }
    Package pkg;
    pkg.manifest.header.md = rs::Metadata{};
    pkg.manifest.header.md->capability = "changedump-manifest";
    pkg.manifest.header.md->from = part.from;
    pkg.manifest.header.md->until = part.until;
    pkg.manifest.header.links.push_back(rs::Link{.rel = "up", .href = urls.capability_list(set.name)});
    const auto held = held_in(reader, set);
    std::optional<rs::Timestamp> previous;
    if (n > 1) {
      previous = part.from; // the entry before this part closed the last one
    }
    std::vector<std::string> names; // the bitstreams', located at once
    for (const auto& c : *changes) {
      if (c.change != rs::Change::deleted && c.resource.blob_sha256) {
        names.push_back(*c.resource.blob_sha256);
      }
    }
    auto located = blobs.locate_many(names);
    size_t next = 0;
    for (const auto& c : *changes) {
      if (c.change != rs::Change::deleted && !c.resource.blob_sha256) {
        // A change whose bytes we never had (logged once a later change of
        // its URI came, which carries the resource): a manifest entry must
        // name a bitstream, so the package leaves it to the later change.
        continue;
      }
      rs::Entry e = change_entry(urls, set.name, c, previous, held);
      previous = e.md->datetime;
      if (c.change != rs::Change::deleted) {
        auto& where = located[next++];
        if (!where) {
          return tl::unexpected(where.error());
        }
        const std::string name = "changes/" + std::to_string(pkg.files.size() + 1);
        e.md->path = "/" + name;
        pkg.files.emplace_back(name, std::move(*where));
      }
      pkg.manifest.entries.push_back(std::move(e));
    }
    // The manifest copy first: a package is only taken as built when both
    // exist. The manifest is rendered once for both (a 10,000-change
    // part's is megabytes); the package's digest is the writer's.
    const std::string manifest_xml = rs::write_document(pkg.manifest);
    const std::filesystem::path tmp = out.manifest_file.string() + ".tmp";
    {
      std::ofstream m(tmp, std::ios::binary);
      m << manifest_xml;
      if (!m) {
        return make_error(ErrorKind::io, "cannot write " + tmp.string());
      }
    }
    std::filesystem::rename(tmp, out.manifest_file, ec);
    auto digest = write_package(out.file, pkg, manifest_xml);
    if (!digest) {
      return tl::unexpected(digest.error());
    }
    out.hash = std::move(*digest);
  } else {
    out.hash = package_digest(out.file); // built by an earlier process
  }
  out.length = std::filesystem::file_size(out.file, ec);
  return out;
}

std::string render_change_dump(const UrlScheme& urls, const PublishedSet& set,
                               const std::vector<ChangePackage>& packages, std::optional<rs::Timestamp> until) {
  rs::Document d;
  d.header.md = rs::Metadata{};
  d.header.md->capability = "changedump";
  d.header.md->from = packages.empty() ? rs::Timestamp{} : packages.front().from;
  d.header.md->until = until;
  d.header.links.push_back(rs::Link{.rel = "up", .href = urls.capability_list(set.name)});
  for (const auto& p : packages) {
    rs::Entry e;
    e.loc = urls.change_dump_package(set.name, p.n);
    e.md = rs::Metadata{};
    e.md->from = p.from;
    e.md->until = p.until;
    e.md->hash = {p.hash};
    e.md->length = p.length;
    e.md->type = "application/zip";
    e.links.push_back(rs::Link{.rel = "contents", .href = urls.change_dump_manifest(set.name, p.n),
                               .type = "application/xml"});
    d.entries.push_back(std::move(e));
  }
  return rs::write_document(d);
}

void remove_old_generations(const DumpOptions& options, const std::string& set, const std::vector<std::string>& keep) {
  std::error_code ec;
  const std::filesystem::path dir = options.dir / set;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name != "changes" && std::find(keep.begin(), keep.end(), name) == keep.end()) {
      std::filesystem::remove_all(entry.path(), ec);
    }
  }
}

ChangePackage offered_change_package(size_t n, rs::Timestamp from, rs::Timestamp until,
                                     const store::SharedDumps::File& zip) {
  ChangePackage p;
  p.n = n;
  p.from = from;
  p.until = until;
  p.hash = rs::HashValue{"sha-256", zip.sha256};
  p.length = zip.length;
  return p;
}

} // namespace tributary::pub

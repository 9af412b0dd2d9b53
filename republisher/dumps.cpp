#include "republisher/dumps.h"

#include "resourcesync/datetime.h"
#include "resourcesync/hash.h"

#include <zip.h>

#include <fstream>

namespace tributary::pub {

namespace {

struct Package {
  rs::Document manifest;
  std::vector<std::pair<std::string, sync::BlobLocation>> files; // name in ZIP -> the blob's bytes
  uint64_t bytes = 0;
};

// Writes `pkg` as a ZIP at `dest` (through a temporary name in the same
// folder): manifest.xml first, then the bitstreams, stored as they are
// (most repository content is compressed already; libzip would spend the
// time for little).
Result<rs::HashValue> write_package(const std::filesystem::path& dest, const Package& pkg) {
  const std::filesystem::path tmp = dest.string() + ".tmp";
  int err = 0;
  zip_t* z = zip_open(tmp.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  if (!z) {
    return make_error(ErrorKind::io, "cannot create " + tmp.string());
  }
  const std::string manifest = rs::write_document(pkg.manifest);
  zip_source_t* m = zip_source_buffer(z, manifest.data(), manifest.size(), 0);
  zip_int64_t idx = m ? zip_file_add(z, "manifest.xml", m, ZIP_FL_ENC_UTF_8) : -1;
  if (idx < 0) {
    zip_discard(z);
    return make_error(ErrorKind::io, "cannot add manifest.xml to " + tmp.string());
  }
  zip_set_file_compression(z, static_cast<zip_uint64_t>(idx), ZIP_CM_DEFLATE, 6);
  for (const auto& [name, blob] : pkg.files) {
    // A region of a pack file (or a whole file); libzip reads a length of
    // 0 as "to the end", so an empty blob is an empty buffer.
    zip_source_t* src = blob.length == 0 ? zip_source_buffer(z, nullptr, 0, 0)
                                         : zip_source_file(z, blob.file.c_str(), blob.offset,
                                                           static_cast<zip_int64_t>(blob.length));
    idx = src ? zip_file_add(z, name.c_str(), src, ZIP_FL_ENC_UTF_8) : -1;
    if (idx < 0) {
      if (src) {
        zip_source_free(src);
      }
      zip_discard(z);
      return make_error(ErrorKind::io, "cannot add " + blob.file.string() + " to " + tmp.string());
    }
    zip_set_file_compression(z, static_cast<zip_uint64_t>(idx), ZIP_CM_STORE, 0);
  }
  if (zip_close(z) != 0) {
    const std::string why = zip_strerror(z);
    zip_discard(z);
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    return make_error(ErrorKind::io, "cannot write " + tmp.string() + ": " + why);
  }
  // The package's own digest, for the Resource Dump's rs:md.
  std::ifstream in(tmp, std::ios::binary);
  rs::Hasher h(rs::HashAlgorithm::sha256);
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    h.update(buf, static_cast<size_t>(in.gcount()));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, dest, ec);
  if (ec) {
    return make_error(ErrorKind::io, "cannot rename " + tmp.string() + ": " + ec.message());
  }
  return rs::HashValue{"sha-256", h.finish_hex()};
}

} // namespace

Result<BuiltDump> build_resource_dump(store::StoreReader& reader, const sync::BlobStore& blobs, const UrlScheme& urls,
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
    auto digest = write_package(file, pkg);
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
      for (const auto& r : *page) {
        if (!r.blob_sha256) {
          continue;
        }
        auto where = blobs.locate(*r.blob_sha256);
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
        pkg.files.emplace_back(name, *where);
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

Result<ChangePackage> build_change_package(store::StoreReader& reader, const sync::BlobStore& blobs,
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
    for (const auto& c : *changes) {
      rs::Entry e = change_entry(urls, set.name, c, previous, held);
      previous = e.md->datetime;
      if (c.change != rs::Change::deleted && c.resource.blob_sha256) {
        auto where = blobs.locate(*c.resource.blob_sha256);
        if (!where) {
          return tl::unexpected(where.error());
        }
        const std::string name = "changes/" + std::to_string(pkg.files.size() + 1);
        e.md->path = "/" + name;
        pkg.files.emplace_back(name, *where);
      }
      pkg.manifest.entries.push_back(std::move(e));
    }
    // The manifest copy first: a package is only taken as built when both exist.
    const std::filesystem::path tmp = out.manifest_file.string() + ".tmp";
    {
      std::ofstream m(tmp, std::ios::binary);
      m << rs::write_document(pkg.manifest);
      if (!m) {
        return make_error(ErrorKind::io, "cannot write " + tmp.string());
      }
    }
    std::filesystem::rename(tmp, out.manifest_file, ec);
    auto digest = write_package(out.file, pkg);
    if (!digest) {
      return tl::unexpected(digest.error());
    }
  }
  std::ifstream in(out.file, std::ios::binary);
  rs::Hasher h(rs::HashAlgorithm::sha256);
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    h.update(buf, static_cast<size_t>(in.gcount()));
  }
  out.hash = rs::HashValue{"sha-256", h.finish_hex()};
  out.length = std::filesystem::file_size(out.file, ec);
  return out;
}

std::string render_change_dump(const UrlScheme& urls, const PublishedSet& set,
                               const std::vector<ChangePackage>& packages) {
  rs::Document d;
  d.header.md = rs::Metadata{};
  d.header.md->capability = "changedump";
  d.header.md->from = packages.empty() ? rs::Timestamp{} : packages.front().from;
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

} // namespace tributary::pub

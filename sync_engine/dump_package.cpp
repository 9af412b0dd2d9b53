#include "sync_engine/dump_package.h"

#include "common/temp_files.h"
#include "resourcesync/hash.h"
#include "resourcesync/reader.h"

#include <zip.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <thread>
#include <random>

namespace tributary::sync {

namespace {

Error refused(const std::string& url, const std::string& why) {
  return Error{ErrorKind::invalid_document, url + ": package refused, nothing applied from it: " + why};
}

// A ZIP entry name we are willing to map to a manifest path: relative,
// forward slashes, no empty, "." or ".." segment, no NUL or backslash.
bool safe_name(const std::string& name) {
  if (name.empty() || name.front() == '/' || name.find('\\') != std::string::npos ||
      name.find('\0') != std::string::npos || (name.size() > 1 && name[1] == ':')) {
    return false;
  }
  size_t start = 0;
  while (start <= name.size()) {
    const size_t slash = name.find('/', start);
    const std::string seg = name.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (seg.empty() || seg == "." || seg == "..") {
      return false;
    }
    if (slash == std::string::npos) {
      break;
    }
    start = slash + 1;
  }
  return true;
}

struct ZipCloser {
  void operator()(zip_t* z) const { zip_discard(z); }
};
struct ZipFileCloser {
  void operator()(zip_file_t* f) const { zip_fclose(f); }
};

} // namespace

struct DumpPackage::Impl {
  std::filesystem::path path;
  std::string url;
  std::unique_ptr<zip_t, ZipCloser> zip;
  rs::Document manifest;
  std::vector<std::string> warnings;
  std::vector<zip_uint64_t> index_of; // manifest entry -> ZIP index (or ~0 when it has no path)
  std::vector<zip_uint64_t> size_of;  // uncompressed size of that ZIP entry
};

DumpPackage::DumpPackage(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
DumpPackage::~DumpPackage() = default;

const rs::Document& DumpPackage::manifest() const { return m_impl->manifest; }
const std::vector<std::string>& DumpPackage::warnings() const { return m_impl->warnings; }

Result<std::unique_ptr<DumpPackage>> DumpPackage::open(const std::filesystem::path& path, const std::string& url,
                                                      rs::Capability manifest_kind, const PackageLimits& limits) {
  auto m = std::make_unique<Impl>();
  m->path = path;
  m->url = url;
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &err);
  if (!z) {
    zip_error_t ze;
    zip_error_init_with_code(&ze, err);
    std::string why = std::string("not a readable ZIP file (") + zip_error_strerror(&ze) + ")";
    zip_error_fini(&ze);
    return tl::unexpected(refused(url, why));
  }
  m->zip.reset(z);
  const zip_int64_t n = zip_get_num_entries(z, 0);
  if (n < 0 || static_cast<uint64_t>(n) > limits.max_entries + 1) {
    return tl::unexpected(refused(url, "more than " + std::to_string(limits.max_entries) + " entries"));
  }
  // Every entry: a plain file with a safe name, once; sizes within limits.
  std::map<std::string, zip_uint64_t> by_name;
  uint64_t total = 0;
  std::optional<zip_uint64_t> manifest_index;
  size_t untyped = 0;
  for (zip_uint64_t i = 0; i < static_cast<zip_uint64_t>(n); ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(z, i, 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME) || !(st.valid & ZIP_STAT_SIZE)) {
      return tl::unexpected(refused(url, "entry " + std::to_string(i) + " cannot be read"));
    }
    const std::string name = st.name;
    if (!name.empty() && name.back() == '/') {
      continue; // a directory entry: carries no bytes
    }
    if (!safe_name(name)) {
      return tl::unexpected(refused(url, "unsafe entry name '" + name + "' (absolute, '..' or empty segment)"));
    }
    zip_uint8_t opsys = 0;
    zip_uint32_t attributes = 0;
    if (zip_file_get_external_attributes(z, i, 0, &opsys, &attributes) == 0 && opsys == ZIP_OPSYS_UNIX) {
      const mode_t mode = static_cast<mode_t>(attributes >> 16);
      if (S_ISLNK(mode)) {
        return tl::unexpected(refused(url, "entry '" + name + "' is a symbolic link"));
      }
      if ((mode & S_IFMT) == 0) {
        // Permission bits without a file type: Python's zipfile.writestr()
        // writes these (py-resync's own dumps), and they mean a plain file.
        ++untyped;
      } else if (!S_ISREG(mode)) {
        return tl::unexpected(refused(url, "entry '" + name + "' is not a regular file"));
      }
    }
    if (!by_name.emplace(name, i).second) {
      return tl::unexpected(refused(url, "entry '" + name + "' appears twice"));
    }
    total += st.size;
    if (total > limits.max_uncompressed) {
      return tl::unexpected(refused(url, "more than " + std::to_string(limits.max_uncompressed) +
                                             " bytes uncompressed (a zip bomb?)"));
    }
    if ((st.valid & ZIP_STAT_COMP_SIZE) && st.size > (1u << 20) &&
        static_cast<double>(st.size) > limits.max_ratio * static_cast<double>(std::max<zip_uint64_t>(st.comp_size, 1))) {
      return tl::unexpected(refused(url, "entry '" + name + "' expands " + std::to_string(st.size / std::max<zip_uint64_t>(st.comp_size, 1)) +
                                             "-fold (a zip bomb?)"));
    }
    if (name == "manifest.xml") {
      manifest_index = i;
    }
  }
  if (!manifest_index) {
    return tl::unexpected(refused(url, "no manifest.xml at the top level"));
  }
  if (untyped > 0) {
    m->warnings.push_back(url + ": " + std::to_string(untyped) +
                          " ZIP entr" + (untyped == 1 ? "y" : "ies") +
                          " with Unix permissions but no file type (as Python's zipfile writes them), read as plain files");
  }
  // The manifest.
  zip_stat_t mst;
  zip_stat_index(z, *manifest_index, 0, &mst);
  if (mst.size > limits.max_manifest_bytes) {
    return tl::unexpected(refused(url, "manifest.xml is larger than " + std::to_string(limits.max_manifest_bytes) +
                                           " bytes"));
  }
  std::string xml(static_cast<size_t>(mst.size), '\0');
  {
    std::unique_ptr<zip_file_t, ZipFileCloser> f(zip_fopen_index(z, *manifest_index, 0));
    if (!f) {
      return tl::unexpected(refused(url, std::string("manifest.xml: ") + zip_strerror(z)));
    }
    const zip_int64_t got = zip_fread(f.get(), xml.data(), xml.size());
    if (got != static_cast<zip_int64_t>(xml.size())) {
      return tl::unexpected(refused(url, "manifest.xml is truncated or corrupt"));
    }
  }
  auto parsed = rs::parse_document(xml);
  // Real Sources publish manifests without `at` (Appendix A requires it):
  // unambiguous, so a warning below rather than a refusal. Any other error
  // refuses the package.
  std::string first;
  for (const auto& d : parsed.summary.diagnostics) {
    if (d.severity == rs::Severity::error && d.message.find("must have an 'at'") == std::string::npos) {
      first = "line " + std::to_string(d.line) + ": " + d.message;
      break;
    }
  }
  if (!first.empty() || !parsed.summary.header || !parsed.document.header.md) {
    return tl::unexpected(refused(url, "manifest.xml is not a valid document: " +
                                           (first.empty() ? std::string("no ResourceSync header") : first)));
  }
  if (parsed.document.header.capability() != manifest_kind) {
    return tl::unexpected(refused(url, "manifest.xml is not a " + std::string(rs::to_string(manifest_kind)) +
                                           " (capability '" + parsed.document.header.md->capability.value_or("") +
                                           "')"));
  }
  if (!parsed.document.header.md->at && !parsed.document.header.md->from) {
    m->warnings.push_back(url + ": manifest.xml has no 'at'");
  }
  m->manifest = std::move(parsed.document);
  // Manifest paths <-> ZIP entries, both ways.
  std::map<std::string, bool> used;
  bool warned_slash = false;
  for (const auto& e : m->manifest.entries) {
    const std::optional<std::string>& p = e.md ? e.md->path : std::nullopt;
    if (!p) {
      if (!(e.md && e.md->change == rs::Change::deleted)) {
        return tl::unexpected(refused(url, "manifest entry " + e.loc + " has no path"));
      }
      m->index_of.push_back(~zip_uint64_t{0});
      m->size_of.push_back(0);
      continue;
    }
    std::string name = *p;
    if (!name.empty() && name.front() == '/') {
      name.erase(0, 1);
    } else if (!warned_slash) {
      m->warnings.push_back(url + ": manifest paths without the leading '/' (e.g. '" + *p + "')");
      warned_slash = true;
    }
    if (!safe_name(name)) {
      return tl::unexpected(refused(url, "manifest path '" + *p + "' is unsafe"));
    }
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      return tl::unexpected(refused(url, "manifest path '" + *p + "' is not in the ZIP"));
    }
    used[name] = true;
    zip_stat_t st;
    zip_stat_index(z, it->second, 0, &st);
    m->index_of.push_back(it->second);
    m->size_of.push_back(st.size);
  }
  for (const auto& [name, index] : by_name) {
    if (name != "manifest.xml" && !used.count(name)) {
      return tl::unexpected(refused(url, "ZIP entry '" + name + "' is not listed in the manifest"));
    }
  }
  return std::unique_ptr<DumpPackage>(new DumpPackage(std::move(m)));
}

Result<FetchedContent> DumpPackage::extract(size_t i, store::BlobStore& blobs) const {
  return extract_from(m_impl->zip.get(), i, blobs);
}

std::vector<Result<FetchedContent>> DumpPackage::extract_many(const std::vector<size_t>& indices, store::BlobStore& blobs,
                                                              unsigned threads) const {
  std::vector<Result<FetchedContent>> results;
  results.reserve(indices.size());
  for (size_t k = 0; k < indices.size(); ++k) {
    results.emplace_back(make_error(ErrorKind::invalid_document, m_impl->url + ": not extracted"));
  }
  std::atomic<bool> failed{false};
  // libzip handles are not shared between threads: each worker opens the
  // package again and takes a contiguous slice.
  const size_t n = std::max<size_t>(1, std::min<size_t>(threads, indices.size() / 64 + 1));
  auto work = [&](size_t t, zip_t* z) {
    const size_t begin = indices.size() * t / n;
    const size_t end = indices.size() * (t + 1) / n;
    for (size_t k = begin; k < end && !failed; ++k) {
      try {
        results[k] = extract_from(z, indices[k], blobs);
      } catch (const std::exception& e) {
        results[k] = make_error(ErrorKind::io, std::string("extracting: internal error: ") + e.what());
      }
      if (!results[k]) {
        failed = true;
      }
    }
  };
  std::vector<std::thread> workers;
  std::vector<std::unique_ptr<zip_t, ZipCloser>> handles;
  for (size_t t = 1; t < n; ++t) {
    int err = 0;
    zip_t* z = zip_open(m_impl->path.c_str(), ZIP_RDONLY, &err);
    if (!z) {
      break; // fewer threads, then
    }
    handles.emplace_back(z);
  }
  const size_t used = handles.size() + 1;
  if (used < n) {
    // Could not open every handle: one thread does it all.
    for (size_t k = 0; k < indices.size() && !failed; ++k) {
      results[k] = extract_from(m_impl->zip.get(), indices[k], blobs);
      failed = !results[k];
    }
    return results;
  }
  for (size_t t = 1; t < n; ++t) {
    workers.emplace_back(work, t, handles[t - 1].get());
  }
  work(0, m_impl->zip.get());
  for (auto& w : workers) {
    w.join();
  }
  return results;
}

Result<FetchedContent> DumpPackage::extract_from(zip_t* zip, size_t i, store::BlobStore& blobs) const {
  const Impl& m = *m_impl;
  const rs::Entry& e = m.manifest.entries.at(i);
  const std::string where = m.url + ": " + (e.md && e.md->path ? *e.md->path : e.loc);
  if (m.index_of[i] == ~zip_uint64_t{0}) {
    return make_error(ErrorKind::invalid_document, where + ": no bitstream (a deletion)");
  }
  const std::vector<rs::HashValue>& hashes = e.md->hash;
  const rs::HashValue* check = rs::strongest_hash(hashes);
  std::vector<rs::HashAlgorithm> extra;
  for (const auto& h : hashes) {
    if (auto a = h.known(); a && *a != rs::HashAlgorithm::sha256 &&
                             std::find(extra.begin(), extra.end(), *a) == extra.end()) {
      extra.push_back(*a);
    }
  }
  auto writer = blobs.begin(extra);
  if (!writer) {
    return tl::unexpected(writer.error());
  }
  std::unique_ptr<zip_file_t, ZipFileCloser> f(zip_fopen_index(zip, m.index_of[i], 0));
  if (!f) {
    return make_error(ErrorKind::invalid_document, where + ": " + zip_strerror(zip));
  }
  // Never read more than the ZIP says the entry holds (nor more than the
  // manifest announced): libzip checks the CRC at the end.
  const uint64_t limit = e.md->length ? std::min<uint64_t>(*e.md->length, m.size_of[i]) : m.size_of[i];
  char buf[64 * 1024];
  uint64_t total = 0;
  for (;;) {
    const zip_int64_t got = zip_fread(f.get(), buf, sizeof buf);
    if (got < 0) {
      return make_error(ErrorKind::invalid_document, where + ": corrupt entry (" + zip_file_strerror(f.get()) + ")");
    }
    if (got == 0) {
      break;
    }
    total += static_cast<uint64_t>(got);
    if (total > limit) {
      return make_error(ErrorKind::invalid_document, where + ": more bytes than announced");
    }
    if (auto w = writer->write(buf, static_cast<size_t>(got)); !w) {
      return tl::unexpected(w.error());
    }
  }
  if (e.md->length && total != *e.md->length) {
    return make_error(ErrorKind::invalid_document, where + ": length " + std::to_string(total) + ", manifest says " +
                                                       std::to_string(*e.md->length));
  }
  if (check) {
    std::string mismatch;
    if (!rs::hashes_match({*check}, writer->digests(), &mismatch)) {
      return make_error(ErrorKind::invalid_document, where + ": hash mismatch against the manifest, " + mismatch);
    }
  }
  FetchedContent out;
  out.blob = writer->seal();
  out.sealed.emplace(std::move(*writer));
  out.served_from = m.url;
  if (e.md->type) {
    out.type = e.md->type;
  }
  return out;
}

Result<std::filesystem::path> download_package(Fetcher& fetcher, const std::string& loc,
                                               const std::vector<rs::Link>& links, const FetchOptions& options,
                                               const Expected& expected, const std::filesystem::path& tmp_dir) {
  std::error_code ec;
  std::filesystem::create_directories(tmp_dir, ec);
  const rs::HashValue* check = rs::strongest_hash(expected.hashes);
  std::vector<std::string> reasons;
  for (const auto& url : candidate_locations(loc, links)) {
    std::string name = (tmp_dir / temp_file_name("package", "-XXXXXX")).string();
    const int fd = ::mkstemp(name.data());
    if (fd < 0) {
      return make_error(ErrorKind::io, "cannot create a temporary file in " + tmp_dir.string());
    }
    std::vector<rs::HashAlgorithm> algs;
    if (check) {
      algs.push_back(*check->known());
    }
    rs::MultiHasher hasher(algs);
    uint64_t size = 0;
    bool write_failed = false;
    std::string write_error;
    FetchOptions o = options;
    if (expected.length) {
      o.max_body_bytes = std::min(o.max_body_bytes, *expected.length);
    }
    o.restart = [&] {
      size = 0;
      hasher = rs::MultiHasher(algs);
      return ::ftruncate(fd, 0) == 0 && ::lseek(fd, 0, SEEK_SET) == 0;
    };
    auto r = fetcher.fetch(url, o, [&](const char* d, size_t n) {
      hasher.update(d, n);
      size += n;
      while (n > 0) {
        const ssize_t w = ::write(fd, d, n);
        if (w <= 0) {
          write_error = w < 0 ? std::strerror(errno) : "nothing written";
          write_failed = true;
          return false;
        }
        d += w;
        n -= static_cast<size_t>(w);
      }
      return true;
    });
    ::close(fd);
    auto fail = [&](std::string why) {
      std::filesystem::remove(name, ec);
      reasons.push_back(url + ": " + std::move(why));
    };
    if (write_failed) {
      std::filesystem::remove(name, ec);
      return make_error(ErrorKind::io, "cannot write the package to " + tmp_dir.string() + ": " + write_error);
    }
    if (!r) {
      fail(r.error().message);
      continue;
    }
    if (r->status < 200 || r->status > 299) {
      fail("HTTP " + std::to_string(r->status));
      continue;
    }
    if (expected.length && size != *expected.length) {
      fail("package length " + std::to_string(size) + ", the dump says " + std::to_string(*expected.length));
      continue;
    }
    if (check) {
      std::string mismatch;
      if (!rs::hashes_match({*check}, hasher.finish(), &mismatch)) {
        fail("package hash differs from the dump's rs:md, " + mismatch);
        continue;
      }
    }
    return std::filesystem::path(name);
  }
  std::string joined;
  for (const auto& r : reasons) {
    joined += (joined.empty() ? "" : "; ") + r;
  }
  return make_error(ErrorKind::invalid_document, joined.empty() ? "no location for package " + loc : joined);
}

} // namespace tributary::sync

#include "sync_engine/dump_package.h"

#include "common/temp_files.h"
#include "resourcesync/hash.h"
#include "resourcesync/reader.h"

#include <zip.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
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

// The ZIP file at `path`, opened read-only with its consistency checked.
Result<zip_t*> open_zip(const std::filesystem::path& path, const std::string& url) {
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &err);
  if (!z) {
    zip_error_t ze;
    zip_error_init_with_code(&ze, err);
    std::string why = std::string("not a readable ZIP file (") + zip_error_strerror(&ze) + ")";
    zip_error_fini(&ze);
    return tl::unexpected(refused(url, why));
  }
  return z;
}

// The package's entries, checked: each a plain file (or a directory entry,
// skipped) with a safe name, once; sizes within `limits`; a manifest.xml at
// the top level (its index in `manifest`), within its size limit. `by_name`
// sorted by name;
// `untyped` counts entries with Unix permissions but no file type.
Result<void> list_entries(zip_t* z, zip_int64_t n, const std::string& url, const PackageLimits& limits,
                          std::vector<std::pair<std::string_view, zip_uint64_t>>& by_name, zip_uint64_t& manifest,
                          size_t& untyped) {
  uint64_t total = 0;
  std::optional<zip_uint64_t> manifest_index;
  for (zip_uint64_t i = 0; i < static_cast<zip_uint64_t>(n); ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(z, i, 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME) || !(st.valid & ZIP_STAT_SIZE)) {
      return tl::unexpected(refused(url, "entry " + std::to_string(i) + " cannot be read"));
    }
    const std::string_view name = st.name;
    if (!name.empty() && name.back() == '/') {
      continue; // a directory entry: carries no bytes
    }
    if (!safe_name(std::string(name))) {
      return tl::unexpected(refused(url, "unsafe entry name '" + std::string(name) + "' (absolute, '..' or empty segment)"));
    }
    zip_uint8_t opsys = 0;
    zip_uint32_t attributes = 0;
    if (zip_file_get_external_attributes(z, i, 0, &opsys, &attributes) == 0 && opsys == ZIP_OPSYS_UNIX) {
      const mode_t mode = static_cast<mode_t>(attributes >> 16);
      if (S_ISLNK(mode)) {
        return tl::unexpected(refused(url, "entry '" + std::string(name) + "' is a symbolic link"));
      }
      if ((mode & S_IFMT) == 0) {
        // Permission bits without a file type: Python's zipfile.writestr()
        // writes these (py-resync's own dumps), and they mean a plain file.
        ++untyped;
      } else if (!S_ISREG(mode)) {
        return tl::unexpected(refused(url, "entry '" + std::string(name) + "' is not a regular file"));
      }
    }
    by_name.emplace_back(name, i);
    total += st.size;
    if (total > limits.max_uncompressed) {
      return tl::unexpected(refused(url, "more than " + std::to_string(limits.max_uncompressed) +
                                             " bytes uncompressed (a zip bomb?)"));
    }
    if ((st.valid & ZIP_STAT_COMP_SIZE) && st.size > (1u << 20) &&
        static_cast<double>(st.size) > limits.max_ratio * static_cast<double>(std::max<zip_uint64_t>(st.comp_size, 1))) {
      return tl::unexpected(refused(url, "entry '" + std::string(name) + "' expands " + std::to_string(st.size / std::max<zip_uint64_t>(st.comp_size, 1)) +
                                             "-fold (a zip bomb?)"));
    }
    if (name == "manifest.xml") {
      manifest_index = i;
    }
  }
  if (!manifest_index) {
    return tl::unexpected(refused(url, "no manifest.xml at the top level"));
  }
  manifest = *manifest_index;
  zip_stat_t mst;
  zip_stat_index(z, manifest, 0, &mst);
  if (mst.size > limits.max_manifest_bytes) {
    return tl::unexpected(refused(url, "manifest.xml is larger than " + std::to_string(limits.max_manifest_bytes) +
                                           " bytes"));
  }
  std::sort(by_name.begin(), by_name.end());
  for (size_t k = 1; k < by_name.size(); ++k) {
    if (by_name[k].first == by_name[k - 1].first) {
      return tl::unexpected(refused(url, "entry '" + std::string(by_name[k].first) + "' appears twice"));
    }
  }
  return {};
}

// What refuses a manifest as read: its first error, or how many there
// were; empty when none. Real Sources publish manifests without `at`
// (Appendix A requires it): unambiguous, so a warning rather than a
// refusal (see DumpPackage::open).
std::string manifest_error(const rs::ReadSummary& summary) {
  std::string first;
  uint64_t at_errors = 0;
  for (const auto& d : summary.diagnostics) {
    if (d.severity != rs::Severity::error) {
      continue;
    }
    if (d.message.find("must have an 'at'") != std::string::npos) {
      ++at_errors;
    } else if (first.empty()) {
      first = "line " + std::to_string(d.line) + ": " + d.message;
    }
  }
  if (first.empty() && summary.errors > at_errors) {
    first = std::to_string(summary.errors) + " errors";
  }
  return first;
}

} // namespace

struct DumpPackage::Impl {
  std::filesystem::path path;
  std::string url;
  std::unique_ptr<zip_t, ZipCloser> zip;
  zip_uint64_t manifest_index = 0;
  rs::DocumentHeader header;
  uint64_t entries = 0;
  std::vector<std::string> warnings;
  std::vector<zip_uint64_t> index_of; // manifest entry -> ZIP index (or ~0 when it has no path)
  std::vector<zip_uint64_t> size_of;  // uncompressed size of that ZIP entry
  // The extra handles extract_many's workers read through, opened once and
  // kept for the next batch: opening one reads the whole central directory
  // again (7% of a dump baseline's processor time when every batch did).
  std::mutex spare_mutex;
  std::vector<std::unique_ptr<zip_t, ZipCloser>> spare;
};

DumpPackage::DumpPackage(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
DumpPackage::~DumpPackage() = default;

const rs::DocumentHeader& DumpPackage::header() const { return m_impl->header; }
uint64_t DumpPackage::size() const { return m_impl->entries; }
const std::vector<std::string>& DumpPackage::warnings() const { return m_impl->warnings; }

Result<std::unique_ptr<DumpPackage>> DumpPackage::open(const std::filesystem::path& path, const std::string& url,
                                                      rs::Capability manifest_kind, const PackageLimits& limits) {
  auto m = std::make_unique<Impl>();
  m->path = path;
  m->url = url;
  auto opened = open_zip(path, url);
  if (!opened) {
    return tl::unexpected(opened.error());
  }
  zip_t* z = *opened;
  m->zip.reset(z);
  const zip_int64_t n = zip_get_num_entries(z, 0);
  if (n < 0 || static_cast<uint64_t>(n) > limits.max_entries + 1) {
    return tl::unexpected(refused(url, "more than " + std::to_string(limits.max_entries) + " entries"));
  }
  // Every entry: a plain file with a safe name, once; sizes within limits.
  // The names are libzip's own (valid while the archive is open), sorted
  // for lookup: 24 bytes an entry, not a map node and a copy of each name.
  std::vector<std::pair<std::string_view, zip_uint64_t>> by_name;
  zip_uint64_t manifest = 0;
  size_t untyped = 0;
  if (auto r = list_entries(z, n, url, limits, by_name, manifest, untyped); !r) {
    return tl::unexpected(r.error());
  }
  const std::optional<zip_uint64_t> manifest_index = manifest;
  if (untyped > 0) {
    m->warnings.push_back(url + ": " + std::to_string(untyped) +
                          " ZIP entr" + (untyped == 1 ? "y" : "ies") +
                          " with Unix permissions but no file type (as Python's zipfile writes them), read as plain files");
  }
  m->manifest_index = *manifest_index;
  // The manifest, read as a stream: each entry's path is matched to its ZIP
  // entry as it passes (both ways: every path present, every ZIP entry
  // listed), and only that match is kept.
  std::vector<bool> used(by_name.size(), false);
  Impl& impl = *m;
  bool warned_slash = false;
  std::string bad_entry;
  std::optional<rs::Timestamp> previous;
  auto check = [&](rs::Entry& e) -> bool {
    // A Change Dump's changes, each with its time, in forward chronological
    // order: checked here, so that a package that breaks it is refused
    // before any of it is applied.
    if (manifest_kind == rs::Capability::changedump_manifest) {
      const auto t = e.change_time();
      if (!t || !e.change()) {
        bad_entry = "manifest entry " + e.loc + " has no change time";
        return false;
      }
      if (previous && *t < *previous) {
        bad_entry = "manifest not in forward chronological order (at " + e.loc + ")";
        return false;
      }
      previous = t;
    }
    const std::optional<std::string>& p = e.md ? e.md->path : std::nullopt;
    if (!p) {
      if (!(e.md && e.md->change == rs::Change::deleted)) {
        bad_entry = "manifest entry " + e.loc + " has no path";
        return false;
      }
      impl.index_of.push_back(~zip_uint64_t{0});
      impl.size_of.push_back(0);
      return true;
    }
    std::string_view name = *p;
    if (!name.empty() && name.front() == '/') {
      name.remove_prefix(1);
    } else if (!warned_slash) {
      impl.warnings.push_back(url + ": manifest paths without the leading '/' (e.g. '" + *p + "')");
      warned_slash = true;
    }
    if (!safe_name(std::string(name))) {
      bad_entry = "manifest path '" + *p + "' is unsafe";
      return false;
    }
    auto it = std::lower_bound(by_name.begin(), by_name.end(), std::make_pair(name, zip_uint64_t{0}),
                               [](const auto& x, const auto& y) { return x.first < y.first; });
    if (it == by_name.end() || it->first != name) {
      bad_entry = "manifest path '" + *p + "' is not in the ZIP";
      return false;
    }
    used[static_cast<size_t>(it - by_name.begin())] = true;
    zip_stat_t st;
    zip_stat_index(z, it->second, 0, &st);
    impl.index_of.push_back(it->second);
    impl.size_of.push_back(st.size);
    return true;
  };
  DumpPackage unchecked(std::move(m));
  auto summary = unchecked.stream_manifest(z, [&](rs::Entry& e) { return check(e); });
  m = std::move(unchecked.m_impl);
  if (!summary) {
    return tl::unexpected(refused(url, summary.error().message));
  }
  if (!bad_entry.empty()) {
    return tl::unexpected(refused(url, bad_entry));
  }
  const std::string first = manifest_error(*summary);
  if (!first.empty() || !summary->header || !summary->header->md) {
    return tl::unexpected(refused(url, "manifest.xml is not a valid document: " +
                                           (first.empty() ? std::string("no ResourceSync header") : first)));
  }
  m->header = *summary->header;
  m->entries = summary->entries;
  if (m->header.capability() != manifest_kind) {
    return tl::unexpected(refused(url, "manifest.xml is not a " + std::string(rs::to_string(manifest_kind)) +
                                           " (capability '" + m->header.md->capability.value_or("") + "')"));
  }
  if (!m->header.md->at && !m->header.md->from) {
    m->warnings.push_back(url + ": manifest.xml has no 'at'");
  }
  for (size_t k = 0; k < by_name.size(); ++k) {
    if (!used[k] && by_name[k].second != *manifest_index) {
      return tl::unexpected(refused(url, "ZIP entry '" + std::string(by_name[k].first) + "' is not listed in the manifest"));
    }
  }
  return std::unique_ptr<DumpPackage>(new DumpPackage(std::move(m)));
}

namespace {

// Hands each entry of a manifest to a function, which returns false to
// stop; a rejected entry (a bad value) stops the reading too.
class EntryStream : public rs::DocumentHandler {
public:
  explicit EntryStream(const std::function<bool(rs::Entry&)>& fn) : m_fn(fn) {}
  void on_entry(rs::Entry&& e, uint64_t) override {
    if (!m_stopped && !m_fn(e)) {
      m_stopped = true;
    }
  }
  void on_rejected_entry(rs::Entry&&, uint64_t, const std::string&) override {
    m_stopped = true; // the diagnostics name it
  }
  bool stopped() const { return m_stopped; }

private:
  const std::function<bool(rs::Entry&)>& m_fn;
  bool m_stopped = false;
};

} // namespace

Result<rs::ReadSummary> DumpPackage::stream_manifest(zip_t* z, const std::function<bool(rs::Entry&)>& fn) const {
  std::unique_ptr<zip_file_t, ZipFileCloser> f(zip_fopen_index(z, m_impl->manifest_index, 0));
  if (!f) {
    return make_error(ErrorKind::invalid_document, std::string("manifest.xml: ") + zip_strerror(z));
  }
  EntryStream handler(fn);
  rs::Reader reader(handler);
  std::vector<char> buf(64 * 1024);
  for (;;) {
    const zip_int64_t got = zip_fread(f.get(), buf.data(), buf.size());
    if (got < 0) {
      return make_error(ErrorKind::invalid_document, "manifest.xml is truncated or corrupt");
    }
    if (got == 0 || handler.stopped() || !reader.feed(buf.data(), static_cast<size_t>(got))) {
      break;
    }
  }
  return reader.finish();
}

Result<void> DumpPackage::read_manifest(size_t slice, const SliceFn& fn) const {
  slice = std::max<size_t>(slice, 1);
  std::vector<rs::Entry> entries;
  size_t first = 0;
  size_t seen = 0;
  Result<void> status;
  auto flush = [&]() {
    if (status && !entries.empty()) {
      status = fn(entries, first);
    }
    first += entries.size();
    entries.clear();
    return static_cast<bool>(status);
  };
  auto summary = stream_manifest(m_impl->zip.get(), [&](rs::Entry& e) {
    ++seen;
    entries.push_back(std::move(e));
    return entries.size() < slice || flush();
  });
  if (!summary) {
    return tl::unexpected(summary.error());
  }
  if (status && seen != m_impl->entries) {
    // The file is ours and unchanged since open(): a second reading that
    // differs means the disk failed us.
    return make_error(ErrorKind::io, m_impl->url + ": manifest.xml read differently the second time");
  }
  flush();
  return status;
}

Result<rs::Document> DumpPackage::manifest() const {
  rs::Document out;
  out.header = m_impl->header;
  auto r = read_manifest(m_impl->entries + 1, [&](std::vector<rs::Entry>& entries, size_t) -> Result<void> {
    out.entries = std::move(entries);
    return {};
  });
  if (!r) {
    return tl::unexpected(r.error());
  }
  return out;
}

Result<FetchedContent> DumpPackage::extract(const rs::Entry& e, size_t i, store::BlobStore& blobs) const {
  return extract_from(m_impl->zip.get(), e, i, blobs);
}

std::vector<Result<FetchedContent>> DumpPackage::extract_many(const std::vector<const rs::Entry*>& entries,
                                                              const std::vector<size_t>& indices,
                                                              store::BlobStore& blobs, unsigned threads) const {
  std::vector<Result<FetchedContent>> results;
  results.reserve(indices.size());
  for (size_t k = 0; k < indices.size(); ++k) {
    results.emplace_back(make_error(ErrorKind::invalid_document, m_impl->url + ": not extracted"));
  }
  std::atomic<bool> failed{false};
  std::vector<char> attempted(indices.size(), 0);
  // libzip handles are not shared between threads: each worker opens the
  // package again and takes a contiguous slice.
  const size_t n = std::max<size_t>(1, std::min<size_t>(threads, indices.size() / 64 + 1));
  auto work = [&](size_t t, zip_t* z) {
    const size_t begin = indices.size() * t / n;
    const size_t end = indices.size() * (t + 1) / n;
    for (size_t k = begin; k < end && !failed; ++k) {
      attempted[k] = 1;
      try {
        results[k] = extract_from(z, *entries[k], indices[k], blobs);
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
  {
    std::lock_guard lock(m_impl->spare_mutex);
    while (handles.size() + 1 < n && !m_impl->spare.empty()) {
      handles.push_back(std::move(m_impl->spare.back()));
      m_impl->spare.pop_back();
    }
  }
  while (handles.size() + 1 < n) {
    int err = 0;
    zip_t* z = zip_open(m_impl->path.c_str(), ZIP_RDONLY, &err);
    if (!z) {
      break; // fewer threads, then
    }
    handles.emplace_back(z);
  }
  // Given back for the next call, whichever way this one ends.
  struct GiveBack {
    Impl& impl;
    std::vector<std::unique_ptr<zip_t, ZipCloser>>& handles;
    ~GiveBack() {
      std::lock_guard lock(impl.spare_mutex);
      for (auto& h : handles) {
        impl.spare.push_back(std::move(h));
      }
    }
  } give_back{*m_impl, handles};
  const size_t used = handles.size() + 1;
  if (used < n) {
    // Could not open every handle: one thread does it all.
    for (size_t k = 0; k < indices.size() && !failed; ++k) {
      results[k] = extract_from(m_impl->zip.get(), *entries[k], indices[k], blobs);
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
  // What was never attempted carries the failure that stopped the work, so
  // that whichever result a caller reports first names the real reason.
  for (size_t k = 0; k < results.size() && failed; ++k) {
    if (attempted[k] && !results[k]) {
      for (size_t j = 0; j < results.size(); ++j) {
        if (!attempted[j]) {
          results[j] = tl::unexpected(results[k].error());
        }
      }
      break;
    }
  }
  return results;
}

size_t DumpPackage::spare_handles() const {
  std::lock_guard lock(m_impl->spare_mutex);
  return m_impl->spare.size();
}

Result<FetchedContent> DumpPackage::extract_from(zip_t* zip, const rs::Entry& e, size_t i,
                                                store::BlobStore& blobs) const {
  const Impl& m = *m_impl;
  if (i >= m.index_of.size()) {
    return make_error(ErrorKind::invalid_document, m.url + ": no manifest entry " + std::to_string(i));
  }
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
    if (!rs::hashes_match(std::span(check, 1), writer->digests(), &mismatch)) {
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
      if (!rs::hashes_match(std::span(check, 1), hasher.finish(), &mismatch)) {
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

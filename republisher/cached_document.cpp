#include "republisher/cached_document.h"

#include "resourcesync/model.h"
#include "resourcesync/writer.h"

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <iterator>

namespace tributary::pub {

namespace {

// Writes `bytes` to `path` through a temporary name of this process's own
// (a reader never sees a half-written file, and a second process writing
// the same document does not write into ours).
bool write_file(const std::filesystem::path& path, const std::string& bytes) {
  const std::filesystem::path tmp = path.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      return false;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  return !ec;
}

std::string etag_from(const std::string& sha256_hex) { return "\"" + sha256_hex.substr(0, 32) + "\""; }

std::string etag_of(const std::string& body) { return etag_from(rs::hash_hex(rs::HashAlgorithm::sha256, body)); }

// How hard an immutable document's gzip copy is compressed: once, at level
// 6 (rs::gzip, libdeflate). A transient one's: k_transient_gzip_level.
constexpr int k_immutable_level = -1;

// A document in files under `dir`, `name` and its gzip copy `name`.gz;
// nullptr when they cannot be written.
std::unique_ptr<CachedDocument> in_files(const std::string& body, const std::string& gz, std::string etag,
                                         const std::filesystem::path& dir, const std::string& name,
                                         const std::string& type) {
  auto d = std::make_unique<CachedDocument>();
  d->content_type = type;
  d->etag = std::move(etag);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !write_file(dir / name, body) || !write_file(dir / (name + ".gz"), gz)) {
    std::filesystem::remove(dir / name, ec);
    return nullptr;
  }
  d->file = dir / name;
  d->gz_file = dir / (name + ".gz");
  d->size = body.size();
  d->gz_size = gz.size();
  return d;
}

constexpr size_t k_file_min = 64 * 1024;

std::shared_ptr<CachedDocument> in_memory(std::string body, std::string gz, std::string etag,
                                          const std::string& type) {
  auto d = std::make_shared<CachedDocument>();
  d->etag = std::move(etag);
  d->gzipped = std::move(gz);
  d->body = std::move(body);
  d->content_type = type;
  return d;
}

std::shared_ptr<CachedDocument> in_memory(std::string body, const std::string& type, int level) {
  std::string gz = rs::gzip(body, level);
  std::string etag = etag_of(body);
  return in_memory(std::move(body), std::move(gz), std::move(etag), type);
}

} // namespace

std::shared_ptr<const CachedDocument> cached(std::string body, const std::string& type, bool immutable) {
  auto d = in_memory(std::move(body), type, k_immutable_level);
  d->immutable = immutable;
  return d;
}

std::shared_ptr<const CachedDocument> cached_on_disk(std::string body, const std::filesystem::path& dir,
                                                     const std::string& name) {
  auto d = in_files(body, rs::gzip(body, k_immutable_level), etag_of(body), dir, name, "application/xml");
  if (!d) {
    return cached(std::move(body), "application/xml", true);
  }
  d->immutable = true;
  return d;
}

std::shared_ptr<const CachedDocument> cached_transient(std::string body, const std::filesystem::path& dir,
                                                       const std::string& type) {
  std::string gz = rs::gzip(body, k_transient_gzip_level);
  const std::string sha = rs::hash_hex(rs::HashAlgorithm::sha256, body);
  return cached_transient(std::move(body), std::move(gz), sha, dir, type);
}

std::shared_ptr<const CachedDocument> cached_transient(std::string body, std::string gzipped,
                                                       const std::string& sha256_hex,
                                                       const std::filesystem::path& dir, const std::string& type) {
  if (gzipped.empty() || sha256_hex.empty()) {
    return cached_transient(std::move(body), dir, type);
  }
  static std::atomic<uint64_t> generation{0};
  auto d = dir.empty() || body.size() < k_file_min
               ? nullptr
               : in_files(body, gzipped, etag_from(sha256_hex), dir,
                          "open-" + std::to_string(generation.fetch_add(1) + 1) + ".xml", type);
  if (!d) {
    return in_memory(std::move(body), std::move(gzipped), etag_from(sha256_hex), type);
  }
  return std::shared_ptr<const CachedDocument>(d.release(), [](const CachedDocument* p) {
    std::error_code e;
    std::filesystem::remove(p->file, e);
    std::filesystem::remove(p->gz_file, e);
    delete p;
  });
}

void remove_transient(const std::filesystem::path& dir) {
  std::error_code ec;
  for (const auto& set : std::filesystem::directory_iterator(dir, ec)) {
    std::error_code e;
    for (const auto& f : std::filesystem::directory_iterator(set.path(), e)) {
      if (f.path().filename().string().rfind("open-", 0) == 0) {
        std::filesystem::remove(f.path(), e);
      }
    }
  }
}

Result<std::string> bytes_of(const CachedDocument& doc) {
  if (doc.file.empty()) {
    return doc.body;
  }
  std::ifstream in(doc.file, std::ios::binary);
  std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) {
    return make_error(ErrorKind::io, doc.file.string() + ": cannot be read");
  }
  return out;
}

} // namespace tributary::pub

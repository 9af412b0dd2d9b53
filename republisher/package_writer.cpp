#include "republisher/package_writer.h"

#include "resourcesync/writer.h"

#include <zip.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <map>

#include <fcntl.h>
#include <unistd.h>

namespace tributary::pub {

namespace {

// The pack files a package's regions lie in, each opened once while the
// package is written. (zip_source_file opened, examined and sought each
// region's file anew, five system calls a bitstream: at 256-byte
// resources, a fifth of the time the dump builder took.) At most
// k_most_open at once: a Resource Dump package lists resources by URI,
// whose blobs may lie in as many packs as it has bitstreams.
class PackFiles {
public:
  PackFiles() = default;
  PackFiles(const PackFiles&) = delete;
  PackFiles& operator=(const PackFiles&) = delete;
  ~PackFiles() { close_all(); }
  // The file's descriptor, or -1 with errno set.
  int fd(const std::string& path) {
    if (auto it = m_fds.find(path); it != m_fds.end()) {
      return it->second;
    }
    if (m_fds.size() >= k_most_open) {
      // libzip reads one bitstream at a time, opened to closed: none of
      // these is being read.
      close_all();
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      m_fds.emplace(path, fd);
    }
    return fd;
  }

private:
  static constexpr size_t k_most_open = 64;

  void close_all() {
    for (const auto& [path, fd] : m_fds) {
      ::close(fd);
    }
    m_fds.clear();
  }

  std::map<std::string, int> m_fds;
};

// One bitstream's region of a pack file, as a libzip source that reads it
// with pread through the package's PackFiles.
struct Region {
  PackFiles* files;
  std::string path;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t read = 0;
  int fd = -1;
  zip_error_t error;
};

zip_int64_t region_source(void* user, void* data, zip_uint64_t len, zip_source_cmd_t cmd) {
  auto* r = static_cast<Region*>(user);
  switch (cmd) {
  case ZIP_SOURCE_OPEN:
    r->fd = r->files->fd(r->path);
    if (r->fd < 0) {
      zip_error_set(&r->error, ZIP_ER_OPEN, errno);
      return -1;
    }
    r->read = 0;
    return 0;
  case ZIP_SOURCE_READ: {
    const uint64_t want = std::min<uint64_t>(len, r->length - r->read);
    if (want == 0) {
      return 0;
    }
    ssize_t got;
    do {
      got = ::pread(r->fd, data, want, static_cast<off_t>(r->offset + r->read));
    } while (got < 0 && errno == EINTR);
    if (got <= 0) {
      // A region shorter than the blob store says: never a short bitstream.
      zip_error_set(&r->error, ZIP_ER_READ, got < 0 ? errno : EIO);
      return -1;
    }
    r->read += static_cast<uint64_t>(got);
    return got;
  }
  case ZIP_SOURCE_CLOSE:
    return 0;
  case ZIP_SOURCE_STAT: {
    auto* st = static_cast<zip_stat_t*>(data);
    zip_stat_init(st);
    st->size = r->length;
    st->valid |= ZIP_STAT_SIZE;
    return sizeof(zip_stat_t);
  }
  case ZIP_SOURCE_ERROR:
    return zip_error_to_data(&r->error, data, len);
  case ZIP_SOURCE_FREE:
    zip_error_fini(&r->error);
    delete r;
    return 0;
  case ZIP_SOURCE_SUPPORTS:
    return zip_source_make_command_bitmap(ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE, ZIP_SOURCE_STAT,
                                          ZIP_SOURCE_ERROR, ZIP_SOURCE_FREE, -1);
  default:
    zip_error_set(&r->error, ZIP_ER_OPNOTSUPP, 0);
    return -1;
  }
}

zip_source_t* region(zip_t* z, PackFiles& files, const store::BlobLocation& blob) {
  auto* r = new Region{&files, blob.file.string(), blob.offset, blob.length, 0, -1, {}};
  zip_error_init(&r->error);
  zip_source_t* src = zip_source_function(z, region_source, r);
  if (!src) {
    zip_error_fini(&r->error);
    delete r;
  }
  return src;
}

// The level manifest.xml is deflated at. At zlib's 6 (its default),
// deflating the manifests was a third of the dump builder's time in a
// baseline of 256-byte resources; zlib's 3 took half of that and was still
// its largest single cost (2.4% of the host's processor time through a
// baseline of a million). It is now deflated by libdeflate at 1
// (rs::deflate_raw) before libzip sees it: a 13.8 MB Change List in
// 35 ms and 2.04 MB, where zlib's 3 took 83 ms for 2.28 MB; a package of
// 10,000 x 256 B and a 3.9 MB manifest (bench/package.cpp) in 39 ms
// against 58-62 ms, 4.14 MB against 4.23 MB.
constexpr int k_manifest_level = 1;

// manifest.xml deflated already, as a libzip source: its stat gives the
// method, both sizes and the CRC, so libzip copies the stream as it is
// (zip_close neither compresses it again nor reads it for a CRC).
struct Deflated {
  std::string stream;   // raw DEFLATE
  uint64_t size = 0;    // inflated
  uint32_t crc = 0;     // of the inflated bytes
  uint64_t read = 0;
  zip_error_t error;
};

zip_int64_t deflated_source(void* user, void* data, zip_uint64_t len, zip_source_cmd_t cmd) {
  auto* d = static_cast<Deflated*>(user);
  switch (cmd) {
  case ZIP_SOURCE_OPEN:
    d->read = 0;
    return 0;
  case ZIP_SOURCE_READ: {
    const uint64_t n = std::min<uint64_t>(len, d->stream.size() - d->read);
    std::copy_n(d->stream.data() + d->read, n, static_cast<char*>(data));
    d->read += n;
    return static_cast<zip_int64_t>(n);
  }
  case ZIP_SOURCE_CLOSE:
    return 0;
  case ZIP_SOURCE_STAT: {
    auto* st = static_cast<zip_stat_t*>(data);
    zip_stat_init(st);
    st->size = d->size;
    st->comp_size = d->stream.size();
    st->comp_method = ZIP_CM_DEFLATE;
    st->crc = d->crc;
    st->encryption_method = ZIP_EM_NONE;
    st->valid |= ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD | ZIP_STAT_CRC | ZIP_STAT_ENCRYPTION_METHOD;
    return sizeof(zip_stat_t);
  }
  case ZIP_SOURCE_ERROR:
    return zip_error_to_data(&d->error, data, len);
  case ZIP_SOURCE_FREE:
    zip_error_fini(&d->error);
    delete d;
    return 0;
  case ZIP_SOURCE_SUPPORTS:
    return zip_source_make_command_bitmap(ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE, ZIP_SOURCE_STAT,
                                          ZIP_SOURCE_ERROR, ZIP_SOURCE_FREE, -1);
  default:
    zip_error_set(&d->error, ZIP_ER_OPNOTSUPP, 0);
    return -1;
  }
}

zip_source_t* deflated_manifest(zip_t* z, const std::string& manifest_xml) {
  std::string stream = rs::deflate_raw(manifest_xml, k_manifest_level);
  stream.shrink_to_fit(); // it was given room for the whole manifest
  auto* d = new Deflated{std::move(stream), manifest_xml.size(),
                         static_cast<uint32_t>(crc32_z(crc32(0L, Z_NULL, 0),
                                                     reinterpret_cast<const Bytef*>(manifest_xml.data()),
                                                     manifest_xml.size())),
                         0, {}};
  zip_error_init(&d->error);
  zip_source_t* src = zip_source_function(z, deflated_source, d);
  if (!src) {
    zip_error_fini(&d->error);
    delete d;
  }
  return src;
}

// Adds manifest.xml and the bitstreams to an open archive; `where` names it
// in errors. The buffers and `packs` must live until the archive is closed.
Result<void> add_entries(zip_t* z, PackFiles& packs, const std::string& where, const std::string& manifest_xml,
                         const std::vector<PackageFile>& files) {
  zip_source_t* m = deflated_manifest(z, manifest_xml);
  zip_int64_t idx = m ? zip_file_add(z, "manifest.xml", m, ZIP_FL_ENC_UTF_8) : -1;
  if (idx < 0) {
    if (m) {
      zip_source_free(m);
    }
    return make_error(ErrorKind::io, "cannot add manifest.xml to " + where);
  }
  for (const auto& f : files) {
    // A region of a pack file (or a whole file); libzip reads a length of
    // 0 as "to the end", so an empty blob is an empty buffer.
    zip_source_t* src = f.bytes ? zip_source_buffer(z, f.bytes->data(), f.bytes->size(), 0)
                        : f.blob.length == 0
                            ? zip_source_buffer(z, nullptr, 0, 0)
                            : region(z, packs, f.blob);
    idx = src ? zip_file_add(z, f.name.c_str(), src, ZIP_FL_ENC_UTF_8) : -1;
    if (idx < 0) {
      if (src) {
        zip_source_free(src);
      }
      return make_error(ErrorKind::io, "cannot add " + f.name + " to " + where);
    }
    zip_set_file_compression(z, static_cast<zip_uint64_t>(idx), ZIP_CM_STORE, 0);
  }
  return {};
}

// Packages up to this size are put together in memory and written to
// their file at once. Written to a file by libzip, each entry's header is
// written, sought back to, written again and sought past: at 256-byte
// resources, write and lseek were a tenth of the dump builder's time.
constexpr uint64_t k_in_memory_package = 16 << 20;

Result<rs::HashValue> write_whole(const std::filesystem::path& dest, const std::filesystem::path& tmp,
                                  const std::string& manifest_xml, const std::vector<PackageFile>& files) {
  auto bytes = package_bytes(manifest_xml, files);
  if (!bytes) {
    return tl::unexpected(bytes.error());
  }
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
    out.close();
    if (!out) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return make_error(ErrorKind::io, "cannot write " + tmp.string());
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, dest, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return make_error(ErrorKind::io, "cannot rename " + tmp.string() + ": " + ec.message());
  }
  return rs::HashValue{"sha-256", rs::hash_hex(rs::HashAlgorithm::sha256, *bytes)};
}

} // namespace

Result<rs::HashValue> write_package(const std::filesystem::path& dest, const std::string& manifest_xml,
                                    const std::vector<PackageFile>& files) {
  const std::filesystem::path tmp = dest.string() + ".tmp";
  uint64_t total = manifest_xml.size();
  for (const auto& f : files) {
    total += f.bytes ? f.bytes->size() : f.blob.length;
  }
  if (total <= k_in_memory_package) {
    return write_whole(dest, tmp, manifest_xml, files);
  }
  int err = 0;
  zip_t* z = zip_open(tmp.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  if (!z) {
    return make_error(ErrorKind::io, "cannot create " + tmp.string());
  }
  PackFiles packs; // read through until the archive is closed or discarded below
  if (auto r = add_entries(z, packs, tmp.string(), manifest_xml, files); !r) {
    zip_discard(z);
    return tl::unexpected(r.error());
  }
  if (zip_close(z) != 0) {
    const std::string why = zip_strerror(z);
    zip_discard(z);
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    return make_error(ErrorKind::io, "cannot write " + tmp.string() + ": " + why);
  }
  // The package's own digest, for the dump's rs:md.
  rs::HashValue digest = package_digest(tmp);
  std::error_code ec;
  std::filesystem::rename(tmp, dest, ec);
  if (ec) {
    return make_error(ErrorKind::io, "cannot rename " + tmp.string() + ": " + ec.message());
  }
  return digest;
}

rs::HashValue package_digest(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  rs::Hasher h(rs::HashAlgorithm::sha256);
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    h.update(buf, static_cast<size_t>(in.gcount()));
  }
  return rs::HashValue{"sha-256", h.finish_hex()};
}

Result<std::string> package_bytes(const std::string& manifest_xml, const std::vector<PackageFile>& files) {
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* buffer = zip_source_buffer_create(nullptr, 0, 0, &err);
  zip_t* z = buffer ? zip_open_from_source(buffer, ZIP_TRUNCATE, &err) : nullptr;
  if (!z) {
    if (buffer) {
      zip_source_free(buffer);
    }
    zip_error_fini(&err);
    return make_error(ErrorKind::io, "cannot create a package in memory");
  }
  zip_source_keep(buffer); // outlives the archive: the bytes are read from it
  PackFiles packs;
  auto added = add_entries(z, packs, "a package in memory", manifest_xml, files);
  if (!added || zip_close(z) != 0) {
    zip_discard(z);
    zip_source_free(buffer);
    zip_error_fini(&err);
    return added ? make_error(ErrorKind::io, "cannot write a package in memory") : tl::unexpected(added.error());
  }
  // The archive written into the buffer, read back whole: anything less
  // is an error, never a short or empty package.
  std::string out;
  zip_stat_t st;
  bool whole = false;
  if (zip_source_stat(buffer, &st) == 0 && (st.valid & ZIP_STAT_SIZE) != 0 && zip_source_open(buffer) == 0) {
    out.resize(static_cast<size_t>(st.size));
    const zip_int64_t n = zip_source_read(buffer, out.data(), st.size);
    zip_source_close(buffer);
    whole = n > 0 && static_cast<zip_uint64_t>(n) == st.size;
  }
  zip_source_free(buffer);
  zip_error_fini(&err);
  if (!whole) {
    return make_error(ErrorKind::io, "cannot read back a package written in memory");
  }
  return out;
}

} // namespace tributary::pub

#include "republisher/package_writer.h"

#include <zip.h>

#include <fstream>

namespace tributary::pub {

namespace {

// Adds manifest.xml and the bitstreams to an open archive; `where` names it
// in errors. The buffers must live until the archive is closed.
Result<void> add_entries(zip_t* z, const std::string& where, const std::string& manifest_xml,
                         const std::vector<PackageFile>& files) {
  zip_source_t* m = zip_source_buffer(z, manifest_xml.data(), manifest_xml.size(), 0);
  zip_int64_t idx = m ? zip_file_add(z, "manifest.xml", m, ZIP_FL_ENC_UTF_8) : -1;
  if (idx < 0) {
    if (m) {
      zip_source_free(m);
    }
    return make_error(ErrorKind::io, "cannot add manifest.xml to " + where);
  }
  zip_set_file_compression(z, static_cast<zip_uint64_t>(idx), ZIP_CM_DEFLATE, 6);
  for (const auto& f : files) {
    // A region of a pack file (or a whole file); libzip reads a length of
    // 0 as "to the end", so an empty blob is an empty buffer.
    zip_source_t* src = f.bytes ? zip_source_buffer(z, f.bytes->data(), f.bytes->size(), 0)
                        : f.blob.length == 0
                            ? zip_source_buffer(z, nullptr, 0, 0)
                            : zip_source_file(z, f.blob.file.c_str(), f.blob.offset,
                                              static_cast<zip_int64_t>(f.blob.length));
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

} // namespace

Result<rs::HashValue> write_package(const std::filesystem::path& dest, const std::string& manifest_xml,
                                    const std::vector<PackageFile>& files) {
  const std::filesystem::path tmp = dest.string() + ".tmp";
  int err = 0;
  zip_t* z = zip_open(tmp.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  if (!z) {
    return make_error(ErrorKind::io, "cannot create " + tmp.string());
  }
  if (auto r = add_entries(z, tmp.string(), manifest_xml, files); !r) {
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
  auto added = add_entries(z, "a package in memory", manifest_xml, files);
  if (!added || zip_close(z) != 0) {
    zip_discard(z);
    zip_source_free(buffer);
    zip_error_fini(&err);
    return added ? make_error(ErrorKind::io, "cannot write a package in memory") : tl::unexpected(added.error());
  }
  std::string out;
  zip_stat_t st;
  if (zip_source_stat(buffer, &st) == 0 && zip_source_open(buffer) == 0) {
    out.resize(static_cast<size_t>(st.size));
    const zip_int64_t n = zip_source_read(buffer, out.data(), st.size);
    zip_source_close(buffer);
    out.resize(n < 0 ? 0 : static_cast<size_t>(n));
  }
  zip_source_free(buffer);
  zip_error_fini(&err);
  return out;
}

} // namespace tributary::pub

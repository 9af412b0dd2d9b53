#include "republisher/responses.h"

#include "common/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>

namespace tributary::pub {

std::string http_date(rs::Timestamp t) {
  return http::http_date(
      std::chrono::system_clock::to_time_t(std::chrono::time_point_cast<std::chrono::seconds>(t)));
}

bool accepts_gzip(const http::Request& req) {
  const std::string* ae = req.header("accept-encoding");
  return ae && ae->find("gzip") != std::string::npos;
}

bool none_match(const http::Request& req, const std::string& etag) {
  const std::string* inm = req.header("if-none-match");
  if (!inm) {
    return false;
  }
  return *inm == "*" || inm->find(etag) != std::string::npos;
}

http::Disposition serve_document(const http::Request& req, http::Response& res,
                                 const std::shared_ptr<const CachedDocument>& doc, bool can_block) {
  const CachedDocument& d = *doc;
  const bool on_disk = !d.file.empty();
  if (on_disk && !none_match(req, d.etag) && !can_block) {
    return http::Disposition::blocking; // opening a file may wait on the disk
  }
  res.set_header("ETag", d.etag);
  res.set_header("Cache-Control", d.immutable ? "public, max-age=31536000, immutable" : "no-cache");
  res.set_header("Vary", "Accept-Encoding");
  if (none_match(req, d.etag)) {
    res.status = 304;
    return http::Disposition::done;
  }
  const bool gz = accepts_gzip(req) && (on_disk ? d.gz_size < d.size : d.gzipped.size() < d.body.size());
  if (gz) {
    res.set_header("Content-Encoding", "gzip");
  }
  if (on_disk) {
    const int fd = ::open((gz ? d.gz_file : d.file).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      res.status = 500; // removed from under us: the next restart writes it again
      return http::Disposition::done;
    }
    res.set_file(std::make_shared<const http::OpenFile>(fd), gz ? d.gz_size : d.size, d.content_type);
    return http::Disposition::done;
  }
  // Served from the cache without a copy; the aliasing pointer keeps the
  // document alive past a cache refresh.
  res.set_shared(std::shared_ptr<const std::string>(doc, gz ? &d.gzipped : &d.body), d.content_type);
  return http::Disposition::done;
}

http::Disposition serve_file_bytes(http::Response& res, int fd, size_t length, uint64_t offset, bool xml) {
  res.set_header("Cache-Control", "public, max-age=31536000, immutable");
  res.ranges = true;
  res.set_file(std::make_shared<const http::OpenFile>(fd), length, xml ? "application/xml" : "application/zip",
               offset);
  return http::Disposition::done;
}

http::Disposition serve_blob(http::Response& res, const store::BlobStore& blobs, const std::string& path,
                             const std::string& sha256) {
  auto where = blobs.locate(sha256);
  if (!where) {
    log::warn("", path + ": blob " + sha256 + " not readable: " + where.error().message);
    return unavailable(res);
  }
  const int fd = ::open(where->file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    res.status = 503; // garbage collection moved it meanwhile
    res.set_header("Retry-After", "1");
    return http::Disposition::done;
  }
  const bool xml = path.size() > 4 && path.compare(path.size() - 4, 4, ".xml") == 0;
  return serve_file_bytes(res, fd, where->length, where->offset, xml);
}

http::Disposition unavailable(http::Response& res) {
  res.status = 503;
  res.set_header("Retry-After", "5");
  return http::Disposition::done;
}

} // namespace tributary::pub

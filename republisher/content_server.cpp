// Serving documents and resources: conditional and gzip answers, the
// content view cache, blobs here or in the bucket.
#include "republisher/server_impl.h"

namespace tributary::pub {

using namespace server_detail;

auto Republisher::Impl::serve_document(const http::Request& req, http::Response& res,
    const std::shared_ptr<const CachedDocument>& doc, bool can_block) -> http::Disposition {
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

auto Republisher::Impl::content_view(const std::string& set, const std::string& uri, bool can_block,
    bool& miss) -> std::shared_ptr<const ContentView> {
  if (uri.size() > rs::k_max_uri_bytes) {
    return std::make_shared<ContentView>(); // longer than any we store: 404 without a query
  }
  const std::string key = set + '\n' + uri;
  std::vector<int64_t> feeds;
  uint64_t epoch = 0;
  {
    std::shared_lock lock(cache_mutex);
    epoch = cache_epoch;
    if (auto it = resource_cache.find(key); it != resource_cache.end()) {
      return it->second;
    }
    if (!can_block) {
      miss = true;
      return nullptr;
    }
    auto sf = set_feeds.find(set);
    if (sf == set_feeds.end()) {
      return std::make_shared<ContentView>();
    }
    feeds = sf->second;
  }
  std::optional<store::ResourceRecord> found;
  for (int64_t f : feeds) {
    auto r = lookups->resource(f, uri);
    if (!r) {
      return nullptr; // the store is unreachable: 503, not cached
    }
    if (*r) {
      found = std::move(**r);
      break;
    }
  }
  auto v = std::make_shared<ContentView>();
  if (found && (found->state == store::ResourceState::deleted || !found->blob_sha256)) {
    v->status = 410;
  } else if (found) {
    auto where = blobs->locate(*found->blob_sha256);
    if (!where) {
      return nullptr; // not cached: 503, asked again next time
    }
    v->status = 200;
    v->etag = "\"" + *found->blob_sha256 + "\"";
    const rs::Timestamp modified = found->lastmod ? *found->lastmod : found->fetched_at.value_or(rs::Timestamp{});
    v->last_modified = http_date(modified);
    v->modified = std::chrono::system_clock::to_time_t(std::chrono::time_point_cast<std::chrono::seconds>(modified));
    v->type = found->type.value_or("application/octet-stream");
    v->path = where->file.string();
    v->offset = static_cast<size_t>(where->offset);
    v->size = static_cast<size_t>(where->length);
    if (v->size <= k_inline_max) {
      auto bytes = blobs->read(*found->blob_sha256);
      if (bytes) {
        v->bytes = std::make_shared<const std::string>(std::move(*bytes));
      }
    }
  }
  if (v->status == 404) {
    return v; // not cached: any URI can be asked for, and a flood of them must not fill memory
  }
  std::unique_lock lock(cache_mutex);
  if (epoch != cache_epoch) {
    return v; // read before the store moved on: answer this request, never cache it
  }
  if (resource_cache.size() >= 200000 || cached_bytes > k_inline_budget) {
    resource_cache.clear(); // bounded; a cold miss costs one query
    cached_bytes = 0;
  }
  cached_bytes += key.size() + sizeof(ContentView) + v->path.size() + (v->bytes ? v->bytes->size() : 0);
  resource_cache[key] = v;
  return v;
}

auto Republisher::Impl::serve_blob(http::Response& res, const std::string& path,
    const std::string& sha256) -> http::Disposition {
  auto where = blobs->locate(sha256);
  if (!where) {
    log::warn("", path + ": blob " + sha256 + " not readable: " + where.error().message);
    res.status = 503;
    res.set_header("Retry-After", "5");
    return http::Disposition::done;
  }
  const int fd = ::open(where->file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    res.status = 503; // garbage collection moved it meanwhile
    res.set_header("Retry-After", "1");
    return http::Disposition::done;
  }
  const bool xml = path.size() > 4 && path.compare(path.size() - 4, 4, ".xml") == 0;
  return serve_dump_bytes(res, fd, where->length, where->offset, xml);
}

auto Republisher::Impl::serve_resource(const http::Request& req, http::Response& res, const std::string& set,
    const std::string& uri, bool can_block) -> http::Disposition {
  bool miss = false;
  auto v = content_view(set, uri, can_block, miss);
  if (miss) {
    return http::Disposition::blocking;
  }
  if (!v) {
    res.status = 503;
    res.set_header("Retry-After", "5");
    return http::Disposition::done;
  }
  if (v->status != 404) {
    res.set_header("Link", "<" + urls.capability_list(set) + ">; rel=\"resourcesync\"");
  }
  if (v->status != 200) {
    res.status = v->status;
    return http::Disposition::done;
  }
  res.set_header("ETag", v->etag);
  res.set_header("Last-Modified", v->last_modified);
  res.set_header("Accept-Ranges", "bytes");
  // Mirrored bytes are an upstream's, served from our origin (beside
  // /status and /api): never sniffed into something else, and any HTML or
  // SVG among them runs sandboxed, as an opaque origin with no script
  // that could read our answers (#35).
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Content-Security-Policy", "sandbox");
  bool not_modified = none_match(req, v->etag);
  if (!req.header("if-none-match")) {
    if (const std::string* ims = req.header("if-modified-since")) {
      auto since = http::parse_http_date(*ims);
      not_modified = since && v->modified <= *since;
    }
  }
  if (not_modified) {
    res.status = 304;
    return http::Disposition::done;
  }
  res.ranges = true;
  if (v->bytes) {
    res.set_shared(std::shared_ptr<const std::string>(v, v->bytes.get()), v->type);
    return http::Disposition::done;
  }
  if (!can_block) {
    return http::Disposition::blocking; // opening a file may wait on the disk
  }
  int fd = ::open(v->path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    // Garbage collection rewrote the pack this view was read from: the
    // blob lives on elsewhere. Locate it again, once.
    {
      std::unique_lock lock(cache_mutex);
      resource_cache.erase(set + '\n' + uri);
    }
    const std::string etag = v->etag;
    v = content_view(set, uri, true, miss);
    if (!v || v->status != 200 || v->etag != etag) {
      res.status = 503; // the resource changed meanwhile: its headers are gone
      res.set_header("Retry-After", "1");
      return http::Disposition::done;
    }
    if (v->bytes) {
      res.set_shared(std::shared_ptr<const std::string>(v, v->bytes.get()), v->type);
      return http::Disposition::done;
    }
    fd = ::open(v->path.c_str(), O_RDONLY | O_CLOEXEC);
  }
  if (fd < 0) {
    res.status = 500;
    return http::Disposition::done;
  }
  res.set_file(std::make_shared<const http::OpenFile>(fd), v->size, v->type, v->offset);
  return http::Disposition::done;
}

} // namespace tributary::pub

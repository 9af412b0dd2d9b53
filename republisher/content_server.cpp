// Room republisher/content_server: the resources we mirror, served by (set,
// original URI) from the blob store, with a cache of what each answers.
#include "republisher/content_server.h"

#include "republisher/responses.h"
#include "resourcesync/reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <set>

namespace tributary::pub {

namespace {

// Whether an upstream's value may go into a Link header as it is: printable
// ASCII with nothing that would end the URI reference or the parameter.
bool header_safe(std::string_view s) {
  for (unsigned char c : s) {
    if (c < 0x21 || c > 0x7e || c == '<' || c == '>' || c == '"' || c == '\\' || c == ',' || c == ';') {
      return false;
    }
  }
  return !s.empty();
}

// The Signposting links (signposting.org) an upstream gave a resource, as
// Link header values, each after ", ". A link with a value we could not
// send intact is left out: untrusted bytes never shape our headers.
std::string signposts_of(const std::vector<rs::Link>& links) {
  static const std::set<std::string_view> k_rels = {"author", "cite-as", "collection", "describedby",
                                                   "item", "license", "linkset", "type"};
  std::string out;
  for (const auto& l : links) {
    if (!k_rels.count(l.rel) || !header_safe(l.href) || (l.type && !header_safe(*l.type))) {
      continue;
    }
    out += ", <" + l.href + ">; rel=\"" + l.rel + "\"";
    if (l.type) {
      out += "; type=\"" + *l.type + "\"";
    }
  }
  return out;
}

} // namespace

ContentServer::ContentServer(std::shared_ptr<store::StoreReader> lookups, std::shared_ptr<store::BlobStore> blobs,
                             const UrlScheme& urls)
    : m_lookups(std::move(lookups)), m_blobs(std::move(blobs)), m_urls(urls) {}

void ContentServer::store_moved(std::shared_ptr<const SetFeeds> set_feeds) {
  std::unique_lock lock(m_mutex);
  m_set_feeds = std::move(set_feeds);
  m_cache.clear();
  m_cached_bytes = 0;
  ++m_epoch;
}

auto ContentServer::view(const std::string& set, const std::string& uri, bool can_block, bool& miss)
    -> std::shared_ptr<const View> {
  if (uri.size() > rs::k_max_uri_bytes) {
    return std::make_shared<View>(); // longer than any we store: 404 without a query
  }
  const std::string key = set + '\n' + uri;
  std::vector<int64_t> feeds;
  uint64_t epoch = 0;
  {
    std::shared_lock lock(m_mutex);
    epoch = m_epoch;
    if (auto it = m_cache.find(key); it != m_cache.end()) {
      return it->second;
    }
    if (!can_block) {
      miss = true;
      return nullptr;
    }
    auto sf = m_set_feeds->find(set);
    if (sf == m_set_feeds->end()) {
      return std::make_shared<View>();
    }
    feeds = sf->second;
  }
  std::optional<store::ResourceRecord> found;
  for (int64_t f : feeds) {
    auto r = m_lookups->resource(f, uri);
    if (!r) {
      return nullptr; // the store is unreachable: 503, not cached
    }
    if (*r) {
      found = std::move(**r);
      break;
    }
  }
  auto v = std::make_shared<View>();
  if (found && (found->state == store::ResourceState::deleted || !found->blob_sha256)) {
    v->status = 410;
  } else if (found) {
    auto where = m_blobs->locate(*found->blob_sha256);
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
    v->signposts = signposts_of(found->links);
    if (v->size <= k_inline_max) {
      auto bytes = m_blobs->read(*found->blob_sha256);
      if (bytes) {
        v->bytes = std::make_shared<const std::string>(std::move(*bytes));
      }
    }
  }
  if (v->status == 404) {
    return v; // not cached: any URI can be asked for, and a flood of them must not fill memory
  }
  std::unique_lock lock(m_mutex);
  if (epoch != m_epoch) {
    return v; // read before the store moved on: answer this request, never cache it
  }
  if (m_cache.size() >= 200000 || m_cached_bytes > k_inline_budget) {
    m_cache.clear(); // bounded; a cold miss costs one query
    m_cached_bytes = 0;
  }
  m_cached_bytes += key.size() + sizeof(View) + v->path.size() + (v->bytes ? v->bytes->size() : 0);
  m_cache[key] = v;
  return v;
}

auto ContentServer::serve(const http::Request& req, http::Response& res, const std::string& set,
    const std::string& uri, bool can_block) -> http::Disposition {
  bool miss = false;
  auto v = view(set, uri, can_block, miss);
  if (miss) {
    return http::Disposition::blocking;
  }
  if (!v) {
    return unavailable(res);
  }
  if (v->status != 404) {
    res.set_header("Link", "<" + m_urls.capability_list(set) + ">; rel=\"resourcesync\"" + v->signposts);
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
      std::unique_lock lock(m_mutex);
      m_cache.erase(set + '\n' + uri);
    }
    const std::string etag = v->etag;
    v = view(set, uri, true, miss);
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

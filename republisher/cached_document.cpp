#include "republisher/cached_document.h"

#include "resourcesync/model.h"
#include "resourcesync/writer.h"

namespace tributary::pub {

std::shared_ptr<const CachedDocument> cached(std::string body, const std::string& type, bool immutable) {
  auto d = std::make_shared<CachedDocument>();
  d->immutable = immutable;
  d->etag = "\"" + rs::hash_hex(rs::HashAlgorithm::sha256, body).substr(0, 32) + "\"";
  d->gzipped = rs::gzip(body);
  d->body = std::move(body);
  d->content_type = type;
  return d;
}

} // namespace tributary::pub

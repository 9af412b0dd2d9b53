#pragma once

// Answers built from what the republisher holds, for every kind it serves:
// a rendered document (conditional, gzip, from memory or a file), bytes in
// an open file (a dump package, a region of a pack), a blob by digest.
// Stateless: each takes what it answers from.

#include "common/http/server.h"
#include "republisher/cached_document.h"
#include "resourcesync/datetime.h"
#include "store/blob/blob_store.h"

#include <memory>
#include <string>

namespace tributary::pub {

// An HTTP date (RFC 9110) for a timestamp.
std::string http_date(rs::Timestamp t);
// Whether the client takes gzip (Accept-Encoding).
bool accepts_gzip(const http::Request& req);
// If-None-Match: "*", or a list of entity tags one of which is ours (weak
// comparison, RFC 9110 13.1.2).
bool none_match(const http::Request& req, const std::string& etag);

// 503 with Retry-After: 5: the database or the blob store cannot answer
// now (the client asks again in a few seconds).
http::Disposition unavailable(http::Response& res);

// A rendered document: ETag, Cache-Control, 304, gzip when smaller; a
// document on disk asks for a worker (blocking) unless it can wait.
http::Disposition serve_document(const http::Request& req, http::Response& res,
                                 const std::shared_ptr<const CachedDocument>& doc, bool can_block);
// `length` bytes of the open file `fd` from `offset` (a package or a
// manifest, or a region of a pack): immutable, with ranges.
http::Disposition serve_file_bytes(http::Response& res, int fd, size_t length, uint64_t offset, bool xml);
// A document or package kept as the blob `sha256`, served under `path`;
// 503 when the blob store cannot say where it is.
http::Disposition serve_blob(http::Response& res, const store::BlobStore& blobs, const std::string& path,
                             const std::string& sha256);

} // namespace tributary::pub

#pragma once

// Room republisher/cached_document: what the republisher serves for one
// document, held in memory or in files, made once and never rebuilt per
// request (internal to the module).

#include "common/result.h"

#include <filesystem>
#include <map>
#include <memory>
#include <string>

namespace tributary::pub {

// A rendered document, served as is: never rebuilt or recompressed per
// request. Small documents are held in memory; large ones (Resource List
// parts, closed Change List parts) live in files and go out by sendfile.
struct CachedDocument {
  std::string body;
  std::string gzipped;
  std::string etag;
  std::string content_type;
  bool immutable = false; // a closed Change List part: cacheable forever
  // Or, for documents kept on disk: the files and their sizes.
  std::filesystem::path file;
  std::filesystem::path gz_file;
  size_t size = 0;
  size_t gz_size = 0;
};

// Documents by URL path.
using DocumentMap = std::map<std::string, std::shared_ptr<const CachedDocument>>;

// A document held in memory, with its strong ETag (a digest of the bytes)
// and its gzip copy.
std::shared_ptr<const CachedDocument> cached(std::string body, const std::string& type, bool immutable = false);

// An immutable document kept on disk under `dir` as `name` (and its gzip
// copy as `name`.gz); in memory if the files cannot be written.
std::shared_ptr<const CachedDocument> cached_on_disk(std::string body, const std::filesystem::path& dir,
                                                     const std::string& name);

// How hard the gzip copy of a document that is rendered again while the
// store moves is compressed (the open Change List part, up to its 50,000
// entries every second of a baseline, and the index): level 1, the
// fastest (nginx's default too). Whole documents are compressed by
// rs::gzip (libdeflate: level 1 twice as fast as level 6 for about 12%
// more, a 13.8 MB Change List); the open part's copy is grown at the same
// level by zlib, as a stream (change_lists.h).
constexpr int k_transient_gzip_level = 1;

// A document that changes (the open Change List part), past 64 KiB, kept
// in files of its own under `dir` while it is served: the files go when
// the last reference does (a newer rendering replaced it and no response
// still reads it; a response already sending has its own open file).
// Small ones, or when the files cannot be written (or `dir` is empty): in
// memory.
std::shared_ptr<const CachedDocument> cached_transient(std::string body, const std::filesystem::path& dir,
                                                       const std::string& type);

// The same with its gzip copy and SHA-256 (hex) made already, as the open
// Change List part's are, grown with it (change_lists.h): neither is made
// again here. Empty ones are made here.
std::shared_ptr<const CachedDocument> cached_transient(std::string body, std::string gzipped,
                                                       const std::string& sha256_hex,
                                                       const std::filesystem::path& dir, const std::string& type);

// Removes what cached_transient() left in the set folders under `dir` (a
// process that died before its documents were released).
void remove_transient(const std::filesystem::path& dir);

// The bytes of a document, from memory or its file.
Result<std::string> bytes_of(const CachedDocument& doc);

} // namespace tributary::pub

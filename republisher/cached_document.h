#pragma once

#include <filesystem>
#include <memory>
#include <string>

// What the republisher serves for one document (internal to the module).
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

// A document held in memory, with its strong ETag (a digest of the bytes)
// and its gzip copy.
std::shared_ptr<const CachedDocument> cached(std::string body, const std::string& type, bool immutable = false);

} // namespace tributary::pub

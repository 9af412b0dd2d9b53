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

} // namespace tributary::pub

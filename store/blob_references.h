#pragma once

#include "common/result.h"

#include <functional>
#include <string>

namespace tributary::store {

// What the database says of blobs, for the blob store's garbage collection
// (store/blob/garbage.h). PgStore implements it; the collection sees only
// this.
class BlobReferences {
public:
  virtual ~BlobReferences() = default;

  // Every blob the database names, as of one snapshot: the content of every
  // live resource and of every change the change log still holds (our
  // Change Lists and Change Dump packages are rendered from it), and of
  // every dump package or manifest shared through the bucket. Names may
  // repeat.
  virtual Result<void> for_each_referenced_blob(const std::function<void(const std::string& sha256)>& fn) = 0;
  // Every blob the shared bucket holds (none without one).
  virtual Result<void> for_each_placed_blob(const std::function<void(const std::string& sha256)>& fn) = 0;
};

} // namespace tributary::store

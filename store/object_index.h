#pragma once

#include "common/result.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tributary::store {

// The shared bucket's index (content_object, schema 0008 and 0011): which
// object holds each blob, at which offset. The S3 tier (store/s3/) keeps
// it through this interface; store/pg/ implements it over PostgreSQL.
class ObjectIndex {
public:
  virtual ~ObjectIndex() = default;

  // Where a blob is in the bucket.
  struct Place {
    std::string object;
    uint64_t offset = 0;
    uint64_t length = 0;
  };
  struct Row {
    std::string sha256;
    Place place;
  };

  // One transaction of index work. Its calls throw on failure (the
  // backend's exceptions): `with` turns them into an Error.
  class Work {
  public:
    virtual ~Work() = default;
    // Of `sha256s`, those the bucket holds (rows not marked for collection).
    virtual std::set<std::string> known(const std::vector<std::string>& sha256s) = 0;
    // Takes an object key's lock until the work ends: shared while an
    // uploader puts the object and names it, exclusive to delete it.
    virtual void lock_object(const std::string& key, bool exclusive) = 0;
    // Names each blob's place (a row marked for collection is taken back).
    virtual void name(const std::vector<Row>& rows) = 0;
    // Whether any row names the object.
    virtual bool names_object(const std::string& key) = 0;
    // The object is gone (or named again): off the list of dead objects.
    virtual void forget_dead(const std::string& key) = 0;
  };
  // Runs `fn` in one transaction; a broken connection runs it once more, on
  // a new one, from the start (so `fn` must reset what it gathers).
  virtual Result<void> with(const char* what, const std::function<void(Work&)>& fn) = 0;

  // Whether the index exists (the schema is migrated).
  virtual Result<void> check() = 0;
  virtual Result<std::optional<Place>> find(const std::string& sha256) = 0;
  // Every blob in `object`, by offset.
  virtual Result<std::vector<Row>> members(const std::string& object) = 0;

  // The rows' part of the bucket's collection: rows of blobs the database
  // names nowhere are marked, rows named again are unmarked, rows marked
  // more than `grace` ago and still named nowhere are deleted, and the
  // objects they leave empty are listed as dead. With `dry_run`, counts.
  struct Collected {
    uint64_t rows = 0;      // rows before
    uint64_t pardoned = 0;  // marked before, named again
    uint64_t condemned = 0; // newly marked
    uint64_t waiting = 0;   // marked, within the grace period (after this collection)
    uint64_t removed = 0;   // rows deleted
    uint64_t removed_bytes = 0;
  };
  virtual Result<Collected> collect_rows(std::chrono::seconds grace, bool dry_run) = 0;
  // Objects no row names any more, to delete from the bucket.
  virtual Result<std::vector<std::string>> dead_objects() = 0;
};

} // namespace tributary::store

#pragma once

#include "common/result.h"
#include "resourcesync/datetime.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

// The dump packages and Resource Dump documents of our own that every node
// serves alike when content lives in a shared bucket (schema 0010): the
// package bytes are blobs (so in the bucket), the database names them by
// URL path, so that a client behind a load balancer gets from any node the
// package another node's document listed, with the bytes its hash says.
namespace tributary::store {

class SharedDumps {
public:
  virtual ~SharedDumps() = default;

  // A file we serve under `url_path` (a package or a Change Dump manifest):
  // the blob holding it.
  struct File {
    std::string url_path;
    std::string sha256;
    uint64_t length = 0;
  };
  // A set's Resource Dump: its document and generation, the change-log seq
  // it was built at, and when.
  struct ResourceDump {
    std::string generation;
    std::string document;
    int64_t seq = 0;
    std::chrono::system_clock::time_point built_at;
  };

  // Every set's current Resource Dump (set name -> its generation, seq and
  // time; the documents are left out).
  virtual Result<std::vector<std::pair<std::string, ResourceDump>>> resource_dumps() = 0;
  // The set's current Resource Dump with its document, if any node built one.
  virtual Result<std::optional<ResourceDump>> resource_dump(const std::string& set) = 0;
  // Makes `dump`, with its package `files`, the set's current Resource
  // Dump, unless one built at a later seq is there already (false then).
  // Files of the set's generations other than it and the one it replaces
  // (whose downloads may be in progress) are no longer named.
  virtual Result<bool> put_resource_dump(const std::string& set, const ResourceDump& dump,
                                         const std::vector<File>& files) = 0;
  // A Change Dump package: its closed Change List part, the part's time
  // span, and the blobs of the ZIP and of the copy of its manifest.
  struct ChangePackage {
    size_t part = 0;
    rs::Timestamp from;
    rs::Timestamp until;
    File zip;
    File manifest;
  };
  // One node at a time builds a set's Resource Dump: claim() takes the
  // set's lock (false: another node holds it), release() gives it back; a
  // node that dies loses it with its connection.
  virtual Result<bool> claim(const std::string& set) = 0;
  virtual Result<void> release(const std::string& set) = 0;
  // Names Change Dump package `p.part` of the set; one named already keeps
  // the blobs it has (another node built it first).
  virtual Result<void> put_change_package(const std::string& set, const ChangePackage& p) = 0;
  // The set's Change Dump packages named so far, by part.
  virtual Result<std::vector<ChangePackage>> change_packages(const std::string& set) = 0;
  // Change Dump packages of the set's parts up to `part` are gone (change
  // log retention compacted them).
  virtual Result<void> drop_change_packages(const std::string& set, size_t up_to_part) = 0;
  // The file served under `url_path`, if one is named.
  virtual Result<std::optional<File>> file(const std::string& url_path) = 0;
};

} // namespace tributary::store

#pragma once

#include "common/result.h"
#include "resourcesync/hash.h"
#include "store/blob/blob_store.h"

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// The one ZIP writer for dump packages (spec sections 11 and 13): our
// Resource and Change Dumps, and `tributary simulate`'s.
namespace tributary::pub {

// A bitstream of a package: bytes in memory, or else a region of the blob
// store (read when the package is written).
struct PackageFile {
  std::string name; // in the ZIP, e.g. "res/1"
  std::optional<std::string_view> bytes;
  store::BlobLocation blob;
};

// Writes a package, manifest.xml first (deflated by libdeflate, level 1) then the bitstreams
// (stored as they are: most repository content is compressed already), to
// `dest` through a temporary name in the same folder, so a reader never
// sees half a package; up to 16 MiB it is put together in memory and
// written at once. Returns the package's sha-256.
Result<rs::HashValue> write_package(const std::filesystem::path& dest, const std::string& manifest_xml,
                                    const std::vector<PackageFile>& files);

// The sha-256 of a package already written (as write_package returns it).
rs::HashValue package_digest(const std::filesystem::path& file);

// The same package, in memory.
Result<std::string> package_bytes(const std::string& manifest_xml, const std::vector<PackageFile>& files);

} // namespace tributary::pub

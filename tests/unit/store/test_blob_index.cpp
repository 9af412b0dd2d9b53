// The blob index's filter of names (store/blob/name_filter.h and
// BlobIndex::may_contain): never "absent" for a name the index holds, and
// rarely "maybe" for one it does not.
#include "store/blob/blob_index.h"
#include "store/blob/blob_io.h"
#include "store/blob/name_filter.h"
#include "store/blob/blob_store.h"

#include "resourcesync/hash.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

using namespace tributary;
using namespace tributary::store;
using store::blob_detail::BlobIndex;
using store::blob_detail::IndexValue;
using store::blob_detail::NameFilter;
namespace fs = std::filesystem;

namespace {

// The sha-256 of "<prefix><i>", as the store names blobs.
std::string name_of(const std::string& prefix, int i) {
  return rs::hash_hex(rs::HashAlgorithm::sha256, prefix + std::to_string(i));
}

struct IndexDir {
  fs::path path = fs::temp_directory_path() / ("tributary-blob-index-" + std::to_string(::getpid()));
  IndexDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~IndexDir() { fs::remove_all(path); }
};

std::vector<std::pair<std::string, IndexValue>> entries(const std::string& prefix, int from, int to) {
  std::vector<std::pair<std::string, IndexValue>> out;
  for (int i = from; i < to; ++i) {
    out.emplace_back(name_of(prefix, i), IndexValue{1, 0, static_cast<uint64_t>(i) * 100, 100});
  }
  return out;
}

} // namespace

TEST_CASE("NameFilter: every name inserted may be there, and about 1% of the others") {
  NameFilter filter(20000);
  for (int i = 0; i < 20000; ++i) {
    filter.insert(blob_detail::raw_name(name_of("in-", i)));
  }
  int missed = 0;
  for (int i = 0; i < 20000; ++i) {
    missed += filter.may_contain(blob_detail::raw_name(name_of("in-", i))) ? 0 : 1;
  }
  CHECK(missed == 0);
  int maybe = 0;
  for (int i = 0; i < 20000; ++i) {
    maybe += filter.may_contain(blob_detail::raw_name(name_of("out-", i))) ? 1 : 0;
  }
  CHECK(maybe < 20000 * 2 / 100); // 10 bits and 6 probes a name: 0.8% expected
  CHECK(filter.inserted() == 20000);
  CHECK(filter.bytes() == (20000 * 10 + 63) / 64 * 8);
}

TEST_CASE("BlobIndex: the filter is built from what the index holds, and kept up by every name added after") {
  IndexDir dir;
  {
    auto index = BlobIndex::open(dir.path);
    REQUIRE(index);
    REQUIRE((*index)->add(entries("before-", 0, 3000)));
  }
  auto index = BlobIndex::open(dir.path); // a new process's index: its filter read from the file
  REQUIRE(index);
  BlobIndex& ix = **index;
  int missed = 0;
  for (int i = 0; i < 3000; ++i) {
    missed += ix.may_contain(name_of("before-", i)) ? 0 : 1;
  }
  CHECK(missed == 0);
  // Added once the filter exists: in it at once.
  REQUIRE(ix.add(entries("after-", 0, 3000)));
  for (int i = 0; i < 3000; ++i) {
    missed += ix.may_contain(name_of("after-", i)) ? 0 : 1;
  }
  CHECK(missed == 0);
  int maybe = 0;
  for (int i = 0; i < 3000; ++i) {
    maybe += ix.may_contain(name_of("never-", i)) ? 1 : 0;
  }
  CHECK(maybe < 3000 / 20);
  // A name the filter lets through is still looked up: "maybe" is not "stored".
  auto none = ix.lookup(name_of("never-", 0));
  REQUIRE(none);
  CHECK(!none->has_value());
}

TEST_CASE("BlobStore: locate_many answers as locate() does for each name, in the order asked") {
  IndexDir dir;
  auto opened = BlobStore::open(dir.path / "store");
  REQUIRE(opened);
  BlobStore& store = **opened;
  std::vector<std::string> names;
  for (int i = 0; i < 300; ++i) {
    auto put = store.put("blob " + std::to_string(i));
    REQUIRE(put);
    names.push_back(put->sha256);
  }
  auto big = store.put(std::string(BlobStore::k_pack_max + 1, 'x')); // a file of its own
  REQUIRE(big);
  names.insert(names.begin() + 7, big->sha256);
  names.insert(names.begin() + 3, name_of("never-", 1)); // not stored
  names.insert(names.begin() + 5, "not a name");
  names.push_back(names[10]); // asked twice
  const auto many = store.locate_many(names);
  REQUIRE(many.size() == names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    CAPTURE(i);
    const auto one = store.locate(names[i]);
    REQUIRE(many[i].has_value() == one.has_value());
    if (one) {
      CHECK(many[i]->file == one->file);
      CHECK(many[i]->offset == one->offset);
      CHECK(many[i]->length == one->length);
    } else {
      CHECK(many[i].error().kind == one.error().kind);
    }
  }
  CHECK(many[3].error().kind == ErrorKind::not_found);
  CHECK(many[5].error().kind == ErrorKind::usage);
  CHECK(many[9]->length == BlobStore::k_pack_max + 1);
}

#include "sync_engine/store/blob_store.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace tributary;
using namespace tributary::sync;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("tributary-blobs-" + std::to_string(::getpid()));
  TempDir() { fs::remove_all(path); }
  ~TempDir() { fs::remove_all(path); }
};

size_t files_under(const fs::path& p) {
  size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(p)) {
    n += e.is_regular_file() ? 1 : 0;
  }
  return n;
}

} // namespace

TEST_CASE("BlobStore: content-addressed, deduplicated, with the digests asked for") {
  TempDir dir;
  auto store = BlobStore::open(dir.path);
  REQUIRE(store);
  auto a = (*store)->put("abc", {rs::HashAlgorithm::md5});
  REQUIRE(a);
  CHECK(a->sha256 == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(a->length == 3);
  REQUIRE(a->hashes.size() == 2);
  CHECK(a->hashes[1] == rs::HashValue{"md5", "900150983cd24fb0d6963f7d28e17f72"});
  CHECK(fs::exists(dir.path / "blobs" / "ba" / a->sha256));
  CHECK((*store)->contains(a->sha256));
  CHECK(*(*store)->read(a->sha256) == "abc");

  auto again = (*store)->put("abc");
  REQUIRE(again);
  CHECK(again->sha256 == a->sha256);
  CHECK(files_under(dir.path / "blobs") == 1);
  CHECK(files_under(dir.path / "tmp") == 0);
  CHECK((*store)->sync_directories());
}

TEST_CASE("BlobStore: an abandoned writer leaves no file, and names outside the store are refused") {
  TempDir dir;
  auto store = BlobStore::open(dir.path);
  REQUIRE(store);
  {
    auto w = (*store)->begin();
    REQUIRE(w);
    REQUIRE(w->write("partial", 7));
  }
  CHECK(files_under(dir.path / "tmp") == 0);
  CHECK(files_under(dir.path / "blobs") == 0);
  for (const char* bad : {"../../etc/passwd", "", "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD"}) {
    CAPTURE(bad);
    CHECK_FALSE((*store)->path_for(bad));
    CHECK_FALSE((*store)->contains(bad));
  }
  auto missing = (*store)->read(std::string(64, 'a'));
  REQUIRE_FALSE(missing);
  CHECK(missing.error().kind == ErrorKind::not_found);
}

TEST_CASE("BlobStore: leftovers of a crashed run are cleared on open") {
  TempDir dir;
  fs::create_directories(dir.path / "tmp");
  std::ofstream(dir.path / "tmp" / "blob-1-1.part") << "half";
  auto store = BlobStore::open(dir.path);
  REQUIRE(store);
  CHECK(files_under(dir.path / "tmp") == 0);
}

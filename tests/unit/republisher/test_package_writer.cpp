// The dump package writer: bitstreams from regions of pack files (as the
// blob store keeps them), from memory and empty, each byte for byte in the
// ZIP, read back by libzip and by Python's zipfile (a reader we did not
// write); a region the pack file does not hold whole fails the package.
#include "republisher/package_writer.h"

#include "resourcesync/hash.h"
#include "../../common/files.h"
#include "../../common/scratch_dir.h"

#include <doctest/doctest.h>

#include <zip.h>

#include <sys/resource.h>

#include <cstdio>
#include <fstream>
#include <map>

using namespace tributary;
using namespace tributary::pub;

namespace {

// Every entry of the ZIP at `path`, in the order the central directory has them.
std::vector<std::pair<std::string, std::string>> entries_of(const std::filesystem::path& path) {
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &err);
  REQUIRE(z);
  std::vector<std::pair<std::string, std::string>> out;
  for (zip_int64_t i = 0; i < zip_get_num_entries(z, 0); ++i) {
    zip_stat_t st;
    REQUIRE(zip_stat_index(z, static_cast<zip_uint64_t>(i), 0, &st) == 0);
    std::string bytes(static_cast<size_t>(st.size), '\0');
    zip_file_t* f = zip_fopen_index(z, static_cast<zip_uint64_t>(i), 0);
    REQUIRE(f);
    REQUIRE(zip_fread(f, bytes.data(), st.size) == static_cast<zip_int64_t>(st.size));
    zip_fclose(f);
    out.emplace_back(st.name, std::move(bytes));
  }
  zip_close(z);
  return out;
}

// What Python's zipfile makes of it: "name size crc-ok" a line, or the error.
std::string python_reads(const std::filesystem::path& path) {
  const std::string cmd = test::python3() + " -c \"import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); "
                          "bad = z.testzip(); [print(i.filename, i.file_size) for i in z.infolist()]; "
                          "print('bad', bad)\" " +
                          path.string() + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) {
    out.append(buf, n);
  }
  ::pclose(p);
  return out;
}

} // namespace

TEST_CASE("Package writer: bitstreams from regions of two pack files, from memory and empty are in the ZIP byte for "
          "byte, after the manifest, and libzip and Python's zipfile read them back") {
  test::ScratchDir dir("package-writer");
  // Two pack files, as the blob store appends blobs to them.
  const std::string pack_a = std::string("AAAA") + std::string(300, 'a') + "BBBBBBBB" + std::string(70000, 'b');
  const std::string pack_b = std::string(5, 'x') + "the second pack's blob" + std::string(17, 'y');
  std::ofstream(dir / "a.pack", std::ios::binary) << pack_a;
  std::ofstream(dir / "b.pack", std::ios::binary) << pack_b;
  const std::string in_memory = "held in memory";
  std::vector<PackageFile> files;
  files.push_back({"res/1", std::nullopt, {dir / "a.pack", 4, 300}});
  files.push_back({"res/2", std::nullopt, {dir / "b.pack", 5, 22}});
  files.push_back({"res/3", std::nullopt, {dir / "a.pack", 304, 8 + 70000}}); // more than one read's buffer
  files.push_back({"res/4", std::string_view(in_memory), {}});
  files.push_back({"res/5", std::nullopt, {dir / "a.pack", 0, 0}}); // an empty blob
  files.push_back({"res/6", std::nullopt, {dir / "a.pack", 0, 4}}); // the first pack again
  // A manifest of some size: deflated before libzip sees it, which copies
  // the stream with the CRC and sizes given (zip_close neither compresses
  // it again nor checks it).
  std::string manifest = "<urlset>";
  for (int i = 0; i < 2000; ++i) {
    manifest += "<url><loc>http://example.org/r/" + std::to_string(i * 7919) + "</loc></url>\n";
  }
  manifest += "</urlset>";
  const std::map<std::string, std::string> expected = {
      {"manifest.xml", manifest},          {"res/1", std::string(300, 'a')},
      {"res/2", "the second pack's blob"}, {"res/3", "BBBBBBBB" + std::string(70000, 'b')},
      {"res/4", in_memory},                {"res/5", ""},
      {"res/6", "AAAA"}};

  auto digest = write_package(dir / "p.zip", manifest, files);
  REQUIRE(digest);
  CHECK_FALSE(std::filesystem::exists(dir / "p.zip.tmp")); // renamed, not left beside it
  CHECK(digest->hex == rs::hash_hex(rs::HashAlgorithm::sha256, test::slurp(dir / "p.zip")));
  auto read = entries_of(dir / "p.zip");
  REQUIRE(read.size() == expected.size());
  CHECK(read.front().first == "manifest.xml");
  {
    int err = 0;
    zip_t* z = zip_open((dir / "p.zip").c_str(), ZIP_RDONLY, &err);
    REQUIRE(z);
    zip_stat_t st;
    REQUIRE(zip_stat(z, "manifest.xml", 0, &st) == 0);
    CHECK(st.comp_method == ZIP_CM_DEFLATE);
    CHECK(st.size == manifest.size());
    CHECK(st.comp_size < manifest.size() / 4);
    zip_close(z);
  }
  for (const auto& [name, bytes] : read) {
    INFO(name);
    REQUIRE(expected.count(name) == 1);
    CHECK(bytes == expected.at(name));
  }
  const std::string python = python_reads(dir / "p.zip");
  INFO(python);
  CHECK(python.find("manifest.xml " + std::to_string(manifest.size()) + "\n") != std::string::npos);
  CHECK(python.find("res/3 70008\n") != std::string::npos);
  CHECK(python.find("res/5 0\n") != std::string::npos);
  CHECK(python.find("bad None\n") != std::string::npos); // every CRC holds

  // The same package in memory.
  auto bytes = package_bytes(manifest, files);
  REQUIRE(bytes);
  std::ofstream(dir / "m.zip", std::ios::binary) << *bytes;
  auto again = entries_of(dir / "m.zip");
  REQUIRE(again.size() == expected.size());
  for (const auto& [name, b] : again) {
    CHECK(b == expected.at(name));
  }
}

TEST_CASE("Package writer: a region its pack file does not hold whole, or a pack file that is gone, fails the "
          "package and leaves no file") {
  test::ScratchDir dir("package-writer-short");
  std::ofstream(dir / "a.pack", std::ios::binary) << std::string(100, 'a');
  SUBCASE("cut short") {
    const std::vector<PackageFile> files = {{"res/1", std::nullopt, {dir / "a.pack", 0, 10}},
                                            {"res/2", std::nullopt, {dir / "a.pack", 90, 20}}};
    CHECK_FALSE(write_package(dir / "p.zip", "<urlset/>", files));
    CHECK_FALSE(package_bytes("<urlset/>", files));
  }
  SUBCASE("gone") {
    const std::vector<PackageFile> files = {{"res/1", std::nullopt, {dir / "gone.pack", 0, 10}}};
    CHECK_FALSE(write_package(dir / "p.zip", "<urlset/>", files));
  }
  CHECK_FALSE(std::filesystem::exists(dir / "p.zip"));
  CHECK_FALSE(std::filesystem::exists(dir / "p.zip.tmp"));
}

TEST_CASE("Package writer: a package past the size put together in memory (16 MiB) is written through its file, "
          "byte for byte the same way, and fails the same way when a region is cut short") {
  test::ScratchDir dir("package-writer-big");
  const size_t big = (16u << 20) + 4096;
  std::string pack(big + 10, 'z');
  pack[10] = 'S';
  pack[big + 9] = 'E';
  std::ofstream(dir / "a.pack", std::ios::binary) << pack;
  std::ofstream(dir / "b.pack", std::ios::binary) << "small";
  const std::vector<PackageFile> files = {{"res/1", std::nullopt, {dir / "a.pack", 10, big}},
                                          {"res/2", std::nullopt, {dir / "b.pack", 0, 5}}};
  auto digest = write_package(dir / "p.zip", "<urlset/>", files);
  REQUIRE(digest);
  CHECK_FALSE(std::filesystem::exists(dir / "p.zip.tmp")); // renamed, not left beside it
  CHECK(digest->hex == rs::hash_hex(rs::HashAlgorithm::sha256, test::slurp(dir / "p.zip")));
  auto read = entries_of(dir / "p.zip");
  REQUIRE(read.size() == 3);
  CHECK(read[0].first == "manifest.xml");
  CHECK(read[1].second == pack.substr(10, big));
  CHECK(read[2].second == "small");
  const std::string python = python_reads(dir / "p.zip");
  INFO(python);
  CHECK(python.find("bad None\n") != std::string::npos);

  const std::vector<PackageFile> cut = {{"res/1", std::nullopt, {dir / "a.pack", 20, big}}};
  CHECK_FALSE(write_package(dir / "q.zip", "<urlset/>", cut));
  CHECK_FALSE(std::filesystem::exists(dir / "q.zip"));
  CHECK_FALSE(std::filesystem::exists(dir / "q.zip.tmp"));
}

TEST_CASE("Package writer: bitstreams in more pack files than the process may hold open at once are all read") {
  // A Resource Dump package lists resources by URI; their blobs may lie in
  // as many packs as it has bitstreams. The descriptors limit is lowered
  // to 100 above those open now: 200 packs must still make one package.
  test::ScratchDir dir("package-writer-many");
  std::vector<PackageFile> files;
  for (int i = 0; i < 200; ++i) {
    const auto pack = dir / ("p" + std::to_string(i) + ".pack");
    std::ofstream(pack, std::ios::binary) << "pack " << i;
    files.push_back({"res/" + std::to_string(i + 1), std::nullopt, {pack, 5, std::to_string(i).size()}});
  }
  size_t open_now = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    ++open_now;
  }
  struct rlimit saved {};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
  struct rlimit lowered = saved;
  lowered.rlim_cur = std::min<rlim_t>(saved.rlim_cur, open_now + 100);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &lowered) == 0);
  auto digest = write_package(dir / "p.zip", "<urlset/>", files);
  ::setrlimit(RLIMIT_NOFILE, &saved);
  REQUIRE(digest);
  auto read = entries_of(dir / "p.zip");
  REQUIRE(read.size() == 201);
  for (int i = 0; i < 200; ++i) {
    CHECK(read[static_cast<size_t>(i) + 1].second == std::to_string(i));
  }
}

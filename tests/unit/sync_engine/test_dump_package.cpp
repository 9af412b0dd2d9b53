// Dump packages built with libzip, good and hostile: each hostile one is
// refused with its reason before anything reaches the blob store.
#include "sync_engine/dump_package.h"

#include "resourcesync/hash.h"
#include "resourcesync/writer.h"

#include <doctest/doctest.h>

#include <zip.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

using namespace tributary;
using namespace tributary::sync;

namespace {

struct ZipEntry {
  std::string name;
  std::string bytes;
  mode_t mode = S_IFREG | 0644;
  bool compress = true;
};

void write_zip(const std::filesystem::path& path, const std::vector<ZipEntry>& entries) {
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  REQUIRE(z);
  for (const auto& e : entries) {
    auto* copy = new std::string(e.bytes); // freed after zip_close
    zip_source_t* src = zip_source_buffer(z, copy->data(), copy->size(), 0);
    REQUIRE(src);
    const zip_int64_t i = zip_file_add(z, e.name.c_str(), src, ZIP_FL_ENC_UTF_8);
    REQUIRE(i >= 0);
    zip_set_file_compression(z, static_cast<zip_uint64_t>(i), e.compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0);
    zip_file_set_external_attributes(z, static_cast<zip_uint64_t>(i), 0, ZIP_OPSYS_UNIX,
                                     static_cast<zip_uint32_t>(e.mode) << 16);
    static std::vector<std::unique_ptr<std::string>> keep;
    keep.emplace_back(copy);
  }
  REQUIRE(zip_close(z) == 0);
}

rs::Entry manifest_entry(const std::string& uri, const std::string& path, const std::string& bytes) {
  rs::Entry e;
  e.loc = uri;
  e.md = rs::Metadata{};
  e.md->path = path;
  e.md->length = bytes.size();
  e.md->hash = {rs::HashValue{"md5", rs::hash_hex(rs::HashAlgorithm::md5, bytes)}};
  e.md->type = "text/plain";
  return e;
}

std::string manifest(const std::vector<rs::Entry>& entries, const char* capability = "resourcedump-manifest",
                     bool with_at = true) {
  rs::Document d;
  d.header.md = rs::Metadata{};
  d.header.md->capability = capability;
  if (with_at) {
    d.header.md->at = *rs::parse_w3c_datetime("2026-05-01T00:00:00Z");
  }
  d.entries = entries;
  return rs::write_document(d);
}

struct Dir {
  std::filesystem::path path;
  Dir() {
    path = std::filesystem::temp_directory_path() / ("tributary-dump-" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~Dir() { std::filesystem::remove_all(path); }
};

Result<std::unique_ptr<DumpPackage>> open_zip(const std::filesystem::path& p, const PackageLimits& limits = {}) {
  return DumpPackage::open(p, "http://e.org/dump/part1.zip", rs::Capability::resourcedump_manifest, limits);
}

std::string refusal(const std::filesystem::path& p, const PackageLimits& limits = {}) {
  auto r = open_zip(p, limits);
  REQUIRE_FALSE(r);
  CHECK(r.error().kind == ErrorKind::invalid_document);
  CHECK(r.error().message.rfind("http://e.org/dump/part1.zip: package refused, nothing applied from it: ", 0) == 0);
  return r.error().message;
}

} // namespace

TEST_CASE("Dump package: a good package opens and every bitstream lands in the blob store, verified") {
  Dir d;
  const auto zip = d.path / "good.zip";
  write_zip(zip, {{"manifest.xml", manifest({manifest_entry("http://e.org/a", "/res/a.txt", "alpha"),
                                             manifest_entry("http://e.org/b", "/res/b.txt", "bravo")})},
                  {"res/a.txt", "alpha"},
                  {"res/b.txt", "bravo", S_IFREG | 0644, false},
                  {"res/", "", S_IFDIR | 0755}});
  auto pkg = open_zip(zip);
  REQUIRE(pkg);
  CHECK((*pkg)->warnings().empty());
  REQUIRE((*pkg)->size() == 2);
  auto m = (*pkg)->manifest();
  REQUIRE(m);
  REQUIRE(m->entries.size() == 2);
  auto blobs = store::BlobStore::open(d.path / "store");
  REQUIRE(blobs);
  for (size_t i = 0; i < 2; ++i) {
    auto c = (*pkg)->extract(m->entries[i], i, **blobs);
    REQUIRE(c);
    CHECK(c->blob.sha256 == rs::hash_hex(rs::HashAlgorithm::sha256, i == 0 ? "alpha" : "bravo"));
    std::vector<store::BlobStore::Writer*> w{&*c->sealed};
    REQUIRE((*blobs)->publish(w)[0]);
    CHECK(*(*blobs)->read(c->blob.sha256) == (i == 0 ? "alpha" : "bravo"));
  }
}

TEST_CASE("Dump package: the manifest is read again in slices, in order, each with the index of its first entry") {
  Dir d;
  std::vector<rs::Entry> entries;
  std::vector<ZipEntry> files;
  for (int i = 0; i < 7; ++i) {
    const std::string name = "res/" + std::to_string(i) + ".txt";
    entries.push_back(manifest_entry("http://e.org/" + std::to_string(i), "/" + name, "bytes " + std::to_string(i)));
    files.push_back({name, "bytes " + std::to_string(i)});
  }
  files.insert(files.begin(), ZipEntry{"manifest.xml", manifest(entries)});
  const auto zip = d.path / "seven.zip";
  write_zip(zip, files);
  auto pkg = open_zip(zip);
  REQUIRE(pkg);
  CHECK((*pkg)->size() == 7);
  auto blobs = store::BlobStore::open(d.path / "store");
  REQUIRE(blobs);
  std::vector<std::pair<size_t, size_t>> slices; // (first, size)
  auto r = (*pkg)->read_manifest(3, [&](std::vector<rs::Entry>& got, size_t first) -> Result<void> {
    slices.emplace_back(first, got.size());
    for (size_t k = 0; k < got.size(); ++k) {
      CHECK(got[k].loc == "http://e.org/" + std::to_string(first + k));
      auto c = (*pkg)->extract(got[k], first + k, **blobs); // the index finds its own bitstream
      REQUIRE(c);
      CHECK(c->blob.sha256 == rs::hash_hex(rs::HashAlgorithm::sha256, "bytes " + std::to_string(first + k)));
    }
    return {};
  });
  REQUIRE(r);
  CHECK(slices == std::vector<std::pair<size_t, size_t>>{{0, 3}, {3, 3}, {6, 1}});
  // An error from a slice stops the reading and is returned.
  slices.clear();
  r = (*pkg)->read_manifest(3, [&](std::vector<rs::Entry>& got, size_t first) -> Result<void> {
    slices.emplace_back(first, got.size());
    return make_error(ErrorKind::io, "stop here");
  });
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "stop here");
  CHECK(slices.size() == 1);
}

TEST_CASE("Dump package: unambiguous deviations are accepted with a warning") {
  Dir d;
  const auto zip = d.path / "lax.zip";
  write_zip(zip, {{"manifest.xml", manifest({manifest_entry("http://e.org/a", "res/a.txt", "alpha")},
                                            "resourcedump-manifest", false)},
                  {"res/a.txt", "alpha"}});
  auto pkg = open_zip(zip);
  INFO((pkg ? std::string() : pkg.error().message));
  REQUIRE(pkg);
  REQUIRE((*pkg)->warnings().size() == 2);
  const std::string both = (*pkg)->warnings()[0] + "\n" + (*pkg)->warnings()[1];
  CHECK(both.find("no 'at'") != std::string::npos);
  CHECK(both.find("without the leading '/'") != std::string::npos);
}

TEST_CASE("Dump package: hostile packages are refused, each with its reason") {
  Dir d;
  const std::string good_manifest = manifest({manifest_entry("http://e.org/a", "/a.txt", "alpha")});
  struct Case {
    const char* what;
    std::vector<ZipEntry> entries;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {"no manifest", {{"a.txt", "alpha"}}, "no manifest.xml at the top level"},
      {"manifest in a folder", {{"x/manifest.xml", good_manifest}, {"a.txt", "alpha"}},
       "no manifest.xml at the top level"},
      {"malformed manifest", {{"manifest.xml", "<urlset><url>"}, {"a.txt", "alpha"}},
       "manifest.xml is not a valid document"},
      {"wrong capability",
       {{"manifest.xml", manifest({manifest_entry("http://e.org/a", "/a.txt", "alpha")}, "resourcelist")},
        {"a.txt", "alpha"}},
       "manifest.xml is not a resourcedump-manifest"},
      {"dot-dot", {{"manifest.xml", good_manifest}, {"a.txt", "alpha"}, {"../../etc/x", "evil"}},
       "unsafe entry name '../../etc/x'"},
      {"absolute", {{"manifest.xml", good_manifest}, {"a.txt", "alpha"}, {"/etc/x", "evil"}},
       "unsafe entry name '/etc/x'"},
      {"symlink", {{"manifest.xml", good_manifest}, {"a.txt", "/etc/passwd", S_IFLNK | 0777}},
       "entry 'a.txt' is a symbolic link"},
      {"not in manifest", {{"manifest.xml", good_manifest}, {"a.txt", "alpha"}, {"extra.txt", "x"}},
       "ZIP entry 'extra.txt' is not listed in the manifest"},
      {"missing from zip", {{"manifest.xml", good_manifest}}, "manifest path '/a.txt' is not in the ZIP"},
      {"unsafe manifest path",
       {{"manifest.xml", manifest({manifest_entry("http://e.org/a", "/../a.txt", "alpha")})}, {"a.txt", "alpha"}},
       "'/../a.txt'"}, // unsafe: refused whether the reader or the package check says so
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    const auto zip = d.path / "hostile.zip";
    write_zip(zip, c.entries);
    const std::string why = refusal(zip);
    CHECK_MESSAGE(why.find(c.reason) != std::string::npos, why);
  }
}

TEST_CASE("Dump package: a zip bomb, a truncated package and a wrong bitstream are refused") {
  Dir d;
  // 64 MiB of zeros deflate about 1000-fold.
  const std::string zeros(64u << 20, '\0');
  const auto bomb = d.path / "bomb.zip";
  write_zip(bomb, {{"manifest.xml", manifest({manifest_entry("http://e.org/z", "/z.bin", zeros)})},
                   {"z.bin", zeros}});
  CHECK(refusal(bomb).find("expands") != std::string::npos);
  PackageLimits small;
  small.max_uncompressed = 1000;
  const auto big = d.path / "big.zip";
  const std::string noise = rs::hash_hex(rs::HashAlgorithm::sha256, "x") + std::string(2000, 'y');
  write_zip(big, {{"manifest.xml", manifest({manifest_entry("http://e.org/n", "/n.bin", noise)})},
                  {"n.bin", noise, S_IFREG | 0644, false}});
  CHECK(refusal(big, small).find("bytes uncompressed") != std::string::npos);

  const auto good = d.path / "good.zip";
  write_zip(good, {{"manifest.xml", manifest({manifest_entry("http://e.org/a", "/a.txt", "alpha")})},
                   {"a.txt", "alpha"}});
  const auto truncated = d.path / "truncated.zip";
  std::filesystem::copy_file(good, truncated);
  std::filesystem::resize_file(truncated, std::filesystem::file_size(good) / 2);
  CHECK(refusal(truncated).find("not a readable ZIP file") != std::string::npos);

  auto blobs = store::BlobStore::open(d.path / "store");
  REQUIRE(blobs);
  const auto liar = d.path / "liar.zip";
  write_zip(liar, {{"manifest.xml", manifest({manifest_entry("http://e.org/a", "/a.txt", "alpha")})},
                   {"a.txt", "alphA"}});
  auto pkg = open_zip(liar);
  REQUIRE(pkg);
  auto c = (*pkg)->extract((*pkg)->manifest()->entries[0], 0, **blobs);
  REQUIRE_FALSE(c);
  CHECK(c.error().message.find("hash mismatch against the manifest") != std::string::npos);
  const auto longer = d.path / "longer.zip";
  write_zip(longer, {{"manifest.xml", manifest({manifest_entry("http://e.org/a", "/a.txt", "alpha")})},
                     {"a.txt", "alpha and more"}});
  pkg = open_zip(longer);
  REQUIRE(pkg);
  c = (*pkg)->extract((*pkg)->manifest()->entries[0], 0, **blobs);
  REQUIRE_FALSE(c);
  CHECK(c.error().message.find("more bytes than announced") != std::string::npos);
}

TEST_CASE("Dump package: entries as Python's zipfile.writestr() writes them (0600 and no file type) are plain files") {
  // zipfile.writestr() with a name sets external_attr = 0o600 << 16 and
  // create_system 3 (Unix): permission bits, no S_IFREG. py-resync's dumps
  // are written so; every one of them was refused before.
  Dir d;
  const auto zip = d.path / "python.zip";
  write_zip(zip, {{"manifest.xml", manifest({manifest_entry("http://e.org/a", "/res/a.txt", "alpha")}), 0600},
                  {"res/a.txt", "alpha", 0600}});
  auto pkg = open_zip(zip);
  INFO((pkg ? std::string() : pkg.error().message));
  REQUIRE(pkg);
  REQUIRE((*pkg)->warnings().size() == 1);
  CHECK((*pkg)->warnings()[0].find("2 ZIP entries with Unix permissions but no file type") != std::string::npos);
  auto blobs = *store::BlobStore::open(d.path / "blobs");
  auto got = (*pkg)->extract((*pkg)->manifest()->entries[0], 0, *blobs);
  REQUIRE(got);
  CHECK(got->blob.length == 5);
}

TEST_CASE("Dump package: batch after batch is extracted on the handles the first batch opened, a failed one included") {
  // Each batch of a baseline extracts on several threads, each through a
  // handle of its own on the ZIP: opening one reads the whole central
  // directory again, so the handles are kept for the next batch.
  Dir d;
  const auto zip = d.path / "many.zip";
  std::vector<rs::Entry> entries;
  std::vector<ZipEntry> files;
  for (int i = 0; i < 900; ++i) {
    const std::string bytes = "bitstream " + std::to_string(i);
    entries.push_back(manifest_entry("http://e.org/r" + std::to_string(i), "/res/" + std::to_string(i), bytes));
    files.push_back({"res/" + std::to_string(i), bytes});
  }
  entries[700].md->length = 3; // a bitstream that does not verify, in the third batch
  files.insert(files.begin(), {"manifest.xml", manifest(entries)});
  write_zip(zip, files);
  auto pkg = open_zip(zip);
  REQUIRE(pkg);
  auto m = (*pkg)->manifest();
  REQUIRE(m);
  auto blobs = store::BlobStore::open(d.path / "store");
  REQUIRE(blobs);
  auto batch = [&](size_t first, size_t count) {
    std::vector<const rs::Entry*> wanted;
    std::vector<size_t> indices;
    for (size_t i = first; i < first + count; ++i) {
      wanted.push_back(&m->entries[i]);
      indices.push_back(i);
    }
    return (*pkg)->extract_many(wanted, indices, **blobs, 4);
  };
  CHECK((*pkg)->spare_handles() == 0);
  for (size_t first : {0, 300}) {
    auto results = batch(first, 300);
    REQUIRE(results.size() == 300);
    for (size_t k = 0; k < results.size(); ++k) {
      REQUIRE(results[k]);
      CHECK(results[k]->blob.sha256 ==
            rs::hash_hex(rs::HashAlgorithm::sha256, "bitstream " + std::to_string(first + k)));
    }
    CHECK((*pkg)->spare_handles() == 3); // four threads: three handles besides the package's own
  }
  auto failed = batch(600, 300);
  CHECK_FALSE(failed[100]);
  CHECK((*pkg)->spare_handles() == 3);
  auto again = batch(300, 300);
  for (const auto& r : again) {
    CHECK(r);
  }
  CHECK((*pkg)->spare_handles() == 3);
}

// Reads every document in ../shared/reference (the specification's examples
// and 183 files from other implementations) and pins, per file, what we make
// of it: capability, entry count, valid or invalid and why. The table is
// tests/data/reference_expectations.tsv; where our verdict differs from the
// 2013 XSD check recorded in corpus/MANIFEST.tsv the table says why.
#include "../../common/files.h"
#include "resourcesync/reader.h"
#include "resourcesync/writer.h"

#include "test_support.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

using namespace tributary;
using namespace tributary::rs;
using tributary::test::slurp;
namespace fs = std::filesystem;

namespace {

struct Expectation {
  std::string capability;
  uint64_t entries = 0;
  bool valid = false;
  std::string reason;
  std::string note;
};

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string field;
  while (std::getline(ss, field, '\t')) {
    out.push_back(field);
  }
  if (!line.empty() && line.back() == '\t') {
    out.emplace_back();
  }
  return out;
}

std::map<std::string, Expectation> load_expectations() {
  std::ifstream in(std::string(TRIBUTARY_TEST_DATA_DIR) + "/reference_expectations.tsv");
  REQUIRE(in);
  std::map<std::string, Expectation> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') {
      continue;
    }
    auto f = split_tabs(line);
    REQUIRE(f.size() >= 4);
    f.resize(6);
    out[f[0]] = Expectation{f[1], std::stoull(f[2]), f[3] == "valid", f[4], f[5]};
  }
  return out;
}

// corpus/MANIFEST.tsv: path -> "valid" / "INVALID: ..." (the 2013 XSD check).
std::map<std::string, std::string> load_manifest(const fs::path& ref) {
  std::ifstream in(ref / "corpus" / "MANIFEST.tsv");
  REQUIRE(in);
  std::map<std::string, std::string> out;
  std::string line;
  std::getline(in, line); // header
  while (std::getline(in, line)) {
    auto f = split_tabs(line);
    if (f.size() >= 6) {
      out["corpus/" + f[0]] = f[5];
    }
  }
  return out;
}

std::vector<std::string> reference_documents(const fs::path& ref) {
  std::vector<std::string> out;
  for (const char* dir : {"spec-examples", "corpus"}) {
    for (const auto& e : fs::recursive_directory_iterator(ref / dir)) {
      if (!e.is_regular_file()) {
        continue;
      }
      auto name = e.path().filename().string();
      if (e.path().extension() == ".xml" || name == "resourcesync") {
        out.push_back(fs::relative(e.path(), ref).string());
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace

TEST_CASE("Reference documents: every spec example and corpus file reads as pinned") {
  const fs::path ref(TRIBUTARY_REFERENCE_DIR);
  REQUIRE_MESSAGE(fs::exists(ref / "corpus"), "reference corpus not found at " << ref);
  auto expected = load_expectations();
  auto manifest = load_manifest(ref);
  auto docs = reference_documents(ref);
  CHECK(docs.size() == expected.size());
  CHECK(docs.size() >= 200); // 32 spec examples (29 XML) + 176 corpus XML files

  size_t valid = 0;
  for (const auto& rel : docs) {
    CAPTURE(rel);
    auto it = expected.find(rel);
    REQUIRE_MESSAGE(it != expected.end(), "no expectation pinned for " << rel);
    const Expectation& x = it->second;
    ReaderOptions o;
    o.base_url = "file://" + fs::absolute(ref / rel).lexically_normal().string(); // relative locs resolve, as inspect reads them
    auto p = parse_document(slurp(ref / rel), o);
    INFO(test::all_diagnostics(p.summary));
    CHECK_FALSE(p.summary.stopped);
    std::string cap = p.document.header.md && p.document.header.md->capability ? *p.document.header.md->capability : "-";
    CHECK(cap == x.capability);
    CHECK(p.summary.entries == x.entries);
    CHECK(p.summary.valid() == x.valid);
    if (!x.valid) {
      CHECK_FALSE(x.reason.empty());
      CHECK(test::has_diagnostic(p.summary, Severity::error, x.reason));
    } else {
      ++valid;
    }
    if (auto m = manifest.find(rel); m != manifest.end()) {
      const bool xsd_valid = m->second == "valid";
      if (xsd_valid != x.valid) {
        CHECK_MESSAGE(!x.note.empty(), "verdict differs from the 2013 XSD without a reason");
      }
    }
  }
  CHECK(valid >= 160);
}

TEST_CASE("Reference documents: read -> write -> read gives an equal model for every valid one") {
  const fs::path ref(TRIBUTARY_REFERENCE_DIR);
  auto expected = load_expectations();
  size_t checked = 0;
  for (const auto& [rel, x] : expected) {
    if (!x.valid) {
      continue;
    }
    CAPTURE(rel);
    ReaderOptions o;
    o.base_url = "file://" + fs::absolute(ref / rel).lexically_normal().string();
    auto first = parse_document(slurp(ref / rel), o);
    REQUIRE(first.summary.valid());
    std::string xml = write_document(first.document);
    auto second = parse_document(xml);
    INFO(xml);
    INFO(test::all_diagnostics(second.summary));
    CHECK(second.summary.valid());
    // A plain sitemap is written as the Resource List it was read as, which
    // then lacks `at` and rel="up" (two warnings for the one it had).
    CHECK(second.summary.warnings <= first.summary.warnings + (first.document.header.plain_sitemap ? 1 : 0));
    // How it was read (a plain sitemap, a date-only lastmod, a change time
    // given by the reader) is not written: our documents state it.
    auto as_written = [](rs::Document d) {
      d.header.plain_sitemap = false;
      for (auto& e : d.entries) {
        e.lastmod_date_only = false;
        e.time_inferred = false;
      }
      return d;
    };
    CHECK(as_written(second.document) == as_written(first.document));
    ++checked;
  }
  CHECK(checked >= 160);
}

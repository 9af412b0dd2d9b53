// Every saved fuzz input runs clean through its target on every build: the
// seed corpus (tests/fuzz/corpus/<target>/) and each input that once found
// a bug (tests/fuzz/regressions/<target>/, named after the bug), so that a
// fixed crash stays fixed without a fuzzing run. A crash here aborts the
// test binary, which fails the suite.
#include "targets.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace fs = std::filesystem;

namespace {

size_t run_all(const std::string& target, const fs::path& dir) {
  auto fn = tributary::fuzz::target(target);
  REQUIRE(static_cast<bool>(fn));
  size_t n = 0;
  if (!fs::exists(dir)) {
    return 0;
  }
  for (const auto& f : fs::directory_iterator(dir)) {
    if (!f.is_regular_file() || f.path().filename().string().front() == '.') {
      continue;
    }
    std::ifstream in(f.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    INFO(f.path().string());
    CHECK(fn(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()) == 0);
    ++n;
  }
  return n;
}

} // namespace

TEST_CASE("Fuzz inputs: every seed and every saved finding runs clean through its target") {
  const fs::path root = fs::path(TRIBUTARY_SOURCE_DIR) / "tests" / "fuzz";
  for (const char* t : {"reader", "xml_scanner", "datetime", "package", "config", "http_request", "websub_request",
                        "notification", "verification_query", "oai_page", "http_response", "iiif", "robots"}) {
    CAPTURE(t);
    CHECK(run_all(t, root / "corpus" / t) > 0);
    run_all(t, root / "regressions" / t);
  }
  CHECK_FALSE(static_cast<bool>(tributary::fuzz::target("nonesuch")));
}

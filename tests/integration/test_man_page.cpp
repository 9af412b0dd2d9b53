// Issue #17: tributary(1), written from the binary's own --help by
// docs/man/make-man.py, says what this build does, and groff renders it
// without a warning.
#include "../common/scratch_dir.h"
#include "../common/files.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

using namespace tributary::test;

TEST_CASE("Man page: docs/man/tributary.1 is what make-man.py writes from this build's --help, names every "
          "command, and groff renders it without a warning") {
  const std::filesystem::path src = TRIBUTARY_SOURCE_DIR;
  const auto page = src / "docs/man/tributary.1";
  ScratchDir dir("man");
  REQUIRE(std::system((python3() + " " + (src / "docs/man/make-man.py").string() + " " + TRIBUTARY_BIN + " > " +
                       (dir / "tributary.1").string())
                          .c_str()) == 0);
  const std::string fresh = slurp(dir / "tributary.1");
  INFO("refresh it: docs/man/make-man.py build/.../tributary > docs/man/tributary.1");
  CHECK(fresh == slurp(page));
  for (const char* command : {"inspect", "explore", "check-config", "migrate", "sync", "check-history", "check-blobs", "gc", "retire",
                              "migrate-blobs", "serve", "run", "simulate"}) {
    std::string roff; // roff writes a hyphen as \-
    for (const char* c = command; *c; ++c) {
      roff += *c == '-' ? std::string("\\-") : std::string(1, *c);
    }
    INFO(roff);
    CHECK(fresh.find(".SS tributary " + roff + " [OPTIONS]") != std::string::npos);
  }
  CHECK(fresh.find("\\fB\\-\\-max\\-documents UINT=1000\\fR") != std::string::npos);
  if (std::system("command -v groff >/dev/null 2>&1") != 0) {
    MESSAGE("groff not installed: deploy/install-deps.sh installs it");
    return;
  }
  REQUIRE(std::system(("groff -man -Tutf8 -ww -z " + page.string() + " 2> " + (dir / "groff.err").string()).c_str()) ==
          0);
  CHECK(slurp(dir / "groff.err").empty());
}

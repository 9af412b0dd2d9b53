#pragma once

// What tests read and run beside the code under test: a file's bytes, and
// the python3 the checkers run with.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace tributary::test {

// The whole file ("" when it cannot be read).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Debian's python3 (where python3-jsonschema and the like are installed),
// else whichever is first on PATH.
inline std::string python3() {
  return std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
}

} // namespace tributary::test

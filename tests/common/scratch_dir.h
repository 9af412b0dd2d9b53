#pragma once

// A directory of a test's own under the system's temporary directory: made
// empty at the start, removed at the end, also when a REQUIRE ends the test.
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

namespace tributary::test {

struct ScratchDir {
  std::filesystem::path path;

  explicit ScratchDir(const std::string& name) {
    static std::atomic<int> n{0};
    path = std::filesystem::temp_directory_path() /
           ("tributary-" + name + "-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::filesystem::path operator/(const std::string& name) const { return path / name; }
};

} // namespace tributary::test

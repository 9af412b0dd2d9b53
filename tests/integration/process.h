#pragma once

// Runs the built `tributary` executable as a process, capturing its output.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace tributary::test {

struct Run {
  int status = -1; // exit status, -1 if killed by a signal
  std::string out; // stdout and stderr together
};

inline Run run_tributary(const std::string& args) {
  std::string cmd = std::string(TRIBUTARY_BIN) + " " + args + " 2>&1";
  Run r;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) {
    r.out.append(buf.data(), n);
  }
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

} // namespace tributary::test

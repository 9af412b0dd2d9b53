#pragma once

// Runs the built `tributary` executable as a process, capturing its output.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

extern char** environ;

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

// Starts `tributary ARGS` in the background with its standard output and
// error going to `stdout_path`; returns its pid.
inline pid_t spawn_tributary(const std::vector<std::string>& args, const std::string& stdout_path = "/dev/null") {
  std::vector<std::string> all{TRIBUTARY_BIN};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, all[0].c_str(), &fa, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

// Kills (SIGKILL) and reaps a spawned process when the scope ends, unless
// the test already did: a failed REQUIRE must not leave a daemon running.
struct ProcessGuard {
  pid_t& pid;
  explicit ProcessGuard(pid_t& p) : pid(p) {}
  ~ProcessGuard() {
    if (pid > 0 && waitpid(pid, nullptr, WNOHANG) == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  ProcessGuard(const ProcessGuard&) = delete;
  ProcessGuard& operator=(const ProcessGuard&) = delete;
};

// A loopback port nobody listens on right now.
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

} // namespace tributary::test

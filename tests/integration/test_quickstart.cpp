// README command 1 (deploy/quickstart.sh), with the built binary (no install,
// no build; QUICKSTART_BIN): it starts while another process holds TCP
// 55432 (its PostgreSQL listens on a Unix socket under its own folder),
// serves, and leaves nothing running after SIGTERM, then after SIGINT.
#include "http_get.h"
#include "process.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace tributary;
using namespace tributary::test;

namespace {

// Processes whose command line names `needle` (our folder), but this one.
std::vector<std::string> running_with(const std::string& needle) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos || std::stoi(name) == ::getpid()) {
      continue;
    }
    std::ifstream in(e.path() / "cmdline", std::ios::binary);
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find(needle) != std::string::npos) {
      out.push_back(name + ": " + cmd);
    }
  }
  return out;
}

pid_t spawn_quickstart(const std::filesystem::path& var, int port, int sim_port, const std::string& log) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    env_strings.emplace_back(*e);
  }
  env_strings.push_back(std::string("QUICKSTART_BIN=") + TRIBUTARY_BIN);
  env_strings.push_back("QUICKSTART_VAR=" + var.string());
  env_strings.push_back("QUICKSTART_PORT=" + std::to_string(port));
  env_strings.push_back("QUICKSTART_SIMULATE_PORT=" + std::to_string(sim_port));
  env_strings.push_back("QUICKSTART_RESOURCES=50");
  std::vector<char*> envp;
  for (auto& s : env_strings) {
    envp.push_back(s.data());
  }
  envp.push_back(nullptr);
  std::string bash = "/bin/bash";
  std::string script = std::string(TRIBUTARY_SOURCE_DIR) + "/deploy/quickstart.sh";
  std::vector<char*> argv{bash.data(), script.data(), nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  // Signals as a terminal would deliver them: default dispositions (a
  // process started in the background by a shell ignores SIGINT).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t all;
  sigemptyset(&all);
  sigaddset(&all, SIGINT);
  sigaddset(&all, SIGTERM);
  posix_spawnattr_setsigdefault(&attr, &all);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, bash.c_str(), &fa, &attr, argv.data(), envp.data()) == 0);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  return pid;
}

} // namespace

TEST_CASE("Quickstart: it runs while another process holds TCP 55432, and leaves nothing running after SIGTERM or "
          "SIGINT") {
  // Someone else's server on the port the quickstart once used.
  const int holder = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(holder >= 0);
  const int one = 1;
  ::setsockopt(holder, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(55432);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool held = ::bind(holder, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(holder, 1) == 0;
  INFO("TCP 55432 held by this test: " << held);
  // A folder the postgres user can reach (the script runs initdb as it
  // when run as root).
  const auto var = std::filesystem::temp_directory_path() / ("tributary-quickstart-" + std::to_string(::getpid()));
  std::filesystem::remove_all(var);
  std::filesystem::create_directories(var);
  std::filesystem::permissions(var, std::filesystem::perms::all & ~std::filesystem::perms::others_write &
                                        ~std::filesystem::perms::group_write);
  const std::string log = var.string() + ".log";
  // Whatever a failed check leaves running under the folder goes at the end.
  struct Sweep {
    std::filesystem::path var;
    ~Sweep() {
      for (const auto& p : running_with(var.string())) {
        ::kill(std::stoi(p.substr(0, p.find(':'))), SIGKILL);
      }
      std::filesystem::remove_all(var);
    }
  } sweep{var};
  for (const int sig : {SIGTERM, SIGINT}) {
    CAPTURE(sig);
    const int port = free_port();
    const int sim_port = free_port();
    pid_t pid = spawn_quickstart(var, port, sim_port, log);
    ProcessGuard guard(pid);
    const bool up = eventually([&] { return http_get("http://127.0.0.1:" + std::to_string(port) + "/healthz").status == 200; },
                               120);
    std::ifstream in(log);
    std::stringstream said;
    said << in.rdbuf();
    INFO(said.str());
    REQUIRE(up);
    CHECK(http_get("http://127.0.0.1:" + std::to_string(port) + "/.well-known/resourcesync").status == 200);
    CHECK(std::filesystem::exists(var / "run" / ".s.PGSQL.5432")); // its own socket, no TCP port
    ::kill(pid, sig);
    int status = -1;
    bool exited = false;
    for (int i = 0; i < 600 && !exited; ++i) {
      exited = ::waitpid(pid, &status, WNOHANG) == pid;
      if (!exited) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    REQUIRE(exited);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    // Nothing of it left: no daemon, no simulator, no PostgreSQL.
    CHECK(eventually([&] { return running_with(var.string()).empty(); }, 10));
    CHECK(running_with(var.string()) == std::vector<std::string>{});
    CHECK(!std::filesystem::exists(var / "pg" / "postmaster.pid"));
  }
  ::close(holder);
  std::filesystem::remove(log);
}

// Crash safety: `tributary sync` is killed with SIGKILL in the middle of a
// baseline and of an incremental run, run again, and the store must equal
// the upstream exactly with no change logged twice.
#include "process.h"
#include "sync_fixture.h"

#include <signal.h>

#include <fstream>


using namespace tributary;
using namespace tributary::test;

namespace {

// Starts a sync, kills it once the upstream has served `kill_after` resource
// requests, and returns whether it was killed (rather than done already).
bool kill_midway(const std::vector<std::string>& args, Upstream& up, size_t kill_after) {
  const size_t start = up.total_requests();
  pid_t pid = spawn_tributary(args);
  int status = 0;
  for (int i = 0; i < 20000; ++i) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      return false;
    }
    if (up.total_requests() - start >= kill_after) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return WIFSIGNALED(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  FAIL("sync neither finished nor reached the kill point");
  return false;
}

std::map<std::string, size_t> count(const std::vector<std::string>& log) {
  std::map<std::string, size_t> out;
  for (const auto& l : log) {
    ++out[l];
  }
  return out;
}

} // namespace

TEST_CASE("Crash safety: SIGKILL during baseline and incremental, then resume") {
  Upstream up;
  Site site(up);
  const int n = 300;
  for (int i = 0; i < n; ++i) {
    site.put("/res/r" + std::to_string(i) + ".txt", "v0-" + std::to_string(i));
  }
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  up.set_delay(std::chrono::milliseconds(10));

  SyncEnv env; // the database, migrated; the CLI opens its own connection
  const auto cfg = env.data / "config.json";
  std::filesystem::create_directories(env.data);
  std::ofstream(cfg) << "{\"database\": \"" << env.db.conninfo() << "\", \"data_dir\": \"" << env.data.string()
                     << "\", \"sources\": [{\"name\": \"up\", \"url\": \"" << up.url("/")
                     << "\"}]}";
  const std::vector<std::string> baseline{"sync", "--config", cfg.string(), "--baseline", "--batch-size", "20"};
  const std::vector<std::string> incremental{"sync", "--config", cfg.string(), "--incremental", "--batch-size", "20"};

  CHECK(kill_midway(baseline, up, n / 2));
  const auto partial = env.live().size();
  CHECK(partial < static_cast<size_t>(n));
  auto done = run_tributary("sync --config " + cfg.string() + " --baseline");
  INFO(done.out);
  CHECK(done.status == 0);
  CHECK(env.live() == expected_live(site));
  for (const auto& [line, times] : count(env.log())) {
    CHECK_MESSAGE(times == 1, line << " logged " << times << " times");
  }
  CHECK(env.log().size() == static_cast<size_t>(n));

  // Every resource updated, in one open Change List.
  std::vector<rs::Entry> changes;
  for (int i = 0; i < n; ++i) {
    const std::string p = "/res/r" + std::to_string(i) + ".txt";
    site.put(p, "v1-" + std::to_string(i));
    changes.push_back(change_entry(up.url(p), rs::Change::updated,
                                   ts("2026-01-02T00:00:00Z") + std::chrono::seconds(i / 3), "v1-" + std::to_string(i)));
  }
  site.publish_change_list("/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt, changes);
  CHECK(kill_midway(incremental, up, n / 2));
  auto resumed = run_tributary("sync --config " + cfg.string() + " --incremental");
  INFO(resumed.out);
  CHECK(resumed.status == 0);
  CHECK(env.live() == expected_live(site));
  auto log = count(env.log());
  for (int i = 0; i < n; ++i) {
    CHECK(log["updated " + up.url("/res/r" + std::to_string(i) + ".txt")] == 1);
  }
  CHECK(env.log().size() == static_cast<size_t>(2 * n));
  CHECK(env.stats_consistent()); // counts kept through two SIGKILLs

  // What the kills left in the blob store is dead space, never damage: each
  // of the four processes appended to a pack of its own, and every name the
  // index holds is an intact record.
  auto checked = run_tributary("check-blobs --config " + cfg.string());
  INFO(checked.out);
  CHECK(checked.status == 0);
  CHECK(checked.out.find("packs: 4 files") != std::string::npos);
  CHECK(checked.out.find("problems: 0") != std::string::npos);
}

// The data directory's disk fills up under `tributary run` mid-baseline,
// then space returns: the daemon pauses as a node (said once, no retry
// charged to any resource), resumes within seconds of space returning, and
// keeps no space for the writes the full disk tore.
//
// The data directory is on a 32 MiB tmpfs of the test's own (mounting
// needs root, as deploy/test.sh runs the tests; bench/run.sh crash has the
// same fault, case disk-full, under the crash matrix).
#include "daemon_client.h"
#include "process.h"
#include "sync_fixture.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <fstream>
#include <thread>

using namespace tributary;
using namespace tributary::test;
using nlohmann::json;

namespace {

struct SmallDisk {
  std::filesystem::path dir;
  explicit SmallDisk(std::filesystem::path d) : dir(std::move(d)) {
    std::filesystem::create_directories(dir);
    REQUIRE_MESSAGE(::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=32m") == 0,
                    "mounting a tmpfs needs root (deploy/test.sh runs the tests as root): " << std::strerror(errno));
  }
  ~SmallDisk() { ::umount2(dir.c_str(), MNT_DETACH); }
  uint64_t free_bytes() const {
    struct statvfs st {};
    ::statvfs(dir.c_str(), &st);
    return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  }
};

// The disk space the files under `dir` take (holes take none).
uint64_t allocated(const std::filesystem::path& dir) {
  uint64_t total = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    struct stat st {};
    if (e.is_regular_file() && ::stat(e.path().c_str(), &st) == 0) {
      total += static_cast<uint64_t>(st.st_blocks) * 512;
    }
  }
  return total;
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

} // namespace

TEST_CASE("Disk full: the daemon pauses as a node mid-baseline, charges no resource a retry, and resumes within "
          "10 s of space returning, with no space kept for torn writes") {
  constexpr int k_resources = 60;
  constexpr size_t k_size = 256 * 1024; // packed (up to 1 MiB is)
  Upstream up;
  Site site(up);
  for (int i = 0; i < k_resources; ++i) {
    std::string bytes(k_size, static_cast<char>('a' + i % 26));
    bytes.replace(0, 16, "resource " + std::to_string(i) + "       ");
    site.put("/res/" + std::to_string(i) + ".bin", bytes);
  }
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  TestDaemon d({{"up", up.url("/")}});
  SmallDisk disk(d.dir / "small");
  edit_config(d, [&](json& j) { j["data_dir"] = (disk.dir / "data").string(); });
  // Room for about a third of the Source.
  const std::filesystem::path filler = disk.dir / "filler";
  {
    std::ofstream f(filler, std::ios::binary);
    const std::string block(1024 * 1024, '\0');
    const uint64_t leave = 6 * 1024 * 1024;
    for (uint64_t n = disk.free_bytes(); n > leave + block.size(); n -= block.size()) {
      f.write(block.data(), static_cast<std::streamsize>(block.size()));
    }
  }
  d.start();
  INFO(d.log_text());
  REQUIRE(wait_for(d.base, [](const json& st) {
    return st.is_object() && st["data"]["node"]["disk"]["full"] == true;
  }));
  // Paused: said once; no run started while it stays full; no resource
  // waits on a retry for it.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const std::string paused_log = d.log_text();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const std::string later_log = d.log_text();
  CHECK(count_of(later_log, "the data directory's disk is full") == 1);
  // What did not fit is named: a resource's content, not the document the
  // run was reading.
  CHECK(later_log.find("storing the content of " + up.url("/res/")) != std::string::npos);
  CHECK(count_of(later_log, "run started") == count_of(paused_log, "run started"));
  CHECK(count_of(later_log, "\n") - count_of(paused_log, "\n") <= 2);
  CHECK(scalar(d, "SELECT count(*) FROM retry") == "0");
  CHECK(call(d.base, "GET", "/metrics").body.find("tributary_disk_full 1") != std::string::npos);

  std::filesystem::remove(filler);
  const auto freed_at = std::chrono::steady_clock::now();
  REQUIRE(wait_for(d.base, [&](const json& st) { return in_sync(st, "up", k_resources); }, 60));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - freed_at).count();
  MESSAGE("baseline of " << k_resources << " x 256 KiB finished " << took << " s after space returned");
  CHECK(took <= 10);
  CHECK(status_of(d.base)["data"]["node"]["disk"]["full"] == false);
  CHECK(count_of(d.log_text(), "space returned to the data directory's disk") == 1);
  CHECK(scalar(d, "SELECT count(*) FROM retry") == "0");
  // Every byte held once: the packs take no more than the records they
  // hold (a torn record's space was given back), and the store checks clean.
  const uint64_t packs = allocated(disk.dir / "data" / "packs");
  MESSAGE("packs take " << packs << " bytes on disk for " << k_resources * k_size << " bytes of content");
  CHECK(packs <= k_resources * (k_size + 4096) + 1024 * 1024);
  CHECK(d.stop().second == 0);
  auto check = run_tributary("check-blobs --config " + d.cfg);
  INFO(check.out);
  CHECK(check.status == 0);
}

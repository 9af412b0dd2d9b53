// `tributary check-config` and `tributary migrate` as processes, against
// a fresh database on the test cluster.
#include "pg_fixture.h"
#include "process.h"

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using tributary::test::run_tributary;

namespace {

fs::path write_config(const std::string& name, const std::string& text) {
  fs::path p = fs::temp_directory_path() / name;
  std::ofstream(p) << text;
  return p;
}

} // namespace

TEST_CASE("tributary migrate: applies the schema once, then reports it current") {
  tributary::test::TempDatabase db;
  auto cfg = write_config("tributary-migrate-test.json",
                          "{\"database\": \"" + db.conninfo() + "\", \"data_dir\": \"/tmp/tributary-data\"}");
  auto first = run_tributary("migrate --config " + cfg.string());
  INFO(first.out);
  CHECK(first.status == 0);
  CHECK(first.out == "schema migrated from version 0 to 1: 0001_initial.sql\n");
  auto second = run_tributary("migrate --config " + cfg.string());
  CHECK(second.status == 0);
  CHECK(second.out == "schema is current (version 1)\n");
  fs::remove(cfg);
}

TEST_CASE("tributary migrate and check-config: a bad config names every problem") {
  auto cfg = write_config("tributary-bad-config.json",
                          R"({"database": "dbname=x", "sources": [{"name": "a", "url": "gopher://x"}]})");
  auto m = run_tributary("migrate --config " + cfg.string());
  CHECK(m.status == 1);
  CHECK(m.out.find(cfg.string() + ": /data_dir: missing (required)") != std::string::npos);
  CHECK(m.out.find(cfg.string() + ": /sources/0/url: expected an http(s) or file URL") != std::string::npos);
  auto c = run_tributary("check-config " + cfg.string());
  CHECK(c.status == 1);
  CHECK(c.out == m.out);
  fs::remove(cfg);
}

TEST_CASE("tributary migrate: an unreachable database is an error, not a crash") {
  auto cfg = write_config("tributary-dead-db.json",
                          R"({"database": "host=/nonexistent-socket-dir dbname=x connect_timeout=2", "data_dir": "/tmp/x"})");
  auto m = run_tributary("migrate --config " + cfg.string());
  CHECK(m.status == 1);
  CHECK(m.out.rfind("tributary migrate: migrate: database connection lost:", 0) == 0);
  fs::remove(cfg);
}

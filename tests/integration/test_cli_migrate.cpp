// `tributary check-config` and `tributary migrate` as processes, against
// a fresh database on the test cluster.
#include "process.h"
#include "sync_fixture.h"

#include <pqxx/pqxx>

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
  CHECK(first.out == "schema migrated from version 0 to 25: 0001_initial.sql 0002_retry.sql 0003_feed_stats.sql "
                   "0004_feed_stats_recount.sql 0005_deletion_hold.sql 0006_uri_byte_order.sql "
                   "0007_change_log_retention.sql 0008_content_object.sql 0009_run_node.sql 0010_shared_dumps.sql "
                     "0011_content_object_gc.sql 0012_websub.sql 0013_archives.sql 0014_framework_events.sql "
                     "0015_change_dump_archive.sql 0016_source_history.sql 0017_source_kind.sql "
                     "0018_retry_entry_record.sql 0019_retry_entry_drop_xml.sql 0020_watermark_resume.sql 0021_operator.sql 0022_source_lease.sql 0023_feed_check_per_batch.sql 0024_change_log_heads.sql 0025_resource_logged_at.sql\n");
  auto second = run_tributary("migrate --config " + cfg.string());
  CHECK(second.status == 0);
  CHECK(second.out == "schema is current (version 25)\n");
  // A database of the first release (version 1, holding resources) takes
  // only the new steps, and its counts are taken from what it holds.
  {
    pqxx::connection c(db.conninfo());
    pqxx::work tx(c);
    tx.exec0("DROP TABLE retry");
    tx.exec0("DROP TABLE feed_stats CASCADE");
    tx.exec0("DROP TRIGGER resource_stats_insert ON resource");
    tx.exec0("DROP TRIGGER resource_stats_update ON resource");
    tx.exec0("DROP TRIGGER resource_stats_delete ON resource");
    tx.exec0("DROP FUNCTION feed_stats_after_insert, feed_stats_after_update, feed_stats_after_delete");
    tx.exec0("ALTER TABLE feed DROP COLUMN deletion_hold_unseen, DROP COLUMN deletion_hold_live, "
             "DROP COLUMN deletion_hold_since, DROP COLUMN deletion_hold_run, DROP COLUMN deletions_confirmed");
    tx.exec0("DROP INDEX sync_run_source_status, sync_run_finished");
    tx.exec0("DROP TABLE change_log_compaction");
    tx.exec0("DROP TABLE content_object, content_object_dead");
    tx.exec0("ALTER TABLE sync_run DROP COLUMN node");
    tx.exec0("DROP TABLE shared_dump, shared_dump_file");
    tx.exec0("DROP TABLE hub_subscription, push_subscription, archived_document, framework_event");
    tx.exec0("DROP TABLE source_history, source_history_cursor");
    tx.exec0("ALTER TABLE source DROP COLUMN kind, DROP COLUMN clock_ahead_seconds");
    tx.exec0("ALTER TABLE watermark DROP COLUMN resume");
    tx.exec0("ALTER TABLE sync_run DROP COLUMN trigger");
    tx.exec0("DROP TABLE source_pause, operator_action, source_removed");
    tx.exec0("DROP TABLE source_lease");
    tx.exec0("DROP INDEX change_log_feed_uri");
    tx.exec0("DROP INDEX change_log_recorded, resource_logged_at");
    tx.exec0("ALTER TABLE resource DROP COLUMN logged_at");
    tx.exec0("DROP TRIGGER feed_delete_rows ON feed");
    tx.exec0("DROP FUNCTION feed_delete_rows");
    tx.exec0("ALTER TABLE resource ADD FOREIGN KEY (feed_id) REFERENCES feed (id) ON DELETE CASCADE");
    tx.exec0("ALTER TABLE change_log ADD FOREIGN KEY (feed_id) REFERENCES feed (id) ON DELETE CASCADE");
    tx.exec0("DELETE FROM schema_version WHERE version > 1");
    tx.exec0("INSERT INTO source (name, url) VALUES ('kept', 'http://kept.example/')");
    tx.exec0("INSERT INTO feed (source_id, capability_list_url) SELECT id, 'http://kept.example/caps' FROM source");
    tx.exec0("INSERT INTO resource (feed_id, uri, state, length) SELECT id, 'u' || n, "
             "CASE WHEN n % 4 = 0 THEN 'deleted' ELSE 'live' END, n FROM feed, generate_series(1, 100) n");
    tx.commit();
  }
  auto upgrade = run_tributary("migrate --config " + cfg.string());
  CHECK(upgrade.status == 0);
  CHECK(upgrade.out == "schema migrated from version 1 to 25: 0002_retry.sql 0003_feed_stats.sql "
                     "0004_feed_stats_recount.sql 0005_deletion_hold.sql 0006_uri_byte_order.sql "
                     "0007_change_log_retention.sql 0008_content_object.sql 0009_run_node.sql 0010_shared_dumps.sql "
                     "0011_content_object_gc.sql 0012_websub.sql 0013_archives.sql 0014_framework_events.sql "
                     "0015_change_dump_archive.sql 0016_source_history.sql 0017_source_kind.sql "
                     "0018_retry_entry_record.sql 0019_retry_entry_drop_xml.sql 0020_watermark_resume.sql 0021_operator.sql 0022_source_lease.sql 0023_feed_check_per_batch.sql 0024_change_log_heads.sql 0025_resource_logged_at.sql\n");
  {
    pqxx::connection c(db.conninfo());
    pqxx::read_transaction tx(c);
    CHECK(tx.exec1("SELECT count(*) FROM retry")[0].as<int>() == 0);
    CHECK(tx.exec1("SELECT count(*) FROM source WHERE name = 'kept'")[0].as<int>() == 1);
    auto stats = tx.exec1("SELECT live, deleted, bytes FROM feed_stats");
    CHECK(stats[0].as<int>() == 75);
    CHECK(stats[1].as<int>() == 25);
    CHECK(stats[2].as<long long>() == 5050 - (4 + 100) * 25 / 2); // the live lengths
  }
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
  // --config FILE, as every other command takes it, says the same.
  auto c2 = run_tributary("check-config --config " + cfg.string());
  CHECK(c2.status == 1);
  CHECK(c2.out == m.out);
  CHECK(run_tributary("check-config").status == 2); // no file at all
  fs::remove(cfg);
}

TEST_CASE("tributary check-config: a valid config whose admin token variable is unset is ok, with a warning") {
  auto cfg = write_config("tributary-token-config.json",
                          R"({"database": "dbname=x", "data_dir": "/tmp/x", "sources": [],
                              "admin_token_env": "TRIBUTARY_TEST_UNSET_TOKEN_VARIABLE"})");
  auto c = run_tributary("check-config --config " + cfg.string());
  INFO(c.out);
  CHECK(c.status == 0);
  CHECK(c.out.find(": ok (0 sources)") != std::string::npos);
  CHECK(c.out.find("warning: /admin_token_env: the environment variable TRIBUTARY_TEST_UNSET_TOKEN_VARIABLE is not "
                   "set here, so the admin API (actions, sync now, pause) would be off") != std::string::npos);
  auto quiet = run_tributary("--version >/dev/null; TRIBUTARY_TEST_UNSET_TOKEN_VARIABLE=x " + std::string(TRIBUTARY_BIN) +
                             " check-config --config " + cfg.string());
  CHECK(quiet.status == 0);
  CHECK(quiet.out.find("warning:") == std::string::npos);
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

TEST_CASE("tributary sync: one line per source and an exit status scripts can use") {
  tributary::test::TempDatabase db;
  tributary::test::Upstream up;
  tributary::test::Site site(up);
  site.put("/res/a.txt", "alpha");
  site.put("/res/gone.txt", "gone");
  site.publish_resource_list(tributary::test::ts("2026-01-01T00:00:00Z"));
  up.remove("/res/gone.txt");
  const auto data = fs::temp_directory_path() / ("tributary-cli-sync-" + std::to_string(::getpid()));
  auto cfg = write_config("tributary-cli-sync.json",
                          "{\"database\": \"" + db.conninfo() + "\", \"data_dir\": \"" + data.string() +
                              "\", \"sources\": [{\"name\": \"up\", \"url\": \"" + up.url("/") + "\"}]}");
  auto behind = run_tributary("sync --config " + cfg.string() + " --baseline");
  CHECK(behind.status == 1);
  CHECK(behind.out.find("run `tributary migrate --config FILE` first") != std::string::npos);
  REQUIRE(run_tributary("migrate --config " + cfg.string()).status == 0);

  auto partial = run_tributary("sync --config " + cfg.string() + " --baseline");
  INFO(partial.out);
  CHECK(partial.status == 1);
  CHECK(partial.out.rfind("source 'up': baseline partial in ", 0) == 0);
  CHECK(partial.out.find(": created 1, updated 0, deleted 0, unchanged 0, failed 1, 5 B, 1 error(s)\n") !=
        std::string::npos);
  CHECK(partial.out.find("  error: HTTP 404 for " + up.url("/res/gone.txt") + "\n") != std::string::npos);

  site.erase("/res/gone.txt");
  site.publish_resource_list(tributary::test::ts("2026-01-02T00:00:00Z"));
  auto ok = run_tributary("sync --config " + cfg.string() + " --audit");
  INFO(ok.out);
  CHECK(ok.status == 0);
  CHECK(ok.out.find("  note: audit: in sync 1, missing 0, extra 0, changed 0\n") != std::string::npos);

  CHECK(run_tributary("sync --config " + cfg.string() + " --source nope --baseline").status == 2);
  CHECK(run_tributary("sync --config " + cfg.string() + " --baseline --incremental").status == 2);
  CHECK(run_tributary("sync --config " + cfg.string() + " --incremental --repair").status == 2);
  fs::remove(cfg);
  fs::remove_all(data);
}

TEST_CASE("tributary gc: condemns what the database names nowhere, removes it on a later run, keeps what it names") {
  tributary::test::TempDatabase db;
  const fs::path data = fs::temp_directory_path() / ("tributary-gc-cli-" + std::to_string(::getpid()));
  fs::remove_all(data);
  auto cfg = write_config("tributary-gc-test.json",
                          "{\"database\": \"" + db.conninfo() + "\", \"data_dir\": \"" + data.string() + "\"}");
  REQUIRE(run_tributary("migrate --config " + cfg.string()).status == 0);
  std::string kept, stray;
  {
    auto blobs = tributary::store::BlobStore::open(data);
    REQUIRE(blobs);
    kept = (*blobs)->put("a live resource's content")->sha256;
    stray = (*blobs)->put("named nowhere")->sha256;
  }
  {
    pqxx::connection c(db.conninfo());
    pqxx::work tx(c);
    tx.exec0("INSERT INTO source (name, url) VALUES ('s', 'http://s.example/')");
    tx.exec0("INSERT INTO feed (source_id, capability_list_url) SELECT id, 'http://s.example/caps' FROM source");
    tx.exec0("INSERT INTO resource (feed_id, uri, state, blob_sha256) SELECT id, 'http://s.example/a', 'live', '" +
             kept + "' FROM feed");
    tx.commit();
  }
  auto dry = run_tributary("gc --dry-run --config " + cfg.string());
  INFO(dry.out);
  CHECK(dry.status == 0);
  CHECK(dry.out.find("stored: 2 blobs") != std::string::npos);
  CHECK(dry.out.find("garbage: 1 blobs, 13 bytes named nowhere") != std::string::npos);
  CHECK(dry.out.find("dry run") != std::string::npos);

  auto first = run_tributary("gc --grace 0s --config " + cfg.string());
  INFO(first.out);
  CHECK(first.status == 0);
  CHECK(first.out.find("removed: 0 blobs") != std::string::npos);
  CHECK(first.out.find("condemned: 1 newly") != std::string::npos);
  auto second = run_tributary("gc --grace 0s --config " + cfg.string());
  INFO(second.out);
  CHECK(second.status == 0);
  CHECK(second.out.find("removed: 1 blobs, 13 bytes") != std::string::npos);
  {
    auto blobs = tributary::store::BlobStore::open(data);
    REQUIRE(blobs);
    CHECK(*(*blobs)->read(kept) == "a live resource's content");
    CHECK_FALSE((*blobs)->locate(stray));
  }
  auto bad = run_tributary("gc --grace soon --config " + cfg.string());
  CHECK(bad.status == 2);
  CHECK(bad.out.find("--grace 'soon' is not a duration") != std::string::npos);
  fs::remove_all(data);
}

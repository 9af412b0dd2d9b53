// `tributary run` as a real process over a real PostgreSQL and real HTTP
// upstreams: it reaches in-sync, follows changes into its own Change List,
// answers the status API (counts equal to the database's), guards the admin
// endpoint, reloads on SIGHUP (adding and removing sources, refusing an
// invalid file) and stops cleanly on SIGTERM.
#include "daemon_client.h"
#include "process.h"
#include "sync_fixture.h"

#include "common/percent.h"
#include "resourcesync/reader.h"
#include "sync_engine/fetcher.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <fstream>
#include <signal.h>
#include <thread>

using namespace tributary;
using namespace tributary::test;
using nlohmann::json;

namespace {

// Every URL of our Change List index's parts, newest part last.
std::string our_change_list(const std::string& base, const std::string& set) {
  Answer index = call(base, "GET", "/sets/" + set + "/changelist.xml");
  if (index.status != 200) {
    return "";
  }
  auto doc = rs::parse_document(index.body);
  std::string all = index.body;
  if (doc.document.header.root == rs::RootElement::urlset) {
    return all;
  }
  for (const auto& e : doc.document.entries) {
    auto u = sync::parse_url(e.loc);
    all += call(base, "GET", u->target).body;
  }
  return all;
}

} // namespace

TEST_CASE("Daemon: follows sources on schedule, reports status, guards the admin API, reloads and stops cleanly") {
  Upstream up;
  Site site(up);
  site.put("/res/a.txt", "alpha");
  site.put("/res/b.txt", "bravo");
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  Upstream up2;
  Site site2(up2);
  site2.put("/x.txt", "x-ray");
  site2.publish_start(ts("2026-01-01T00:00:00Z"));

  TestDaemon d({{"up", up.url("/")}}, "s3cret-token");
  d.start();
  auto& db = d.db;
  const auto& dir = d.dir;
  const int port = d.port;
  const std::string& base = d.base;
  const std::string& cfg = d.cfg;
  pid_t& daemon = d.pid;
  auto log_text = [&d] { return d.log_text(); };

  // In sync, and the status API's counts are the database's.
  const bool synced = wait_for(base, [](const json& st) { return in_sync(st, "up", 2); });
  INFO(log_text());
  REQUIRE(synced);
  CHECK(call(base, "GET", "/healthz").status == 200);
  CHECK(call(base, "GET", "/readyz").status == 200);
  {
    pqxx::connection c(db.conninfo());
    pqxx::read_transaction tx(c);
    const auto live = tx.exec1("SELECT count(*) FROM resource WHERE state = 'live'")[0].as<uint64_t>();
    const json st = status_of(base);
    const json* s = find_source(st, "up");
    REQUIRE(s);
    CHECK((*s)["resources"]["live"] == live);
    CHECK((*s)["resources"]["retrying"] == 0);
    CHECK((*s)["bytes"] == 10);
    CHECK((*s)["lag"]["unapplied_changes"] == 0);
  }

  // An upstream change appears in our own Change List within interval + 1 s.
  std::vector<double> delays;
  for (int i = 0; i < 3; ++i) {
    const std::string path = "/res/new" + std::to_string(i) + ".txt";
    site.put(path, "new " + std::to_string(i));
    std::vector<rs::Entry> changes;
    for (int k = 0; k <= i; ++k) {
      changes.push_back(change_entry(up.url("/res/new" + std::to_string(k) + ".txt"), rs::Change::created,
                                     ts(("2026-01-02T00:00:0" + std::to_string(k) + "Z").c_str()), "new " + std::to_string(k)));
    }
    const auto changed_at = std::chrono::steady_clock::now();
    site.publish_change_list("/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt, changes);
    const std::string encoded = percent_encode(up.url(path));
    bool seen = false;
    while (!seen && std::chrono::steady_clock::now() - changed_at < std::chrono::seconds(10)) {
      seen = our_change_list(base, "up").find(encoded) != std::string::npos;
      if (!seen) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    INFO(our_change_list(base, "up"));
    INFO(encoded);
    REQUIRE(seen);
    delays.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - changed_at).count());
  }
  const double worst = *std::max_element(delays.begin(), delays.end());
  MESSAGE("propagation delays (s): " << delays[0] << ", " << delays[1] << ", " << delays[2]);
  CHECK(worst <= 1.1 + 1.0 + 0.5); // interval (+10% jitter) + 1 s, and a margin for a loaded CI machine

  // Metrics and the status page.
  Answer metrics = call(base, "GET", "/metrics");
  CHECK(metrics.status == 200);
  CHECK(metrics.body.find("tributary_source_resources{source=\"up\"} 5") != std::string::npos);
  CHECK(metrics.body.find("# TYPE tributary_source_lag_seconds gauge") != std::string::npos);
  CHECK(metrics.body.find("tributary_source_retrying_resources{source=\"up\"} 0") != std::string::npos);
  CHECK(metrics.body.find("tributary_host_window{host=\"" + up.base() + "\"} 8") != std::string::npos);
  CHECK(metrics.body.find("tributary_node_info{node=\"") != std::string::npos);
  CHECK(metrics.body.find("# TYPE tributary_pipelined_requests_total counter") != std::string::npos);
  CHECK(metrics.body.find("tributary_pipelining_hosts{state=\"off\"} ") != std::string::npos);
  // The commits of the runs so far (a baseline and three changes), and
  // where their time went: each stage counted, none negative, apply (a
  // database transaction each) never nothing.
  CHECK(test::metric(metrics.body, "tributary_commits_total") >= 4);
  CHECK(test::metric(metrics.body, "tributary_commit_seconds_total{stage=\"publish\"}") >= 0);
  CHECK(test::metric(metrics.body, "tributary_commit_seconds_total{stage=\"waiting\"}") >= 0);
  CHECK(test::metric(metrics.body, "tributary_commit_seconds_total{stage=\"apply\"}") > 0);

  // Each upstream host's throttle: no rate limit for a healthy host, and why.
  {
    const json hosts = status_of(base)["data"]["hosts"];
    const json* h = nullptr;
    for (const auto& x : hosts) {
      if (x["host"] == up.base()) {
        h = &x;
      }
    }
    INFO(hosts.dump());
    REQUIRE(h);
    CHECK((*h)["rate_limit"].is_null());
    CHECK((*h)["window"] == 8);
    CHECK((*h)["requests"].get<uint64_t>() > 0);
    CHECK((*h)["reason"].get<std::string>().find("window") != std::string::npos);
    CHECK(call(base, "GET", "/api/v1/hosts").status == 200);
  }
  Answer page = call(base, "GET", "/status");
  CHECK(page.status == 200);
  CHECK(page.content_type.rfind("text/html", 0) == 0);
  CHECK(page.body.find("\"api/v1/\" + p") != std::string::npos); // it reads the status API
  Answer runs = call(base, "GET", "/api/v1/sources/up/runs");
  CHECK(runs.status == 200);
  CHECK(json::parse(runs.body)["data"]["runs"].size() >= 2);
  Answer unknown = call(base, "GET", "/api/v1/sources/nope");
  CHECK(unknown.status == 404);
  CHECK(json::parse(unknown.body)["error"]["code"] == "unknown_source");

  // The admin endpoint: no token, a wrong one, then the right one.
  const std::string body = R"({"mode": "audit"})";
  CHECK(call(base, "POST", "/api/v1/sources/up/sync", {}, body).status == 401);
  CHECK(call(base, "POST", "/api/v1/sources/up/sync", {{"Authorization", "Bearer wrong"}}, body).status == 401);
  const httplib::Headers auth{{"Authorization", "Bearer s3cret-token"}};
  CHECK(call(base, "POST", "/api/v1/sources/up/sync", auth, R"({"mode": "sideways"})").status == 400);
  CHECK(call(base, "POST", "/api/v1/sources/nope/sync", auth, body).status == 404);
  Answer queued = call(base, "POST", "/api/v1/sources/up/sync", auth, body);
  CHECK(queued.status == 202);
  CHECK(json::parse(queued.body)["data"]["queued"] == true);
  // It ran (the runs API: with runs every second, an incremental may be the
  // last success by the time the status is read).
  auto audited = [&] {
    auto listed = json::parse(call(base, "GET", "/api/v1/sources/up/runs").body, nullptr, false);
    if (listed.is_discarded()) {
      return false;
    }
    for (const auto& r : listed["data"]["runs"]) {
      if (r["mode"] == "audit" && r["status"] == "succeeded") {
        return true;
      }
    }
    return false;
  };
  bool ran = false;
  for (int i = 0; i < 200 && !(ran = audited()); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(ran);

  // SIGHUP: add a source, then remove it; an invalid file changes nothing.
  std::ofstream(cfg) << config_text(db.conninfo(), dir, port, {{"up", up.url("/")}, {"second", up2.url("/")}});
  kill(daemon, SIGHUP);
  CHECK(wait_for(base, [](const json& st) { return in_sync(st, "second", 1); }));
  std::ofstream(cfg) << "{\"database\": 7, \"sources\": [";
  kill(daemon, SIGHUP);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK(call(base, "GET", "/healthz").status == 200);
  CHECK(find_source(status_of(base), "second") != nullptr);
  CHECK(log_text().find("is invalid; still running with the previous config") != std::string::npos);
  std::ofstream(cfg) << config_text(db.conninfo(), dir, port, {{"up", up.url("/")}});
  kill(daemon, SIGHUP);
  CHECK(wait_for(base, [](const json& st) { return st.is_object() && !find_source(st, "second"); }));

  // SIGTERM: exit 0 within a few seconds.
  const auto stop_at = std::chrono::steady_clock::now();
  kill(daemon, SIGTERM);
  int status = 0;
  waitpid(daemon, &status, 0);
  CHECK(std::chrono::steady_clock::now() - stop_at < std::chrono::seconds(5));
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  const std::string text = log_text();
  CHECK(text.find("[up] run finished") != std::string::npos);
  CHECK(text.find("stopped") != std::string::npos);
}

TEST_CASE("Daemon: a Resource List that suddenly lists nothing deletes nothing until an operator confirms") {
  Upstream up;
  Site site(up);
  site.put_numbered(4);
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  TestDaemon d({{"up", up.url("/")}}, "s3cret-token");
  d.start();
  REQUIRE(wait_for(d.base, [](const json& st) { return in_sync(st, "up", 4); }));
  const httplib::Headers auth{{"Authorization", "Bearer s3cret-token"}};
  // Nothing held back: confirming is refused.
  CHECK(call(d.base, "POST", "/api/v1/sources/up/confirm-deletions", auth).status == 409);

  // The upstream breaks: its Resource List lists nothing.
  for (int i = 0; i < 4; ++i) {
    site.erase("/res/" + std::to_string(i) + ".txt");
  }
  site.publish_resource_list(ts("2026-01-02T00:00:00Z"));
  REQUIRE(call(d.base, "POST", "/api/v1/sources/up/sync", auth, R"({"mode": "baseline"})").status == 202);
  const bool held = wait_for(d.base, [](const json& st) {
    const json* s = find_source(st, "up");
    return s && !(*s)["deletions_held"].empty() && (*s)["activity"] == "idle";
  });
  INFO(d.log_text());
  REQUIRE(held);
  {
    const json st = status_of(d.base);
    const json& s = *find_source(st, "up");
    INFO(s.dump(2));
    CHECK(s["resources"]["live"] == 4); // nothing deleted
    CHECK(s["resources"]["deleted"] == 0);
    const json& h = s["deletions_held"][0];
    CHECK(h["unlisted"] == 4);
    CHECK(h["live"] == 4);
    CHECK(h["confirmed"] == false);
    CHECK(h["capability_list"] == up.url("/caps.xml"));
    CHECK(h["reason"].get<std::string>().find("lacks 4 of the 4 resources held") != std::string::npos);
    CHECK(h["confirm"] == "POST /api/v1/sources/up/confirm-deletions");
    // It needs a human: a state of its own, not a green "in sync", and a
    // series for alerts.
    CHECK(s["state"] == "attention");
    CHECK(s["state_reason"].get<std::string>().find("4 deletion(s) held") != std::string::npos);
    const std::string m = call(d.base, "GET", "/metrics").body;
    CHECK(m.find("tributary_source_state{source=\"up\",state=\"attention\"} 1") != std::string::npos);
    CHECK(m.find("tributary_source_deletions_held{source=\"up\"} 4") != std::string::npos);
  }
  // The baseline's run says so (later incremental runs, every second, are
  // the last success by now).
  {
    auto runs = json::parse(call(d.base, "GET", "/api/v1/sources/up/runs").body);
    INFO(runs.dump(2));
    bool said = false;
    for (const auto& r : runs["data"]["runs"]) {
      said = said || (r["mode"] == "baseline" &&
                      r["message"].get<std::string>().find("deletions held") != std::string::npos);
    }
    CHECK(said);
  }
  // Our own documents still serve all four.
  CHECK(call(d.base, "GET", "/sets/up/resourcelist.xml").body.find("/res/3.txt") != std::string::npos);
  // Only the operator may confirm.
  CHECK(call(d.base, "POST", "/api/v1/sources/up/confirm-deletions").status == 401);
  CHECK(call(d.base, "POST", "/api/v1/sources/up/confirm-deletions", {{"Authorization", "Bearer wrong"}}).status ==
        401);
  CHECK(call(d.base, "GET", "/api/v1/sources/up/confirm-deletions").status == 405);
  Answer confirmed = call(d.base, "POST", "/api/v1/sources/up/confirm-deletions", auth);
  INFO(confirmed.body);
  CHECK(confirmed.status == 202);
  CHECK(json::parse(confirmed.body)["data"]["confirmed"][0]["unlisted"] == 4);
  // The baseline it queued applies them, and the hold is gone.
  const bool applied = wait_for(d.base, [](const json& st) {
    const json* s = find_source(st, "up");
    return s && (*s)["deletions_held"].empty() && (*s)["resources"]["live"] == 0 && (*s)["activity"] == "idle";
  });
  CHECK(applied);
  const json after = status_of(d.base);
  CHECK((*find_source(after, "up"))["resources"]["deleted"] == 4);
  CHECK(call(d.base, "POST", "/api/v1/sources/up/confirm-deletions", auth).status == 409);
}

TEST_CASE("Daemon: /readyz says why without the database's own words, and recovers when the database does") {
  Upstream up;
  Site site(up);
  site.put_numbered(1);
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  TestDaemon d({{"up", up.url("/")}});
  d.start();
  REQUIRE(wait_for(d.base, [](const json& st) { return in_sync(st, "up", 1); }));
  CHECK(call(d.base, "GET", "/readyz").status == 200);
  auto admin = [&](const std::string& sql) {
    pqxx::connection c(admin_conninfo());
    pqxx::nontransaction tx(c);
    tx.exec0(sql);
  };
  admin("DROP DATABASE " + d.db.name() + " WITH (FORCE)");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100)); // past the cached answer
  Answer down = call(d.base, "GET", "/readyz");
  INFO(down.body);
  CHECK(down.status == 503);
  CHECK(down.body.find("the database is unreachable since 20") != std::string::npos);
  CHECK(down.body.find("FATAL") == std::string::npos); // libpq's text stays in the log
  CHECK(down.body.find(d.db.name()) == std::string::npos);
  CHECK(call(d.base, "GET", "/healthz").status == 200);
  // A database without our schema: ready again only once migrated.
  admin("CREATE DATABASE " + d.db.name());
  bool unmigrated = false;
  for (int i = 0; i < 50 && !unmigrated; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    Answer a = call(d.base, "GET", "/readyz");
    unmigrated = a.status == 503 && a.body.find("schema is at version 0") != std::string::npos;
  }
  CHECK(unmigrated);
  REQUIRE(run_tributary("migrate --config " + d.cfg).status == 0);
  bool ready = false;
  for (int i = 0; i < 50 && !ready; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ready = call(d.base, "GET", "/readyz").status == 200;
  }
  CHECK(ready);
  CHECK(d.log_text().find("not ready: the database is unreachable since 20") != std::string::npos);
}

TEST_CASE("Daemon: with operator_listen, /api, /status and /metrics answer only there, while documents, /hub, /push "
          "and the probes stay on listen") {
  Upstream up;
  Site site(up);
  site.put_numbered(1);
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  TestDaemon d({{"up", up.url("/")}});
  const int ops_port = free_port();
  const std::string ops = "http://127.0.0.1:" + std::to_string(ops_port);
  edit_config(d, [&](json& j) { j["operator_listen"] = "127.0.0.1:" + std::to_string(ops_port); });
  d.start();
  REQUIRE(wait_for(ops, [](const json& st) { return in_sync(st, "up", 1); }));
  for (const char* path : {"/api/v1/status", "/api/v1/push", "/status", "/metrics"}) {
    INFO(path);
    CHECK(call(d.base, "GET", path).status == 404);
    CHECK(call(ops, "GET", path).status == 200);
  }
  CHECK(call(d.base, "GET", "/healthz").status == 200);
  CHECK(call(d.base, "GET", "/readyz").status == 200);
  CHECK(call(d.base, "GET", "/.well-known/resourcesync").status == 200);
  CHECK(call(ops, "GET", "/.well-known/resourcesync").status == 404);
  // The admin API, with its token, is the operator's too.
  const httplib::Headers auth{{"Authorization", "Bearer token"}};
  const std::string body = R"({"mode": "audit"})";
  const int refused = call(d.base, "POST", "/api/v1/sources/up/sync", auth, body).status;
  CHECK((refused == 404 || refused == 405)); // the republisher's answer: not a route of listen
  CHECK(call(ops, "POST", "/api/v1/sources/up/sync", auth, body).status == 202);
}

TEST_CASE("Daemon: three daemons on one database never sync a source twice at once, and take over a killed one's") {
  // Six sources, each request slowed so that runs last and overlap; three
  // daemons with the same sources on one database.
  SlowSources upstream(6, 10, std::chrono::milliseconds(30));
  const auto& sources = upstream.sources;
  TempDatabase db;
  struct One {
    std::filesystem::path dir;
    std::string cfg, log;
    pid_t pid = 0;
    int port = 0;
  };
  std::vector<One> daemons(3);
  for (size_t i = 0; i < daemons.size(); ++i) {
    One& d = daemons[i];
    d.dir = node_dir("tributary-leases", i);
    d.cfg = (d.dir / "tributary.json").string();
    d.log = (d.dir / "daemon.log").string();
    d.port = free_port();
    std::ofstream(d.cfg) << config_text(db.conninfo(), d.dir, d.port, sources);
  }
  REQUIRE(run_tributary("migrate --config " + daemons[0].cfg).status == 0);
  for (auto& d : daemons) {
    d.pid = spawn_tributary({"run", "--config", d.cfg}, d.log);
  }
  pqxx::connection c(db.conninfo());
  auto scalar = [&c](const std::string& sql) {
    pqxx::nontransaction tx(c);
    return tx.exec1(sql)[0].as<long long>();
  };
  auto wait_until = [](const std::function<bool()>& f, int seconds) {
    for (int i = 0; i < seconds * 10; ++i) {
      if (f()) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  };
  // Every source synced.
  CHECK(wait_until(
      [&] { return scalar("SELECT count(DISTINCT source_id) FROM sync_run WHERE status = 'succeeded'") == 6; }, 60));
  // Kill the first daemon in the middle of a run. Requests are held 1.5 s
  // meanwhile, so that the run it holds is surely mid-run when the kill
  // lands (a run of 30 ms requests could end between the look and the kill:
  // then no run was interrupted).
  for (auto& up : upstream.ups) {
    up->set_delay(std::chrono::milliseconds(1500));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200)); // runs past their last request end
  const bool holding = wait_until([&] { return holds_running_lease(db.conninfo(), daemons[0].pid); }, 30);
  CHECK(holding);
  const long long killed_at = scalar("SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint");
  ::kill(daemons[0].pid, SIGKILL);
  ::waitpid(daemons[0].pid, nullptr, 0);
  daemons[0].pid = 0;
  for (auto& up : upstream.ups) {
    up->set_delay(std::chrono::milliseconds(30));
  }
  // Within a bounded time every source has a run that started after the
  // kill and succeeded: the killed daemon's sources were taken over.
  const bool taken_over = wait_until(
      [&] {
        return scalar("SELECT count(DISTINCT source_id) FROM sync_run WHERE status = 'succeeded' AND "
                      "started_at > to_timestamp(" +
                      std::to_string(killed_at) + " / 1000000.0)") == 6;
      },
      20);
  CHECK(taken_over);
  // Which node runs which source: every run names its daemon, and a
  // daemon's status shows the runs of the others too.
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  auto node_of = [&host](const One& d) { return std::string(host) + " pid " + std::to_string(d.pid); };
  const std::set<std::string> survivors{node_of(daemons[1]), node_of(daemons[2])};
  {
    pqxx::nontransaction tx(c);
    for (const auto& row : tx.exec("SELECT DISTINCT coalesce(node, '') FROM sync_run")) {
      const std::string node = row[0].as<std::string>();
      CHECK_MESSAGE(node.rfind(std::string(host) + " pid ", 0) == 0, node);
    }
  }
  const json st = status_of("http://127.0.0.1:" + std::to_string(daemons[1].port));
  for (int i = 0; i < 6; ++i) {
    const json* s = find_source(st, "s" + std::to_string(i));
    REQUIRE(s);
    INFO(s->dump());
    CHECK(survivors.count((*s)["last_node"].is_string() ? (*s)["last_node"].get<std::string>() : "") == 1);
  }
  // Never two runs of one source at once, over the whole test.
  for (auto& d : daemons) {
    if (d.pid > 0) {
      ::kill(d.pid, SIGTERM);
      ::waitpid(d.pid, nullptr, 0);
      d.pid = 0;
    }
  }
  CHECK(scalar(k_overlapping_runs_sql) == 0);
  CHECK(scalar("SELECT count(*) FROM sync_run") >= 12); // every source at least twice: before and after the kill
  // The killed daemon's run was marked failed by the run that took over.
  CHECK(scalar("SELECT count(*) FROM sync_run WHERE status = 'running'") == 0);
  CHECK(scalar("SELECT count(*) FROM sync_run WHERE message LIKE '%interrupted: its process ended%'") >= 1);
  for (auto& d : daemons) {
    std::filesystem::remove_all(d.dir);
  }
}

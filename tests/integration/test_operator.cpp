// The operator's view (#37) over real HTTP and PostgreSQL: true numbers
// against a Source changing at a known rate, runs told apart by trigger,
// actions that hold across nodes and restarts, and reloads that say what
// they did.
#include "daemon_client.h"
#include "common/percent.h"
#include "process.h"
#include "push_fixture.h"
#include "sync_fixture.h"
#include "../common/scratch_dir.h"

#include "tools/simulate/simulate.h"

#include <httplib.h>

#include <doctest/doctest.h>

#include <csignal>
#include <map>
#include <regex>
#include <sstream>
#include <sys/wait.h>

using namespace tributary::test;

namespace {

// The sum of every series of `name` whose labels contain each of `with`.
double metric_sum(const std::string& text, const std::string& name, const std::vector<std::string>& with) {
  double sum = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + "{", 0) != 0) {
      continue;
    }
    bool all = true;
    for (const auto& w : with) {
      all = all && line.find(w) != std::string::npos;
    }
    if (all) {
      sum += std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  return sum;
}

std::string metrics_of(const std::string& base) { return call(base, "GET", "/metrics").body; }


// An upstream Source of two resources, which the reload and removal tests
// configure three times over (sources a, b and c).
struct TwoResources {
  Upstream up;
  Site site{up};
  TwoResources() {
    site.put_numbered(2);
    site.publish_start(ts("2026-01-01T00:00:00Z"));
  }
};

} // namespace

TEST_CASE("Operator: a Source making 150 changes: /metrics and the history count them apart from its baseline, "
          "runs are told apart by trigger, and a never-synced source has its lag and last-success series") {
  ScratchDir dir("operator-rates");
  const int sim_port = free_port();
  pid_t sim = spawn_tributary({"simulate", "--listen", "127.0.0.1:" + std::to_string(sim_port), "--resources", "400",
                               "--change-rate", "20", "--max-changes", "150", "--size", "64", "--part-size", "40",
                               "--seed", "11"},
                              (dir / "sim.log").string());
  ProcessGuard sim_guard(sim);
  const int dead_port = free_port(); // nothing listens there
  TestDaemon d({{"sim", "http://127.0.0.1:" + std::to_string(sim_port) + "/"},
                {"dead", "http://127.0.0.1:" + std::to_string(dead_port) + "/"}});
  d.start();
  // The simulator stops after 150 changes (7.5 s at 20/s); then the
  // counter settles (the same for 3 s).
  const auto started = std::chrono::steady_clock::now();
  bool settled = false;
  double changes = -1;
  auto stable_since = started;
  while (std::chrono::steady_clock::now() - started < std::chrono::seconds(40)) {
    const std::string m = metrics_of(d.base);
    const double now_changes =
        metric_sum(m, "tributary_changes_applied_total", {"source=\"sim\"", "mode=\"incremental\""});
    if (now_changes != changes) {
      changes = now_changes;
      stable_since = std::chrono::steady_clock::now();
    }
    if (std::chrono::steady_clock::now() - started > std::chrono::seconds(10) && changes > 0 &&
        std::chrono::steady_clock::now() - stable_since > std::chrono::seconds(3)) {
      settled = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  INFO(d.log_text());
  CHECK(settled);
  // The dead source fails once its tries are over (5 over about 12 s).
  CHECK(wait_for(d.base, [](const json& st) {
    const json* x = find_source(st, "dead");
    return x && (*x)["state"] == "failing" && (*x)["activity"] == "backing_off";
  }, 40));
  const std::string m = metrics_of(d.base);
  // Every change applied once, by kind; the baseline's 400 apart. (Those
  // the simulator made while the baseline read its list are in the
  // baseline: 150 less a few.)
  const double logged = std::stod(scalar(d, "SELECT count(*) FROM change_log"));
  const double stored = metric_sum(m, "tributary_changes_applied_total", {"source=\"sim\"", "mode=\"baseline\""});
  CHECK(changes + stored == logged);
  CHECK(changes >= 120);
  CHECK(changes <= 150);
  CHECK(stored >= 390); // 400, less those deleted before the baseline read its list
  CHECK(stored <= 410);
  CHECK(metric_sum(m, "tributary_changes_applied_total", {"source=\"sim\"", "change=\"updated\""}) > 0);
  CHECK(metric(m, "tributary_content_bytes_total{source=\"sim\"}") > 400 * 64 - 1);
  // Runs by trigger: the first after start, then the schedule's.
  CHECK(metric_sum(m, "tributary_runs_total", {"source=\"sim\"", "trigger=\"startup\""}) == 1);
  CHECK(metric_sum(m, "tributary_runs_total", {"source=\"sim\"", "trigger=\"schedule\""}) >= 3);
  CHECK(metric_sum(m, "tributary_run_duration_seconds_count", {"mode=\"incremental\""}) >= 3);
  CHECK(m.find("tributary_build_info{version=\"") != std::string::npos);
  // One state vocabulary: the page's, with every state a series.
  CHECK(metric(m, "tributary_source_state{source=\"sim\",state=\"in_sync\"}") == 1);
  CHECK(metric(m, "tributary_source_state{source=\"sim\",state=\"lagging\"}") == 0);
  CHECK(metric(m, "tributary_source_state{source=\"dead\",state=\"failing\"}") == 1);
  // The source that never succeeded lags, and last succeeded, from when it
  // was configured: the alerts can fire for it.
  const double now = static_cast<double>(std::time(nullptr));
  const double last = metric(m, "tributary_source_last_success_timestamp_seconds{source=\"dead\"}");
  CHECK(last > now - 120);
  CHECK(last <= now + 1);
  CHECK(metric(m, "tributary_source_lag_seconds{source=\"dead\"}") >= 0);
  CHECK(metric(m, "tributary_source_ever_succeeded{source=\"dead\"}") == 0);
  CHECK(metric(m, "tributary_source_ever_succeeded{source=\"sim\"}") == 1);
  // The history (what the page's rates come from) agrees, apart likewise.
  const json h = json::parse(call(d.base, "GET", "/api/v1/history?hours=1&source=sim").body);
  uint64_t hist_changes = 0, hist_baseline = 0;
  for (const auto& c : h["data"]["sources"][0]["changes"]) {
    hist_changes += c.get<uint64_t>();
  }
  for (const auto& c : h["data"]["sources"][0]["baseline"]) {
    hist_baseline += c.get<uint64_t>();
  }
  CHECK(static_cast<double>(hist_changes) == changes);
  CHECK(static_cast<double>(hist_baseline) == stored);
  // Runs carry their trigger in the API and the database, with paging.
  const json runs = json::parse(call(d.base, "GET", "/api/v1/sources/sim/runs?limit=2").body);
  REQUIRE(runs["data"]["runs"].size() == 2);
  CHECK(runs["data"]["runs"][0]["trigger"] == "schedule");
  const int64_t next = runs["data"]["next_before"].get<int64_t>();
  const json older = json::parse(
      call(d.base, "GET", "/api/v1/sources/sim/runs?limit=500&before=" + std::to_string(next)).body);
  CHECK(older["data"]["runs"].back()["trigger"] == "startup");
  CHECK(older["data"]["next_before"].is_null());
  const json failed = json::parse(call(d.base, "GET", "/api/v1/sources/dead/runs?status=failed").body);
  CHECK(failed["data"]["runs"].size() >= 1);
  CHECK(scalar(d, "SELECT count(*) FROM sync_run WHERE trigger IS NULL") == "0");
  CHECK(wait_for(d.base, [](const json& st) {
    const json* x = find_source(st, "dead");
    return x && (*x)["state"] == "failing" && !(*x)["failing_since"].is_null() && !(*x)["configured_at"].is_null();
  }, 5));
}

TEST_CASE("Operator: pause holds in PostgreSQL across a restart, resume, retry and audit now, each action in the "
          "source's history with who and when") {
  Upstream up;
  Site site(up);
  site.put_numbered(3);
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  TestDaemon d({{"up", up.url("/")}});
  d.start();
  REQUIRE(wait_for(d.base, [](const json& st) { return in_sync(st, "up", 3); }));
  auto runs = [&d] { return std::stoi(scalar(d, "SELECT count(*) FROM sync_run")); };
  // Pause: no run starts, a sync is refused, the state says paused.
  const Answer p = call(d.base, "POST", "/api/v1/sources/up/pause", {{"Authorization", "Bearer token"}},
                        R"({"reason": "upstream maintenance until 14:00", "by": "alice"})");
  CHECK(p.status == 200);
  CHECK(call(d.base, "POST", "/api/v1/sources/up/pause", {}, "").status == 401);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500)); // a run under way finishes
  const int held = runs();
  std::this_thread::sleep_for(std::chrono::seconds(3)); // interval 1 s: three runs, were it not paused
  CHECK(runs() == held);
  CHECK(call(d.base, "POST", "/api/v1/sources/up/sync", k_admin, "").status == 409);
  json st = status_of(d.base);
  const json* s = find_source(st, "up");
  REQUIRE(s);
  CHECK((*s)["state"] == "paused");
  CHECK((*s)["activity"] == "paused");
  CHECK((*s)["paused"]["reason"] == "upstream maintenance until 14:00");
  CHECK((*s)["paused"]["by"].get<std::string>().rfind("alice from 127.0.0.1", 0) == 0);
  CHECK(metric(metrics_of(d.base), "tributary_source_state{source=\"up\",state=\"paused\"}") == 1);
  // Kept in PostgreSQL: a restart is still paused.
  CHECK(d.stop().second == 0);
  d.start();
  REQUIRE(wait_for(d.base, [](const json& x) {
    const json* u = find_source(x, "up");
    return u && (*u)["state"] == "paused";
  }));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  CHECK(runs() == held);
  // Resume: runs again, first of all the one asked for.
  CHECK(call(d.base, "POST", "/api/v1/sources/up/resume", k_admin, R"({"by": "bob"})").status == 200);
  CHECK(wait_for(d.base, [&](const json&) { return runs() > held; }, 10));
  // Retry now and audit now, as an operator.
  const Answer r = call(d.base, "POST", "/api/v1/sources/up/retry", k_admin, "");
  CHECK(r.status == 202);
  CHECK(call(d.base, "POST", "/api/v1/sources/up/audit", {{"Authorization", "Bearer token"}, {"X-Operator", "carol"}},
             "")
            .status == 202);
  CHECK(wait_for(d.base, [&](const json&) {
    return scalar(d, "SELECT count(*) FROM sync_run WHERE mode = 'audit' AND trigger = 'operator'") == "1";
  }));
  // Every action, with who and when, newest first, in the source's detail.
  const json detail = json::parse(call(d.base, "GET", "/api/v1/sources/up/detail").body);
  std::vector<std::string> actions;
  for (const auto& a : detail["data"]["actions"]) {
    actions.push_back(a["action"].get<std::string>() + " by " + a["by"].get<std::string>().substr(0, 5));
  }
  CHECK(actions == std::vector<std::string>{"audit by carol", "retry by an op", "resume by bob f", "pause by alice"});
  CHECK(d.log_text().find("operator action: resume") != std::string::npos);
}

TEST_CASE("Operator: a reload names the sources it added, removed, disabled and changed, and a refused one is a status "
          "field and a metric") {
  TwoResources source;
  Upstream& up = source.up;
  TestDaemon d({{"a", up.url("/")}, {"b", up.url("/")}, {"c", up.url("/")}});
  d.start();
  REQUIRE(wait_for(d.base, [](const json& st) { return in_sync(st, "a", 2); }));
  CHECK(status_of(d.base)["data"]["reload"].is_null());
  // b removed, c disabled, a changed (its interval), d added.
  json cfg = json::parse(slurp(d.cfg));
  cfg["sources"].erase(1);
  cfg["sources"][0]["interval"] = "2s";
  cfg["sources"][1]["enabled"] = false;
  cfg["sources"].push_back({{"name", "d"}, {"url", up.url("/")}, {"interval", "1s"}});
  std::ofstream(d.cfg) << cfg.dump(2);
  kill(d.pid, SIGHUP);
  REQUIRE(wait_for(d.base, [](const json& st) { return st.is_object() && !st["data"]["reload"].is_null(); }));
  json r = status_of(d.base)["data"]["reload"];
  CHECK(r["ok"] == true);
  CHECK(r["added"] == json::array({"d"}));
  CHECK(r["removed"] == json::array({"b"}));
  CHECK(r["disabled"] == json::array({"c"}));
  CHECK(r["changed"] == json::array({"a"}));
  CHECK(r["error"].is_null());
  CHECK(d.log_text().find("config reloaded: added d; removed b; disabled c; changed a") != std::string::npos);
  std::string m = metrics_of(d.base);
  CHECK(metric(m, "tributary_config_last_reload_successful") == 1);
  CHECK(metric(m, "tributary_config_reloads_total{outcome=\"applied\"}") == 1);
  // The removed source's series are gone.
  CHECK(m.find("source=\"b\"") == std::string::npos);
  // An invalid file: refused, said in the status and /metrics.
  std::ofstream(d.cfg) << "{\"database\": 7, \"sources\": [";
  kill(d.pid, SIGHUP);
  REQUIRE(wait_for(d.base, [](const json& st) { return st.is_object() && st["data"]["reload"]["ok"] == false; }));
  r = status_of(d.base)["data"]["reload"];
  CHECK(r["error"].get<std::string>().find("not valid JSON") != std::string::npos);
  m = metrics_of(d.base);
  CHECK(metric(m, "tributary_config_last_reload_successful") == 0);
  CHECK(metric(m, "tributary_config_reloads_total{outcome=\"refused\"}") == 1);
  CHECK(find_source(status_of(d.base), "d") != nullptr); // still the config before
}

TEST_CASE("Operator: each action through the status page in headless Chromium: the token typed once, kept in "
          "memory only, and every click recorded") {
  Upstream up;
  Site site(up);
  site.put_numbered(3);
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  TestDaemon d({{"up", up.url("/")}}, "page-token");
  d.start();
  REQUIRE(wait_for(d.base, [](const json& st) { return in_sync(st, "up", 3); }));
  ScratchDir dir("operator-page");
  const std::string out = (dir / "steps.jsonl").string();
  const std::string cmd = python3() + " " +
                          (std::filesystem::path(TRIBUTARY_SOURCE_DIR) / "tests/integration/page_actions.py").string() +
                          " '" + d.base + "/status/sources/up' page-token dana buttons 'reason:moving racks' "
                          "click:pause buttons click:resume click:sync click:audit reload buttons > " + out +
                          " 2>" + (dir / "steps.err").string();
  const int rc = std::system(cmd.c_str());
  INFO(slurp(dir / "steps.err"));
  INFO(slurp(out));
  REQUIRE(rc == 0);
  std::vector<json> steps;
  {
    std::ifstream in(out);
    std::string line;
    while (std::getline(in, line)) {
      steps.push_back(json::parse(line));
    }
  }
  REQUIRE(steps.size() == 9);
  CHECK(steps[0]["result"] == "pause sync audit");
  CHECK(steps[2]["result"] == "Pause: done");
  CHECK(steps[3]["result"] == "resume"); // paused: resume is all there is
  CHECK(steps[4]["result"] == "Resume: done");
  CHECK(steps[5]["result"] == "Sync now: done");
  CHECK(steps[6]["result"] == "Audit now: done");
  // The token left the field at once, never went into the address, and
  // nothing was stored: after a reload it must be typed again.
  for (size_t i : {2u, 4u, 5u, 6u}) {
    CHECK(steps[i]["left"] == d.base + "/status/sources/up");
  }
  CHECK(steps[7]["result"] == "[0,0,\"\"]");
  // What the clicks did, as the API and the database say.
  const json detail = json::parse(call(d.base, "GET", "/api/v1/sources/up/detail").body);
  std::vector<std::string> actions;
  for (const auto& a : detail["data"]["actions"]) {
    actions.push_back(a["action"].get<std::string>());
    CHECK(a["by"].get<std::string>().rfind("dana from 127.0.0.1", 0) == 0);
  }
  CHECK(actions == std::vector<std::string>{"audit", "sync", "resume", "pause"});
  CHECK(scalar(d, "SELECT detail FROM operator_action WHERE action = 'pause'") == "moving racks");
  CHECK(scalar(d, "SELECT count(*) FROM source_pause") == "0");
  CHECK(wait_for(d.base, [&](const json&) {
    return scalar(d, "SELECT count(*) FROM sync_run WHERE mode = 'audit' AND trigger = 'operator'") == "1";
  }));
  // A wrong token is refused on the page, and says so.
  const std::string bad = python3() + " " +
                          (std::filesystem::path(TRIBUTARY_SOURCE_DIR) / "tests/integration/page_actions.py").string() +
                          " '" + d.base + "/status/sources/up' wrong eve click:pause > " + out + " 2>&1";
  REQUIRE(std::system(bad.c_str()) == 0);
  CHECK(slurp(out).find("Pause: wrong admin token") != std::string::npos);
  CHECK(scalar(d, "SELECT count(*) FROM source_pause") == "0");
}

TEST_CASE("Operator: errors lead with their kind and cause, then the URL once: a closed port, a 404 and a TLS "
          "failure, alike in the CLI and the status API") {
  ScratchDir dir("operator-errors");
  const std::string cert = (dir / "cert.pem").string(), key = (dir / "key.pem").string();
  REQUIRE(std::system(("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -keyout " + key +
                       " -out " + cert + " >/dev/null 2>&1")
                          .c_str()) == 0);
  httplib::SSLServer tls(cert.c_str(), key.c_str());
  REQUIRE(tls.is_valid());
  const int tls_port = tls.bind_to_any_port("127.0.0.1");
  std::thread tls_thread([&] { tls.listen_after_bind(); });
  Upstream empty; // answers 404 to everything
  const int closed = free_port();
  const std::string dead_url = "http://127.0.0.1:" + std::to_string(closed) + "/";
  const std::string tls_url = "https://127.0.0.1:" + std::to_string(tls_port) + "/";
  TestDaemon d({{"closed", dead_url}, {"missing", empty.url("/")}, {"selfsigned", tls_url}});
  // The CLI, once each.
  const Run cli = run_tributary("sync --config " + d.cfg + " --incremental");
  INFO(cli.out);
  CHECK(cli.status == 1);
  const std::regex refused("  error: connection refused: 127\\.0\\.0\\.1:" + std::to_string(closed) +
                           " \\([0-9]+ attempts over [0-9]+ s\\); no Capability List found ");
  CHECK(std::regex_search(cli.out, refused));
  CHECK(cli.out.find("  error: HTTP 404 for " + empty.url("/")) != std::string::npos);
  CHECK(cli.out.find("  error: TLS certificate not trusted: 127.0.0.1:" + std::to_string(tls_port)) !=
        std::string::npos);
  CHECK(cli.out.find("GET ") == std::string::npos); // no method before the cause
  // explore says it the same way.
  const Run ex = run_tributary("explore " + dead_url);
  CHECK(ex.out.find("tributary explore: unreachable: connection refused: 127.0.0.1:" + std::to_string(closed)) !=
        std::string::npos);
  CHECK(cli.out.find("Connection (after") == std::string::npos);
  // The daemon's runs say the same, and their messages hold no counts.
  d.start();
  REQUIRE(wait_for(d.base, [](const json& st) {
    int failing = 0;
    for (const char* n : {"closed", "missing", "selfsigned"}) {
      const json* s = find_source(st, n);
      failing += s && !(*s)["last_failure"].is_null() ? 1 : 0;
    }
    return failing == 3;
  }, 60));
  const json st = status_of(d.base);
  const std::string closed_error = (*find_source(st, "closed"))["last_failure"]["error"];
  const std::string missing_error = (*find_source(st, "missing"))["last_failure"]["error"];
  const std::string tls_error = (*find_source(st, "selfsigned"))["last_failure"]["error"];
  CHECK(closed_error.rfind("connection refused: 127.0.0.1:" + std::to_string(closed) + " (", 0) == 0);
  CHECK(missing_error.rfind("HTTP 404 for " + empty.url("/"), 0) == 0);
  CHECK(tls_error.rfind("TLS certificate not trusted: 127.0.0.1:" + std::to_string(tls_port), 0) == 0);
  for (const std::string& e : {closed_error, missing_error, tls_error}) {
    CHECK(e.find("created ") == std::string::npos);
    CHECK(e.find('\n') == std::string::npos); // one line
  }
  // The URL once in the 404's words (its first try), not three times.
  size_t times = 0;
  for (const char* after : {" ", ";", ")"}) {
    for (size_t at = missing_error.find(empty.url("/") + after); at != std::string::npos;
         at = missing_error.find(empty.url("/") + after, at + 1)) {
      ++times;
    }
  }
  CHECK(times == 1);
  tls.stop();
  tls_thread.join();
}

TEST_CASE("Operator: a source removed from the config leaves our Source Description at once, its documents answer "
          "410 Gone, its series go, and gc (after removed_source_retention) or retire (at once) purges its data") {
  TwoResources source;
  const std::string url = source.up.url("/");
  TestDaemon d({{"a", url}, {"b", url}, {"c", url}});
  d.start();
  REQUIRE(wait_for(d.base, [](const json& st) {
    return in_sync(st, "a", 2) && in_sync(st, "b", 2) && in_sync(st, "c", 2);
  }));
  REQUIRE(wait_for(d.base, [&](const json&) {
    return call(d.base, "GET", "/sets/b/capabilitylist.xml").status == 200 &&
           call(d.base, "GET", "/.well-known/resourcesync").body.find("/sets/c/capabilitylist.xml") != std::string::npos;
  }));
  // b and c leave the config (b's data kept a second past its removal).
  json cfg = json::parse(slurp(d.cfg));
  cfg["sources"] = json::array({cfg["sources"][0]});
  cfg["removed_source_retention"] = "1s";
  std::ofstream(d.cfg) << cfg.dump(2);
  kill(d.pid, SIGHUP);
  REQUIRE(wait_for(d.base, [&](const json&) {
    return call(d.base, "GET", "/.well-known/resourcesync").body.find("/sets/b/") == std::string::npos;
  }, 10));
  const std::string description = call(d.base, "GET", "/.well-known/resourcesync").body;
  CHECK(description.find("/sets/a/capabilitylist.xml") != std::string::npos);
  CHECK(description.find("/sets/c/") == std::string::npos);
  for (const char* path : {"/sets/b/capabilitylist.xml", "/sets/b/resourcelist.xml", "/sets/b/changelist.xml",
                           "/sets/c/capabilitylist.xml"}) {
    CHECK_MESSAGE(call(d.base, "GET", path).status == 410, path);
  }
  CHECK(call(d.base, "GET", "/sets/a/capabilitylist.xml").status == 200);
  CHECK(call(d.base, "GET", "/sets/nope/capabilitylist.xml").status == 404); // never ours: not gone, missing
  // Its resources too (held, and never held), and its Change Discovery stream.
  const std::string held = "/sets/b/resources/" + tributary::percent_encode(source.up.url("/res/0.txt"));
  CHECK(call(d.base, "GET", "/sets/a/resources/" + tributary::percent_encode(source.up.url("/res/0.txt"))).status == 200);
  CHECK(call(d.base, "GET", held).status == 410);
  CHECK(call(d.base, "GET", "/sets/b/resources/" + tributary::percent_encode(source.up.url("/never"))).status == 410);
  CHECK(call(d.base, "GET", "/sets/b/activity/collection.json").status == 410);
  CHECK(call(d.base, "GET", "/api/v1/sources/b").status == 404);
  const std::string m = metrics_of(d.base);
  CHECK(m.find("source=\"b\"") == std::string::npos);
  CHECK(m.find("source=\"c\"") == std::string::npos);
  CHECK(scalar(d, "SELECT string_agg(source, ',' ORDER BY source) FROM source_removed") == "b,c");
  CHECK(d.log_text().find("[b] source removed from the config: no longer published") != std::string::npos);
  // retire: refused for a configured source, at once for a removed one.
  const Run refused = run_tributary("retire --config " + d.cfg + " a");
  CHECK(refused.status == 2);
  const Run retired = run_tributary("retire --config " + d.cfg + " c");
  INFO(retired.out);
  CHECK(retired.status == 0);
  CHECK(scalar(d, "SELECT count(*) FROM source WHERE name = 'c'") == "0");
  CHECK(run_tributary("retire --config " + d.cfg + " c").status == 1); // nothing left of it
  // Retired within its retention: still 410, not 404 (the daemon reads the
  // marks at its next refresh).
  CHECK(eventually([&] { return call(d.base, "GET", "/sets/c/capabilitylist.xml").status == 410; }, 10));
  CHECK(call(d.base, "GET", "/sets/c/resources/" + tributary::percent_encode(source.up.url("/res/0.txt"))).status == 410);
  // gc: b's retention (1 s) has passed.
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  const Run gc = run_tributary("gc --config " + d.cfg + " --grace 0s");
  INFO(gc.out);
  CHECK(gc.status == 0);
  CHECK(gc.out.find("purged removed source b") != std::string::npos);
  CHECK(gc.out.find("removed source c (retired) is past removed_source_retention") != std::string::npos);
  CHECK(scalar(d, "SELECT count(*) FROM source WHERE name = 'b'") == "0");
  CHECK(scalar(d, "SELECT count(*) FROM source_removed") == "0");
  // Their resources and change log went with their feeds (a trigger since
  // schema 0023, a foreign key before it).
  CHECK(scalar(d, "SELECT count(*) FROM resource WHERE feed_id NOT IN (SELECT id FROM feed)") == "0");
  CHECK(scalar(d, "SELECT count(*) FROM change_log WHERE feed_id NOT IN (SELECT id FROM feed)") == "0");
  CHECK(scalar(d, "SELECT count(*) FROM resource r JOIN feed f ON f.id = r.feed_id JOIN source s ON s.id = f.source_id "
                  "WHERE s.name = 'a'") == "2"); // a untouched
  CHECK(call(d.base, "GET", "/sets/a/capabilitylist.xml").status == 200);
}

TEST_CASE("Operator: notifications that arrive during a run are coalesced into one follow-up run, its trigger push") {
  // A Source pushing every change at once through its hub, 200 changes a
  // notification each, about one every 5 ms: faster than runs end.
  tributary::agg::SimulateOptions o;
  o.port = 0;
  o.resources = 200;
  o.change_rate = 0; // changes only when the test makes them
  o.hub = true;
  tributary::agg::Simulator sim(o);
  REQUIRE(sim.start());
  TestDaemon d({{"sim", sim.base_url() + "/"}});
  edit_config(d, [](json& j) {
    j["sources"][0]["interval"] = "1h"; // push alone brings the changes
    j["push"] = {{"sign", true}, {"poll_interval", "1h"}};
  });
  start_in_sync(d, "sim", 200);
  REQUIRE(eventually([&] { return scalar(d, "SELECT state FROM push_subscription") == "active"; }, 15));
  const std::string runs_before = scalar(d, "SELECT count(*) FROM sync_run");
  for (int i = 0; i < 200; ++i) {
    sim.change(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const uint64_t live = sim.live();
  REQUIRE(wait_for(d.base, [&](const json& st) { return in_sync(st, "sim", live); }, 20));
  // The last notification's run has ended: nothing waits.
  REQUIRE(eventually([&] {
    return scalar(d, "SELECT count(*) FROM sync_run WHERE status = 'running'") == "0";
  }, 10));
  INFO(d.log_text());
  const int notified = std::stoi(scalar(d, "SELECT notifications FROM push_subscription"));
  const int push_runs = std::stoi(scalar(d, "SELECT count(*) FROM sync_run WHERE trigger = 'push'"));
  const int other_runs =
      std::stoi(scalar(d, "SELECT count(*) FROM sync_run WHERE trigger <> 'push' AND id > " + runs_before));
  MESSAGE(notified << " notifications accepted, " << push_runs << " runs triggered by push, " << other_runs
                   << " by anything else");
  CHECK(notified >= 100);
  CHECK(push_runs >= 1);
  // One run at a time, and at most one waiting behind it however many
  // notifications came during it: fewer runs than notifications. (How many
  // fewer depends on how long a run takes: a third as many when an
  // incremental run took 15 ms, and 71 runs of 200 notifications once runs
  // took about the 5 ms between them.)
  CHECK(push_runs * 3 <= notified * 2);
  CHECK(other_runs == 0);
  CHECK(scalar(d, "SELECT count(*) FROM sync_run a JOIN sync_run b ON a.id < b.id AND a.source_id = b.source_id "
                  "AND b.started_at < a.finished_at") == "0");
  // The last notification was followed by a run that began after it.
  CHECK(scalar(d, "SELECT (SELECT max(started_at) FROM sync_run WHERE trigger = 'push') >= "
                  "(SELECT last_notification_at FROM push_subscription)") == "t");
  // Every change was applied: 200 made, each in the change log after the
  // baseline's 200.
  CHECK(std::stoi(scalar(d, "SELECT count(*) FROM change_log")) >= 400);
  sim.stop();
}

TEST_CASE("Operator: lag means behind: a quiet source polled on time lags about one interval (however old its "
          "newest change), paused and disabled ones have no lag in the API or /metrics, and a failing one's grows") {
  TwoResources source; // changes dated 2026-01-01, never again: a quiet Source
  const std::string url = source.up.url("/");
  const int dead = free_port();
  TestDaemon d({{"quiet", url}, {"paused", url}, {"off", url}, {"down", "http://127.0.0.1:" + std::to_string(dead) + "/"}});
  edit_config(d, [](json& j) {
    for (auto& s : j["sources"]) {
      s["interval"] = "2s";
    }
    j["sources"][2]["enabled"] = false;
  });
  d.start();
  REQUIRE(wait_for(d.base, [](const json& st) { return in_sync(st, "quiet", 2) && in_sync(st, "paused", 2); }));
  REQUIRE(call(d.base, "POST", "/api/v1/sources/paused/pause", k_admin, R"({"reason": "maintenance"})").status == 200);
  // Long enough that a lag counted from the newest change (or from the
  // first sync) would be plainly more than an interval.
  std::this_thread::sleep_for(std::chrono::seconds(8));
  const json st = status_of(d.base);
  auto lag = [&](const std::string& name) { return find_source(st, name)->at("lag").at("seconds"); };
  INFO(st.dump());
  REQUIRE(lag("quiet").is_number());
  CHECK(lag("quiet").get<double>() < 2 + 3); // its interval, and the run's own time
  CHECK(find_source(st, "quiet")->at("state") == "in_sync");
  CHECK(lag("paused").is_null());
  CHECK(lag("off").is_null());
  REQUIRE(lag("down").is_number());
  CHECK(lag("down").get<double>() >= 8); // never succeeded: since it was configured
  CHECK(find_source(st, "down")->at("state") != "in_sync");
  const std::string m = metrics_of(d.base);
  CHECK(metric(m, "tributary_source_lag_seconds{source=\"quiet\"}") >= 0);
  CHECK(metric(m, "tributary_source_lag_seconds{source=\"quiet\"}") < 5);
  CHECK(m.find("tributary_source_lag_seconds{source=\"paused\"}") == std::string::npos);
  CHECK(m.find("tributary_source_lag_seconds{source=\"off\"}") == std::string::npos);
  CHECK(metric(m, "tributary_source_lag_seconds{source=\"down\"}") >= 8);
  CHECK(metric(m, "tributary_source_state{source=\"paused\",state=\"paused\"}") == 1);
  CHECK(metric(m, "tributary_source_state{source=\"off\",state=\"disabled\"}") == 1);
  // The quiet source's page folds its runs that changed nothing into one
  // line: the first run (its baseline) stays a line of its own.
  ScratchDir dir("operator-runs");
  const std::string out = (dir / "runs.jsonl").string();
  const std::string cmd =
      python3() + " " + (std::filesystem::path(TRIBUTARY_SOURCE_DIR) / "tests/integration/page_actions.py").string() +
      " '" + d.base + "/status/sources/quiet' - - wait:1500 "
      "'eval:[...document.querySelectorAll(\"#runs tr[data-runs]\")].map(r => r.dataset.runs).join(\",\")' "
      "'eval:document.querySelectorAll(\"#runs tr[data-run]\").length' > " + out + " 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  const std::string text = slurp(out);
  INFO(text);
  std::vector<json> steps;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    steps.push_back(json::parse(line));
  }
  REQUIRE(steps.size() == 3);
  const std::string folded = steps[1]["result"];
  CHECK(!folded.empty());
  CHECK(folded.find(',') == std::string::npos); // one line for all of them
  CHECK(std::stoi(folded) >= 3);
  CHECK(steps[2]["result"] == 1); // the baseline
}

TEST_CASE("Operator: a plain sitemap's first sync is a baseline, counted as one, not as changes") {
  Upstream up;
  std::string urls;
  for (int i = 0; i < 12; ++i) {
    up.set("/page/" + std::to_string(i), "page " + std::to_string(i), "text/html");
    urls += "<url><loc>" + up.url("/page/" + std::to_string(i)) + "</loc></url>";
  }
  up.set("/sitemap.xml",
         "<?xml version=\"1.0\"?><urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">" + urls + "</urlset>",
         "application/xml");
  TestDaemon d({{"site", up.url("/")}});
  d.start();
  REQUIRE(wait_for(d.base, [](const json& st) { return in_sync(st, "site", 12); }));
  const std::string m = metrics_of(d.base);
  CHECK(metric(m, "tributary_changes_applied_total{source=\"site\",mode=\"baseline\",change=\"created\"}") == 12);
  CHECK(metric(m, "tributary_changes_applied_total{source=\"site\",mode=\"incremental\",change=\"created\"}") == 0);
  CHECK(find_source(status_of(d.base), "site")->at("kind") == "plain-sitemap");
  // Recorded as the baseline it was (it was queued as an incremental run).
  const json runs = json::parse(call(d.base, "GET", "/api/v1/sources/site/runs?limit=500").body);
  CHECK(runs["data"]["runs"].back()["mode"] == "baseline");
  CHECK(runs["data"]["runs"].back()["trigger"] == "startup");
}

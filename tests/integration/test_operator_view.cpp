// The operator's view of one daemon following every kind of source at once
// (#53's "done when"): quiet, busy, paused, disabled, failing, deletions
// held and content stuck in retry, read through the API, /metrics, the
// page (headless Chromium) and the shipped alert rules (promtool, on the
// live daemon's own series).
#include "daemon_client.h"
#include "process.h"
#include "sync_fixture.h"
#include "../common/files.h"
#include "../common/scratch_dir.h"

#include <doctest/doctest.h>

#include <cmath>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>

using namespace tributary::test;

namespace {

// The page's view, through the DevTools protocol: each expression's value.
std::vector<json> page_values(const std::string& url, const std::vector<std::string>& exprs,
                              const std::filesystem::path& dir) {
  const std::string out = (dir / "page.jsonl").string();
  std::string cmd = python3() + " " +
                    (std::filesystem::path(TRIBUTARY_SOURCE_DIR) / "tests/integration/page_actions.py").string() +
                    " '" + url + "' - - wait:1500";
  for (const auto& e : exprs) {
    cmd += " 'eval:" + e + "'";
  }
  cmd += " > " + out + " 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string text = slurp(out);
  INFO(text);
  REQUIRE(rc == 0);
  std::vector<json> values;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    values.push_back(json::parse(line)["result"]);
  }
  REQUIRE(values.size() == exprs.size() + 1);
  values.erase(values.begin()); // the wait
  return values;
}

// A promtool unit test of the shipped rules whose input is the live
// daemon's tributary_source_* series held for two hours as they stand now
// (timestamps moved so that their age at the evaluation is their age now),
// expecting `alerts` (promtool's YAML) at two hours and none of the others.
std::string promtool_test(const std::string& metrics, double now, const std::string& alerts) {
  const int eval = 7200;
  std::ostringstream y;
  y << "rule_files:\n  - " << TRIBUTARY_SOURCE_DIR << "/deploy/monitoring/tributary-alerts.yml\n"
    << "evaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n";
  std::istringstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("tributary_source_", 0) != 0) {
      continue;
    }
    const auto sp = line.rfind(' ');
    const std::string series = line.substr(0, sp);
    double v = std::stod(line.substr(sp + 1));
    if (series.find("_timestamp_seconds") != std::string::npos) {
      v = eval + (v - now);
    }
    std::ostringstream value;
    value.precision(15);
    value << v;
    y << "      - series: '" << series << "'\n        values: '" << value.str() << "x150'\n";
  }
  y << "    alert_rule_test:\n" << alerts;
  return y.str();
}

} // namespace

TEST_CASE("Operator view: quiet, busy, paused, disabled, failing, held and stuck sources on one daemon: lag within "
          "an interval, no lag for paused and disabled, the right alerts, rates true from the first minute") {
  ScratchDir dir("operator-view");
  // busy: a simulated Source making 4 changes/s, all the while.
  const int sim_port = free_port();
  pid_t sim = spawn_tributary({"simulate", "--listen", "127.0.0.1:" + std::to_string(sim_port), "--resources", "200",
                               "--change-rate", "4", "--size", "64", "--part-size", "500", "--seed", "5"},
                              (dir / "sim.log").string());
  ProcessGuard sim_guard(sim);
  // quiet, paused, disabled: a Source that changed once, long ago.
  Upstream quiet_up;
  Site quiet(quiet_up);
  quiet.put_numbered(2);
  quiet.publish_start(ts("2026-01-01T00:00:00Z"));
  // held: a Source whose Resource List will suddenly list nothing.
  Upstream held_up;
  Site held(held_up);
  held.put_numbered(4);
  held.publish_start(ts("2026-01-01T00:00:00Z"));
  // stuck: one of its two resources' content is gone for good.
  Upstream stuck_up;
  Site stuck(stuck_up);
  stuck.put_numbered(2);
  stuck.publish_start(ts("2026-01-01T00:00:00Z"));
  stuck_up.remove("/res/1.txt");
  // failing: answers 404 to everything.
  Upstream failing_up;

  const std::string q = quiet_up.url("/");
  TestDaemon d({{"quiet", q},
                {"busy", "http://127.0.0.1:" + std::to_string(sim_port) + "/"},
                {"paused", q},
                {"off", q},
                {"failing", failing_up.url("/")},
                {"held", held_up.url("/")},
                {"stuck", stuck_up.url("/")}});
  edit_config(d, [](json& j) {
    j["max_concurrent_syncs"] = 8;
    for (auto& s : j["sources"]) {
      s["interval"] = s["name"] == "busy" ? "1s" : "2s";
      s["retry_attention_after"] = "3s";
    }
    j["sources"][3]["enabled"] = false;
  });
  d.start();
  const auto started = std::chrono::steady_clock::now();
  REQUIRE(wait_for(d.base, [](const json& st) {
    return in_sync(st, "quiet", 2) && in_sync(st, "paused", 2) && in_sync(st, "held", 4) &&
           in_sync(st, "stuck", 1) && find_source(st, "busy") && !(*find_source(st, "busy"))["last_success"].is_null();
  }, 40));
  REQUIRE(call(d.base, "POST", "/api/v1/sources/paused/pause", k_admin, R"({"reason": "maintenance"})").status == 200);
  // held: its list empties, and a baseline holds the deletions.
  for (int i = 0; i < 4; ++i) {
    held.erase("/res/" + std::to_string(i) + ".txt");
  }
  held.publish_resource_list(ts("2026-01-02T00:00:00Z"));
  REQUIRE(call(d.base, "POST", "/api/v1/sources/held/sync", k_admin, R"({"mode": "baseline"})").status == 202);
  // failing: three failed runs in a row (the alert's threshold), by asking
  // for runs rather than waiting out the back-off.
  for (int i = 0; i < 20; ++i) {
    const json st = status_of(d.base);
    const json* f = find_source(st, "failing");
    if (f && (*f)["consecutive_failures"].get<int>() >= 3) {
      break;
    }
    if (f && (*f)["activity"] != "syncing") {
      call(d.base, "POST", "/api/v1/sources/failing/sync", k_admin, R"({"mode": "incremental"})");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  // Past the first minute, so that the page shows rates.
  std::this_thread::sleep_until(started + std::chrono::seconds(75));
  INFO(d.log_text());

  // The API.
  const json st = status_of(d.base);
  INFO(st.dump());
  auto src = [&](const std::string& name) { return *find_source(st, name); };
  for (const std::string name : {"quiet", "busy"}) {
    CAPTURE(name);
    REQUIRE(src(name)["lag"]["seconds"].is_number());
    const double interval = name == "busy" ? 1 : 2;
    CHECK(src(name)["lag"]["seconds"].get<double>() < interval + 3); // an interval, and the run's own time
  }
  CHECK(src("quiet")["state"] == "in_sync");
  CHECK(src("paused")["state"] == "paused");
  CHECK(src("paused")["lag"]["seconds"].is_null());
  CHECK(src("off")["state"] == "disabled");
  CHECK(src("off")["lag"]["seconds"].is_null());
  CHECK(src("failing")["state"] == "failing");
  CHECK(src("failing")["consecutive_failures"].get<int>() >= 3);
  CHECK(src("held")["state"] == "attention");
  CHECK(src("held")["state_reason"].get<std::string>().find("4 deletion(s) held") != std::string::npos);
  CHECK(src("stuck")["state"] == "attention");
  CHECK(src("stuck")["state_reason"].get<std::string>().find("longer than retry_attention_after") !=
        std::string::npos);
  CHECK(src("stuck")["resources"]["retrying"] == 1);
  CHECK(src("stuck")["resources"]["retrying_since"].is_string());
  // Every first sync is recorded as the baseline it was.
  CHECK(scalar(d, "SELECT r.mode FROM sync_run r JOIN source s ON s.id = r.source_id WHERE s.name = 'busy' "
                  "ORDER BY r.id LIMIT 1") == "baseline");

  // /metrics.
  const std::string m = call(d.base, "GET", "/metrics").body;
  const double now = static_cast<double>(std::time(nullptr));
  CHECK(metric(m, "tributary_source_lag_seconds{source=\"quiet\"}") < 5);
  CHECK(metric(m, "tributary_source_lag_seconds{source=\"busy\"}") < 4);
  CHECK(m.find("tributary_source_lag_seconds{source=\"paused\"}") == std::string::npos);
  CHECK(m.find("tributary_source_lag_seconds{source=\"off\"}") == std::string::npos);
  CHECK(metric(m, "tributary_source_state{source=\"held\",state=\"attention\"}") == 1);
  CHECK(metric(m, "tributary_source_deletions_held{source=\"held\"}") == 4);
  CHECK(metric(m, "tributary_source_state{source=\"stuck\",state=\"attention\"}") == 1);
  CHECK(metric(m, "tributary_source_retrying_oldest_seconds{source=\"stuck\"}") > 3);
  CHECK(metric(m, "tributary_source_retrying_oldest_seconds{source=\"quiet\"}") == 0);

  // The alert rules on these very series: the failing source's alert, the
  // held deletions', the stuck content's; nothing for quiet, busy, paused
  // or disabled ones.
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    MESSAGE("promtool not installed: deploy/install-deps.sh installs it (package prometheus)");
  } else {
    const auto failures =
        static_cast<long long>(metric(m, "tributary_source_consecutive_failures{source=\"failing\"}"));
    const std::string expected =
        "      - eval_time: 2h\n        alertname: TributarySourceFailing\n        exp_alerts:\n"
        "          - exp_labels: {severity: warning, source: failing}\n            exp_annotations:\n"
        "              summary: \"Source failing has failed " + std::to_string(failures) + " runs in a row\"\n"
        "              description: \"GET /api/v1/sources/failing/runs gives each run's errors; the status page "
        "shows the last one.\"\n"
        "      - eval_time: 2h\n        alertname: TributaryDeletionsHeld\n        exp_alerts:\n"
        "          - exp_labels: {severity: info, source: held}\n            exp_annotations:\n"
        "              summary: \"Source held: 4 deletions wait for an operator's confirmation\"\n"
        "              description: \"POST /api/v1/sources/held/confirm-deletions or refuse-deletions (the source's "
        "page has both).\"\n"
        "      - eval_time: 2h\n        alertname: TributarySourceNeedsAttention\n        exp_alerts:\n"
        "          - exp_labels: {severity: info, source: stuck, state: attention}\n            exp_annotations:\n"
        "              summary: \"Source stuck needs attention\"\n"
        "              description: \"Its status page (or GET /api/v1/sources/stuck) says why: content failing for "
        "longer than retry_attention_after, or its clock ahead.\"\n"
        "      - eval_time: 2h\n        alertname: TributarySourceLagging\n        exp_alerts: []\n"
        "      - eval_time: 2h\n        alertname: TributaryNoSuccess\n        exp_alerts: []\n"
        "      - eval_time: 2h\n        alertname: TributaryRetryingGrowing\n        exp_alerts: []\n";
    const auto file = dir / "live.test.yml";
    std::ofstream(file) << promtool_test(m, now, expected);
    const std::string out = (dir / "promtool.out").string();
    const int rc = std::system(("promtool test rules " + file.string() + " > " + out + " 2>&1").c_str());
    INFO(slurp(out));
    INFO(slurp(file));
    CHECK(rc == 0);
  }

  // The page: each source's state, the summary's counts, and its rate of
  // changes against the change log's, counted from the daemon's start.
  const auto page = page_values(
      d.base + "/status",
      {"JSON.stringify(Object.fromEntries([...document.querySelectorAll(\"#sources tr[data-source]\")]"
       ".map(r => [r.dataset.source, r.dataset.syncState])))",
       "JSON.stringify(Object.fromEntries([...document.querySelectorAll(\"#summary [data-count]\")]"
       ".map(b => [b.dataset.count, Number(b.querySelector(\"b\").textContent)])))",
       "JSON.stringify({rate: rateOf(\"busy\", \"changes\"), shown: document.getElementById(\"total-rate\")"
       ".textContent, now: view.status.now, started: view.status.node.started_at})"},
      dir.path);
  const json states = json::parse(page[0].get<std::string>());
  const json counts = json::parse(page[1].get<std::string>());
  const json rate = json::parse(page[2].get<std::string>());
  INFO(states.dump(), counts.dump(), rate.dump());
  CHECK(states["quiet"] == "in_sync");
  CHECK(states["paused"] == "paused");
  CHECK(states["off"] == "disabled");
  CHECK(states["failing"] == "failing");
  CHECK(states["held"] == "attention");
  CHECK(states["stuck"] == "attention");
  CHECK(counts["attention"] == 2);
  CHECK(counts["failing"] == 1);
  CHECK(counts["paused"] == 1);
  CHECK(counts["disabled"] == 1);
  CHECK(counts["in_sync"].get<int>() + counts["lagging"].get<int>() == 2);
  // The change log's own count of the busy source's changes after its
  // first run (its baseline), up to the page's now, per minute since the
  // daemon started.
  REQUIRE(rate["rate"].is_number());
  const std::string page_now = rate["now"], started_at = rate["started"];
  const double logged = std::stod(scalar(
      d, "SELECT count(*) FROM change_log c JOIN feed f ON f.id = c.feed_id JOIN source s ON s.id = f.source_id "
         "WHERE s.name = 'busy' AND c.recorded_at <= '" + page_now + "' AND c.recorded_at > (SELECT finished_at "
         "FROM sync_run WHERE source_id = s.id ORDER BY id LIMIT 1)"));
  const double minutes = std::stod(scalar(
      d, "SELECT extract(epoch FROM '" + page_now + "'::timestamptz - '" + started_at + "'::timestamptz) / 60"));
  const double truth = logged / minutes;
  CAPTURE(logged);
  CAPTURE(minutes);
  CHECK(logged > 100);
  CHECK(std::abs(rate["rate"].get<double>() - truth) <= 0.05 * truth);
  CHECK(std::abs(std::stod(rate["shown"].get<std::string>()) - truth) <= 0.05 * truth);
}

// Issue #17: the monitoring people already run. The Prometheus alert rules
// and the Grafana dashboard in deploy/monitoring/ use only metrics a live
// daemon exposes; promtool (Prometheus's own tool, when installed) accepts
// our /metrics, the rules, and the rules' unit tests.
#include "../common/scratch_dir.h"
#include "../common/files.h"
#include "daemon_client.h"
#include "http_get.h"
#include "process.h"
#include "sync_fixture.h"

#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <memory>
#include <set>

#include <sys/wait.h>

using namespace tributary;
using namespace tributary::test;

namespace {

const std::filesystem::path k_monitoring = std::filesystem::path(TRIBUTARY_SOURCE_DIR) / "deploy" / "monitoring";

// The metric names an expression (or any text) uses.
void metric_names(const std::string& text, std::set<std::string>& out) {
  static const std::regex k_name(R"(\b(tributary|process)_[a-z0-9_]+)");
  for (std::sregex_iterator it(text.begin(), text.end(), k_name), end; it != end; ++it) {
    out.insert(it->str());
  }
}

void exprs_of(const json& j, std::set<std::string>& out) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      if (k == "expr" && v.is_string()) {
        metric_names(v.get<std::string>(), out);
      } else {
        exprs_of(v, out);
      }
    }
  } else if (j.is_array()) {
    for (const auto& v : j) {
      exprs_of(v, out);
    }
  }
}

bool have_promtool() { return std::system("command -v promtool >/dev/null 2>&1") == 0; }

int sh(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// A Source with a hub (a Tributary, Z), and a Tributary (A) subscribed to
// it: source, host, push and hub series and answers all present.
struct Subscribed {
  Upstream up;
  Site site{up};
  std::unique_ptr<TestDaemon> z_owner;
  std::unique_ptr<TestDaemon> a_owner;
  TestDaemon& z;
  TestDaemon& a;
  Subscribed() : z_owner(start_z()), a_owner(std::make_unique<TestDaemon>(std::vector<std::pair<std::string, std::string>>{
                                         {"z", z_owner->base + "/.well-known/resourcesync"}})),
                 z(*z_owner), a(*a_owner) {
    a.start();
    REQUIRE(wait_for(a.base, [](const json& st) { return in_sync(st, "z", 1); }));
    REQUIRE(eventually([&] {
      return http_get(a.base + "/metrics").body.find("tributary_push_subscription_active{source=\"z\"") !=
             std::string::npos;
    }, 20));
    // A counts its subscription active when Z's hub asks it to confirm; Z
    // records the subscriber only after that answer.
    REQUIRE(eventually([&] {
      const json p = json::parse(http_get(z.base + "/api/v1/push").body, nullptr, false);
      return p.is_object() && p["data"]["subscribers"].size() >= 1;
    }, 20));
  }

private:
  std::unique_ptr<TestDaemon> start_z() {
    site.put("/res/0.txt", "zero");
    site.publish_start(ts("2026-01-01T00:00:00Z"));
    auto d = std::make_unique<TestDaemon>(std::vector<std::pair<std::string, std::string>>{{"up", up.url("/")}});
    edit_config(*d, [](json& j) { j["push"] = {{"callback_allow_hosts", {"127.0.0.1"}}}; });
    d->start();
    REQUIRE(wait_for(d->base, [](const json& st) { return in_sync(st, "up", 1); }));
    return d;
  }
};

} // namespace

TEST_CASE("Monitoring: every metric the alert rules and the Grafana dashboard use is on a live daemon's /metrics, "
          "and promtool accepts /metrics, the rules and their unit tests") {
  Subscribed pair;
  TestDaemon& a = pair.a;
  const Got metrics = http_get(a.base + "/metrics");

  std::set<std::string> used;
  const std::string rules = slurp(k_monitoring / "tributary-alerts.yml");
  REQUIRE_FALSE(rules.empty());
  metric_names(rules, used);
  const json dashboard = json::parse(slurp(k_monitoring / "tributary-dashboard.json"));
  CHECK(dashboard["panels"].size() >= 10);
  exprs_of(dashboard, used);
  CHECK(used.size() >= 15);
  for (const auto& name : used) {
    INFO(name);
    // A histogram's series (_bucket, _sum, _count) are typed under its name.
    std::string family = name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string sfx(suffix);
      if (family.size() > sfx.size() && family.compare(family.size() - sfx.size(), sfx.size(), sfx) == 0 &&
          metrics.body.find("# TYPE " + family.substr(0, family.size() - sfx.size()) + " histogram") !=
              std::string::npos) {
        family = family.substr(0, family.size() - sfx.size());
      }
    }
    CHECK(metrics.body.find("# TYPE " + family + " ") != std::string::npos);
  }
  // What the alerts watch, by name (the issue's four at least).
  for (const char* name : {"tributary_source_consecutive_failures", "tributary_source_lag_seconds",
                           "tributary_source_retrying_resources", "tributary_data_dir_free_bytes"}) {
    CHECK(used.count(name) == 1);
  }

  if (!have_promtool()) {
    MESSAGE("promtool not installed: deploy/install-deps.sh installs it (package prometheus)");
    return;
  }
  ScratchDir dir("monitoring");
  std::ofstream(dir / "metrics.txt") << metrics.body;
  CHECK(sh("promtool check metrics < " + (dir / "metrics.txt").string()) == 0);
  CHECK(sh("promtool check rules " + (k_monitoring / "tributary-alerts.yml").string()) == 0);
  CHECK(sh("cd " + k_monitoring.string() + " && promtool test rules tributary-alerts.test.yml") == 0);
}

TEST_CASE("OpenAPI: every answer of the status API, success and error, matches docs/openapi.json, and every "
          "documented operation is exercised") {
  Subscribed pair;
  const std::string base = pair.a.base;
  const httplib::Headers admin{{"Authorization", "Bearer token"}};
  struct Ask {
    const char* method;
    std::string path;
    httplib::Headers headers;
    std::string body;
    int expect;
  };
  const std::vector<Ask> asks = {
      {"GET", "/api/v1/status", {}, "", 200},
      {"GET", "/api/v1/sources/z", {}, "", 200},
      {"GET", "/api/v1/sources/z/runs", {}, "", 200},
      {"GET", "/api/v1/sources/nope", {}, "", 404},
      {"GET", "/api/v1/push", {}, "", 200},
      {"GET", "/api/v1/hosts", {}, "", 200},
      {"GET", "/healthz", {}, "", 200},
      {"GET", "/readyz", {}, "", 200},
      {"GET", "/metrics", {}, "", 200},
      {"GET", "/status", {}, "", 200},
      {"GET", "/status/sources/z", {}, "", 200},
      {"GET", "/api/v1/sources/z/detail", {}, "", 200},
      {"GET", "/api/v1/sources/nope/detail", {}, "", 404},
      {"GET", "/api/v1/history", {}, "", 200},
      {"GET", "/api/v1/history?hours=2&step=600&source=z", {}, "", 200},
      {"GET", "/api/v1/history?hours=0", {}, "", 400},
      {"GET", "/api/v1/history?step=100", {}, "", 400},
      {"GET", "/api/v1/history?source=nope", {}, "", 404},
      {"POST", "/api/v1/sources/z/sync", {}, "", 401},
      {"POST", "/api/v1/sources/z/sync", admin, R"({"mode": "sideways"})", 400},
      {"POST", "/api/v1/sources/z/sync", admin, R"({"mode": "audit"})", 202},
      {"POST", "/api/v1/sources/z/confirm-deletions", admin, "", 409},
      {"POST", "/api/v1/sources/z/refuse-deletions", admin, "", 409},
      {"POST", "/api/v1/sources/z/refuse-deletions", {}, "", 401},
      {"POST", "/api/v1/sources/z/audit", admin, R"({"by": "ops"})", 202},
      {"POST", "/api/v1/sources/z/retry", admin, "", 202},
      {"POST", "/api/v1/sources/z/pause", admin, R"({"reason": "upstream maintenance", "by": "ops"})", 200},
      {"POST", "/api/v1/sources/z/sync", admin, "", 409}, // paused
      {"POST", "/api/v1/sources/z/pause", admin, "[1]", 400},
      // The documented limits are enforced, not cut silently.
      {"POST", "/api/v1/sources/z/pause", admin, R"({"reason": ")" + std::string(201, 'x') + R"("})", 400},
      {"POST", "/api/v1/sources/z/audit", admin, R"({"by": ")" + std::string(65, 'o') + R"("})", 400},
      {"POST", "/api/v1/sources/z/pause", admin, R"({"reason": ")" + std::string(200, 'x') + R"("})", 200},
      {"GET", "/api/v1/sources/z/pause", admin, "", 405},
      {"GET", "/api/v1/sources/z/sync", admin, "", 405},
      {"POST", "/api/v1/sources/z/resume", admin, "", 200},
      {"GET", "/api/v1/sources/z/runs?limit=1&status=succeeded", {}, "", 200},
      {"GET", "/api/v1/sources/z/runs?trigger=sideways", {}, "", 400},
  };
  ScratchDir dir("openapi");
  {
    std::ofstream out(dir / "answers.jsonl");
    for (const auto& q : asks) {
      const Answer a = call(base, q.method, q.path, q.headers, q.body);
      INFO(q.method, " ", q.path, " -> ", a.status, " ", a.body);
      CHECK(a.status == q.expect);
      out << json{{"method", q.method}, {"path", q.path}, {"status", a.status}, {"body", a.body}}.dump() << "\n";
    }
    // Z's hub has A as a subscriber: its push answer fills the other list.
    const Answer z = call(pair.z.base, "GET", "/api/v1/push");
    out << json{{"method", "GET"}, {"path", "/api/v1/push"}, {"status", z.status}, {"body", z.body}}.dump() << "\n";
  }
  const std::string cmd = python3() + " " + (std::filesystem::path(TRIBUTARY_SOURCE_DIR) / "tests/integration/check_openapi.py").string() +
                          " " + (std::filesystem::path(TRIBUTARY_SOURCE_DIR) / "docs/openapi.json").string() + " " +
                          (dir / "answers.jsonl").string() + " > " + (dir / "check.out").string() + " 2>&1";
  const int rc = sh(cmd);
  INFO(slurp(dir / "check.out"));
  CHECK(rc == 0);
  // The sources' answers held a run, a host and a subscription each, so
  // their item schemas were used, not only empty arrays.
  const json st = json::parse(call(base, "GET", "/api/v1/status").body);
  CHECK_FALSE(st["data"]["sources"][0]["last_success"].is_null());
  CHECK(st["data"]["hosts"].size() >= 1);
  CHECK(st["data"]["push"]["subscriptions"].size() == 1);
  const json zst = json::parse(call(pair.z.base, "GET", "/api/v1/push").body);
  CHECK(zst["data"]["subscribers"].size() >= 1);
  CHECK(zst["data"]["subscribers_total"] == zst["data"]["subscribers"].size());
  // The list is bounded by `limit`; the totals still count every subscriber.
  const json none = json::parse(call(pair.z.base, "GET", "/api/v1/push?limit=0").body);
  CHECK(none["data"]["subscribers"].empty());
  CHECK(none["data"]["subscribers_total"] == zst["data"]["subscribers_total"]);
  CHECK(call(pair.z.base, "GET", "/api/v1/push?limit=x").status == 400);
}

// Issue #17: the monitoring people already run. The Prometheus alert rules
// and the Grafana dashboard in deploy/monitoring/ use only metrics a live
// daemon exposes; promtool (Prometheus's own tool, when installed) accepts
// our /metrics, the rules, and the rules' unit tests.
#include "../common/scratch_dir.h"
#include "daemon_client.h"
#include "http_get.h"
#include "process.h"
#include "sync_fixture.h"

#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include <sys/wait.h>

using namespace tributary;
using namespace tributary::test;

namespace {

const std::filesystem::path k_monitoring = std::filesystem::path(TRIBUTARY_SOURCE_DIR) / "deploy" / "monitoring";

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

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

} // namespace

TEST_CASE("Monitoring: every metric the alert rules and the Grafana dashboard use is on a live daemon's /metrics, "
          "and promtool accepts /metrics, the rules and their unit tests") {
  // A Source with a hub (a Tributary), and a Tributary subscribed to it:
  // source, host, push and hub series all present.
  Upstream up;
  Site site(up);
  site.put("/res/0.txt", "zero");
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  TestDaemon z({{"up", up.url("/")}});
  edit_config(z, [](json& j) { j["push"] = {{"callback_allow_hosts", {"127.0.0.1"}}}; });
  z.start();
  REQUIRE(wait_for(z.base, [](const json& st) { return in_sync(st, "up", 1); }));
  TestDaemon a({{"z", z.base + "/.well-known/resourcesync"}});
  a.start();
  REQUIRE(wait_for(a.base, [](const json& st) { return in_sync(st, "z", 1); }));
  Got metrics;
  REQUIRE(eventually([&] {
    metrics = http_get(a.base + "/metrics");
    return metrics.body.find("tributary_push_subscription_active{source=\"z\"") != std::string::npos;
  }, 20));

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
    CHECK(metrics.body.find("# TYPE " + name + " ") != std::string::npos);
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

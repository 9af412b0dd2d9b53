// Issue #17: the status page for an operator following 200 sources, in
// headless Chromium. 184 sources follow four `tributary simulate` Sources
// (one with a hub, which pushes), 6 follow a Source whose resources 404,
// do not match their hashes or are too long, and 10 fail (their Source
// gone). The test asserts on the rendered DOM (summary, rows, sparklines, host rates,
// filters, sort, a source's own page) and keeps screenshots as artefacts.
#include "../common/scratch_dir.h"
#include "tools/simulate/simulate.h"
#include "chromium.h"
#include "daemon_client.h"
#include "http_get.h"
#include "sync_fixture.h"

#include <doctest/doctest.h>

#include <pqxx/pqxx>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>

using namespace tributary;
using namespace tributary::test;

namespace {

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

// The DOM headless Chromium renders for `url` once its scripts have run.
std::string dom_of(const std::string& url, const std::filesystem::path& dir, const std::string& name) {
  return chromium_dom(url, dir / (name + ".html"), 8000);
}

// A screenshot of `url`, kept with the build's test artefacts.
std::filesystem::path screenshot(const std::string& url, const std::string& name, int height, int width = 1400) {
  const std::filesystem::path dir = TRIBUTARY_ARTEFACT_DIR;
  std::filesystem::create_directories(dir);
  const auto png = dir / (name + ".png");
  std::filesystem::remove(png);
  chromium_screenshot(url, png, width, height, 8000);
  return png;
}

// The names of the rows in a rendered table, in order.
std::vector<std::string> row_names(const std::string& dom) {
  static const std::regex k_row(R"re(<tr data-source="([^"]+)")re");
  std::vector<std::string> out;
  for (std::sregex_iterator it(dom.begin(), dom.end(), k_row), end; it != end; ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

void exec(const TestDaemon& d, const std::string& sql) {
  pqxx::connection c(d.db.conninfo());
  pqxx::work tx(c);
  tx.exec(sql);
  tx.commit();
}

} // namespace

TEST_CASE("Status page: 200 sources in headless Chromium: summary, sparklines, host rates, filters, sort, and a "
          "source's own page with feeds, runs, errors by kind, retrying resources and its subscription") {
  // Four simulated Sources, one with a hub.
  std::vector<std::unique_ptr<agg::Simulator>> sims;
  for (int i = 0; i < 4; ++i) {
    agg::SimulateOptions o;
    o.port = 0;
    o.resources = 10;
    o.size = 64;
    o.change_rate = 0; // the test makes its changes
    o.seed = static_cast<uint64_t>(i + 1);
    o.hub = i == 0;
    sims.push_back(std::make_unique<agg::Simulator>(o));
    REQUIRE(sims.back()->start());
  }
  // A Source whose resources fail: two answer 404, one does not match its
  // hash, one is longer than its listed length.
  Upstream up;
  Site site{up};
  site.put_numbered(5);
  site.publish_start(ts("2026-01-01T00:00:00Z"));
  up.remove("/res/0.txt");
  up.remove("/res/1.txt");
  up.set("/res/2.txt", "resourceX2", "text/plain");             // as long as listed, other bytes
  up.set("/res/3.txt", "resource 3 and more", "text/plain"); // longer than listed

  std::vector<std::pair<std::string, std::string>> sources;
  for (int i = 0; i < 184; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "sim-%d-%03d", i % 4, i);
    sources.emplace_back(name, sims[static_cast<size_t>(i % 4)]->base_url() + "/");
  }
  for (int i = 0; i < 6; ++i) {
    sources.emplace_back("broken-" + std::to_string(i), up.url("/"));
  }
  // Failing: ten whose Source is gone (every path 404). A port where
  // nothing listens fails too, after its retries (about 15 s): the hostile tests
  // have that.
  Upstream gone;
  for (int i = 0; i < 10; ++i) {
    sources.emplace_back("dead-" + std::to_string(i), gone.url("/"));
  }
  REQUIRE(sources.size() == 200);
  const auto t0 = std::chrono::steady_clock::now();
  auto lap = [&](const char* what) {
    MESSAGE(std::string(what) << " at " << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s");
  };
  TestDaemon d(sources);
  edit_config(d, [](json& j) {
    j["max_concurrent_syncs"] = 16;
    for (auto& s : j["sources"]) {
      s["interval"] = "20s";
    }
    j["push"] = {{"callback_allow_hosts", {"127.0.0.1"}}};
  });
  d.start();
  // Every source has ended a run: the 184 simulated ones succeeded, the 6
  // broken ones partly, the 10 dead ones failed.
  REQUIRE(wait_for(d.base, [](const json& st) {
    if (!st.is_object()) {
      return false;
    }
    int done = 0;
    for (const auto& s : st["data"]["sources"]) {
      done += !s["last_node"].is_null() && s["activity"] != "syncing";
    }
    return done == 200;
  }, 120));
  lap("every source ran");
  REQUIRE(eventually(
      [&] { return scalar(d, "SELECT state FROM push_subscription WHERE source = 'sim-0-000'") == "active"; }, 20));
  for (auto& s : sims) {
    s->change(3);
  }
  // Each baseline was counted when its run ended, apart from changes.
  REQUIRE(eventually([&] {
    const json h = json::parse(http_get(d.base + "/api/v1/history?source=sim-1-001").body, nullptr, false);
    uint64_t sum = 0;
    for (const auto& c : h.is_object() ? h["data"]["sources"][0]["baseline"] : json::array()) {
      sum += c.get<uint64_t>();
    }
    return sum >= 10;
  }, 30));
  lap("history sampled");
  // 24 hours of past history, seeded for the sparklines (the sampler has
  // had seconds, not a day): lag and changes that rise and fall.
  exec(d, "INSERT INTO source_history (source_id, bucket, lag_seconds, changes) "
          "SELECT s.id, date_bin('5 minutes', now(), timestamptz '2000-01-01') - k * interval '5 minutes', "
          "       30 + 20 * sin(k / 12.0 + s.id), (10 + 8 * cos(k / 20.0 + s.id))::bigint "
          "FROM source s, generate_series(1, 287) k ON CONFLICT DO NOTHING");

  const json st = status_of(d.base);
  std::map<std::string, int> states;
  for (const auto& s : st["data"]["sources"]) {
    ++states[s["state"].get<std::string>()];
  }
  MESSAGE("sync states: " << json(states).dump());
  CHECK(states["failing"] == 10);
  CHECK(states["lagging"] >= 6); // the broken ones: resources wait for a retry
  CHECK(states["in_sync"] + states["lagging"] == 190);

  // What the page reads, for the note (no assertion on time: bench/ does timing).
  for (const char* path : {"/api/v1/status", "/api/v1/history?hours=24&step=900"}) {
    const auto at = std::chrono::steady_clock::now();
    const Got got = http_get(d.base + path);
    MESSAGE(std::string(path) << ": " << got.body.size() << " bytes in "
                 << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - at).count() << " ms");
  }

  ScratchDir dir("status-page");
  // ---- every source ----
  const std::string page = dom_of(d.base + "/status", dir.path, "all");
  {
    INFO(page.substr(0, 4000));
    CHECK(row_names(page).size() == 200);
    CHECK(page.find("<b>200</b> sources: ") != std::string::npos);
    CHECK(page.find("<button data-count=\"failing\" class=\"sync failing\"><b>10</b> failing</button>") !=
          std::string::npos);
    CHECK(page.find("<b>" + std::to_string(states["in_sync"]) + "</b> in sync</button>") != std::string::npos);
    CHECK(page.find(" changes/min (last hour)") != std::string::npos);
    CHECK(page.find("<span id=\"shown\">showing all 200</span>") != std::string::npos);
    // Two sparklines a row, drawn from the seeded day.
    CHECK(count(page, "<svg class=\"spark lag\"") == 200);
    CHECK(count(page, "<svg class=\"spark changes\"") == 200);
    CHECK(count(page, "<polyline class=\"line\"") >= 400);
    // The host each source is fetched from, with its rate; failing sources
    // first (the default sort), naming why.
    CHECK(page.find("<td class=\"host\" title=\"") != std::string::npos);
    CHECK(page.find(" req/s, window ") != std::string::npos);
    // Times relative, exact on hover; failing since as a duration; each
    // sparkline with its scale; the pushed source's schedule explained.
    CHECK(page.find("<time datetime=\"") != std::string::npos);
    CHECK(page.find(" ago</time>") != std::string::npos);
    CHECK(page.find("<span class=\"since\" title=\"failing since ") != std::string::npos);
    CHECK(count(page, "<text class=\"scale\"") >= 400);
    CHECK(page.find("<span class=\"sub\"> · pushed</span>") != std::string::npos);
    CHECK(page.find("failing failing") == std::string::npos);
    CHECK(page.find("last on ") == std::string::npos); // one node: no node named on every row
    CHECK(row_names(page).front().rfind("dead-", 0) == 0);
    CHECK(page.find("failed run(s) in a row") != std::string::npos);
    // A link to each source's page.
    CHECK(page.find("<a href=\"/status/sources/broken-0\">broken-0</a>") != std::string::npos);
    CHECK(page.find("<div id=\"problem\"></div>") != std::string::npos);
  }
  // Filters and sort, from the page's own query (what its controls write).
  {
    const std::string failing = dom_of(d.base + "/status?state=failing", dir.path, "failing");
    const auto names = row_names(failing);
    CHECK(names.size() == 10);
    for (const auto& n : names) {
      CHECK(n.rfind("dead-", 0) == 0);
    }
    CHECK(failing.find("showing 10 of 200") != std::string::npos);
    const std::string by_name = dom_of(d.base + "/status?q=SIM-1-&sort=name&dir=desc", dir.path, "search");
    const auto sorted = row_names(by_name);
    CHECK(sorted.size() == 46);
    CHECK(std::is_sorted(sorted.rbegin(), sorted.rend()));
    CHECK(sorted.front() == "sim-1-181");
    CHECK(by_name.find("<th data-key=\"name\" aria-sort=\"descending\">") != std::string::npos);
    const std::string host = sims[2]->base_url();
    const std::string one_host = dom_of(d.base + "/status?host=" + host, dir.path, "host");
    const auto on_host = row_names(one_host);
    CHECK(on_host.size() == 46);
    for (const auto& n : on_host) {
      CHECK(n.rfind("sim-2-", 0) == 0);
    }
  }
  // Rows of one line: 200 sources make a page of about 200 × 28 px.
  {
    const std::string out = (dir.path / "rows.jsonl").string();
    const std::string cmd =
        python3() + " " + (std::filesystem::path(TRIBUTARY_SOURCE_DIR) / "tests/integration/page_actions.py").string() +
        " '" + d.base + "/status' - - 'eval:Math.max(...[...document.querySelectorAll(\"#sources tr\")]"
        ".map(r => r.getBoundingClientRect().height))' "
        "'eval:document.querySelectorAll(\"#sources tr\").length' > " + out + " 2>&1";
    REQUIRE(std::system(cmd.c_str()) == 0);
    const std::string text = slurp(out);
    INFO(text);
    const json tallest = json::parse(text.substr(0, text.find('\n')))["result"];
    MESSAGE("tallest row: " << tallest.dump() << " px");
    CHECK(tallest.get<double>() <= 30);
    CHECK(text.find("\"result\": 200") != std::string::npos);
  }
  // The list fits 1,400 and 1,280 px: no column past the window's edge
  // (the Last error column truncates, its full text on hover).
  {
    const std::string out = (dir.path / "widths.jsonl").string();
    const std::string fits = "'eval:[document.documentElement.scrollWidth, innerWidth, "
                             "Math.round(Math.max(...[...document.querySelectorAll(\"#source-table th\")]"
                             ".map(c => c.getBoundingClientRect().right)))].join(\" \")'";
    // And with every source running a job, as any may be when the page is
    // looked at: its progress must not widen the State column past the window.
    const std::string running =
        "'eval:(view.status.sources.forEach(s => { s.activity = \"syncing\"; s.job = {mode: \"incremental\", "
        "done: 3700, total: 10000, eta_seconds: 125, document: \"x\"}; }), render(), "
        "[document.documentElement.scrollWidth, innerWidth, "
        "Math.round(Math.max(...[...document.querySelectorAll(\"#source-table th\")]"
        ".map(c => c.getBoundingClientRect().right))), document.querySelectorAll(\"#sources .job\").length].join(\" \"))'";
    // Each column's width and its widest cell's text, so that a failure names
    // the column that grew.
    const std::string columns =
        "'eval:\"columns \" + [...document.querySelectorAll(\"#source-table th\")].map((c, i) => { "
        "let w = \"\"; let ww = 0; for (const r of document.querySelectorAll(\"#sources tr\")) { "
        "const td = r.children[i]; if (!td) continue; const g = document.createRange(); g.selectNodeContents(td); "
        "const x = g.getBoundingClientRect().width; if (x > ww) { ww = x; w = td.textContent; } } "
        "return c.dataset.key + \"=\" + Math.round(c.getBoundingClientRect().width) + \" [\" + w + \"]\"; }).join(\" | \")'";
    const std::string cmd =
        python3() + " " + (std::filesystem::path(TRIBUTARY_SOURCE_DIR) / "tests/integration/page_actions.py").string() +
        " '" + d.base + "/status' - - width:1400 " + fits + " " + columns + " width:1280 " + fits + " " + columns +
        " " + running + " " + columns + " > " + out + " 2>&1";
    REQUIRE(std::system(cmd.c_str()) == 0);
    const std::string text = slurp(out);
    INFO(text);
    std::istringstream lines(text);
    int checked = 0;
    for (std::string line; std::getline(lines, line);) {
      const json j = json::parse(line);
      if (j["step"].get<std::string>().rfind("eval:", 0) != 0) {
        continue;
      }
      if (j["result"].get<std::string>().rfind("columns ", 0) == 0) {
        MESSAGE(j["result"].get<std::string>());
        continue;
      }
      std::istringstream v(j["result"].get<std::string>());
      double scroll = 0, inner = 0, right = 0;
      int jobs = -1;
      v >> scroll >> inner >> right >> jobs;
      if (jobs != -1) {
        MESSAGE("every source running a job: " << jobs << " progress bars");
        CHECK(jobs == 200);
      }
      MESSAGE("window " << inner << " px: page " << scroll << " px wide, last column ends at " << right << " px");
      CHECK(scroll <= inner);
      CHECK(right <= inner);
      ++checked;
    }
    CHECK(checked == 3);
    // The error's full text is on hover.
    const std::string dom = dom_of(d.base + "/status", dir.path, "hover");
    CHECK(dom.find("<td class=\"error\" title=\"") != std::string::npos);
  }
  lap("list pages rendered");
  // ---- one source: a broken one ----
  {
    const std::string broken = dom_of(d.base + "/status/sources/broken-0", dir.path, "broken");
    INFO(broken);
    CHECK(broken.find("<h2 id=\"source-title\"><span>broken-0 </span><span class=\"sync lagging\" "
                      "title=\"4 resource(s) wait for a retry of their content\">lagging</span>") != std::string::npos);
    CHECK(broken.find("<tr data-feed=\"" + up.url("/caps.xml") + "\"") != std::string::npos);
    CHECK(broken.find("2026-01-01T00:00:00Z") != std::string::npos); // the baseline's time
    CHECK(broken.find("<tr data-run=\"") != std::string::npos);
    // Errors grouped by kind, with example URLs.
    CHECK(broken.find("<tr data-kind=\"HTTP 404\"><td>HTTP 404</td>") != std::string::npos);
    CHECK(broken.find("<div>" + up.url("/res/0.txt") + "</div>") != std::string::npos);
    CHECK(broken.find("<tr data-kind=\"hash mismatch\"><td>hash mismatch</td>") != std::string::npos);
    CHECK(broken.find("<div>" + up.url("/res/2.txt") + "</div>") != std::string::npos);
    CHECK(broken.find("<tr data-kind=\"too large\"><td>too large</td>") != std::string::npos);
    CHECK(broken.find("<div>" + up.url("/res/3.txt") + "</div>") != std::string::npos);
    // The four resources waiting for a retry.
    CHECK(broken.find("Retrying resources (4)") != std::string::npos);
    CHECK(broken.find("<tr class=\"wrap\" data-uri=\"" + up.url("/res/1.txt") + "\"") != std::string::npos);
    CHECK(broken.find("none: the source offers no notification channel") != std::string::npos);
    CHECK(count(broken, "<svg class=\"spark ") == 2);
  }
  // ---- one source: pushed to ----
  {
    const std::string pushed = dom_of(d.base + "/status/sources/sim-0-000", dir.path, "pushed");
    INFO(pushed.substr(0, 6000));
    CHECK(pushed.find("<div id=\"subscription\" data-state=\"active\">") != std::string::npos);
    CHECK(pushed.find(sims[0]->base_url() + "/hub") != std::string::npos);
    CHECK(pushed.find("Errors by kind") != std::string::npos);
    CHECK(pushed.find("no errors recorded") != std::string::npos);
  }
  lap("source pages rendered");
  // Screenshots for the eye (kept under the build's artefacts/).
  using Shot = std::tuple<std::string, std::string, int, int>;
  for (const auto& [url, name, height, width] :
       {Shot{d.base + "/status", "status-200-sources", 1400, 1400},
        Shot{d.base + "/status", "status-200-sources-1280", 1400, 1280},
        Shot{d.base + "/status", "status-200-sources-phone", 2400, 390},
        Shot{d.base + "/status/sources/broken-0", "status-source-broken", 1600, 1400},
        Shot{d.base + "/status/sources/sim-0-000", "status-source-pushed", 1600, 1400}}) {
    const auto png = screenshot(url, name, height, width);
    CHECK(std::filesystem::exists(png));
    CHECK(std::filesystem::file_size(png) > 20000);
    MESSAGE("screenshot: " << png.string());
  }
  lap("screenshots taken");
  for (auto& s : sims) {
    s->stop();
  }
}

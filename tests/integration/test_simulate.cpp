// `tributary simulate` as a Source, and the daemon following it end to end:
// the simulator's documents validate and behave (index past 50,000, closing
// Change List parts, hashes that match, determinism per seed); `tributary
// run` survives kill -9 mid-baseline and ends equal to the simulated Source
// with no change logged twice; the status page renders in headless Chromium.
#include "chromium.h"
#include "http_get.h"
#include "process.h"
#include "sync_fixture.h"

#include "tools/simulate/simulate.h"
#include "sync_engine/dump_package.h"
#include "resourcesync/reader.h"
#include "sync_engine/fetcher.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <set>
#include <signal.h>
#include <thread>

using namespace tributary;
using namespace tributary::test;
using nlohmann::json;

namespace {

rs::ParsedDocument valid_document(const std::string& url) {
  Got f = http_get(url);
  REQUIRE_MESSAGE(f.status == 200, url);
  auto doc = rs::parse_document(f.body);
  std::string diags;
  for (const auto& d : doc.summary.diagnostics) {
    diags += d.message + "\n";
  }
  INFO(url << "\n" << diags);
  CHECK(doc.summary.valid());
  return doc;
}

// Every entry of a list or of the parts of its index.
std::vector<rs::Entry> entries_of(const std::string& url) {
  auto doc = valid_document(url);
  if (doc.document.header.root == rs::RootElement::urlset) {
    return doc.document.entries;
  }
  std::vector<rs::Entry> all;
  for (const auto& part : doc.document.entries) {
    auto p = valid_document(part.loc);
    all.insert(all.end(), p.document.entries.begin(), p.document.entries.end());
  }
  return all;
}

// (path, change, md5) of each Change List entry, host-independent.
std::vector<std::string> change_sequence(const std::string& base) {
  std::vector<std::string> out;
  for (const auto& e : entries_of(base + "/changelist.xml")) {
    out.push_back(e.loc.substr(base.size()) + " " + std::string(rs::to_string(*e.md->change)) + " " +
                  (e.md->hash.empty() ? "-" : e.md->hash[0].hex));
  }
  return out;
}

} // namespace

TEST_CASE("Simulator: documents validate, the Resource List is an index past 50,000, parts close, hashes match") {
  agg::SimulateOptions o;
  o.port = 0;
  o.resources = 50001;
  o.change_rate = 0;
  o.seed = 7;
  o.size = 100;
  o.part_size = 100;
  o.mirror = true;
  agg::Simulator sim(o);
  REQUIRE(sim.start());
  sim.change(250);
  const std::string base = sim.base_url();

  auto sd = valid_document(base + "/.well-known/resourcesync");
  REQUIRE(sd.document.entries.size() == 1);
  auto caps = valid_document(sd.document.entries[0].loc);
  CHECK(caps.document.entries.size() == 4); // lists and dumps

  std::this_thread::sleep_for(std::chrono::milliseconds(1100)); // the Resource List re-renders once a second
  auto rl = valid_document(base + "/resourcelist.xml");
  CHECK(rl.document.header.root == rs::RootElement::sitemapindex);
  CHECK(rl.document.entries.size() == 2);
  CHECK(entries_of(base + "/resourcelist.xml").size() == sim.live());

  auto index = valid_document(base + "/changelist.xml");
  REQUIRE(index.document.entries.size() == 3);
  CHECK(index.document.entries[0].md->until.has_value());
  CHECK(index.document.entries[1].md->until.has_value());
  CHECK_FALSE(index.document.entries[2].md->until.has_value());
  const std::string part1 = http_get(base + "/changelist-1.xml").body;
  sim.change(10);
  CHECK(http_get(base + "/changelist-1.xml").body == part1); // closed: never changes
  auto changes = entries_of(base + "/changelist.xml");
  CHECK(changes.size() == 260);

  // The newest version of a changed resource matches its listed hash, also
  // at the mirror named by its duplicate link.
  const rs::Entry* last_update = nullptr;
  std::set<std::string> deleted_later;
  for (auto it = changes.rbegin(); it != changes.rend(); ++it) {
    if (*it->md->change == rs::Change::deleted) {
      deleted_later.insert(it->loc);
    } else if (!deleted_later.count(it->loc)) {
      last_update = &*it;
      break;
    }
  }
  REQUIRE(last_update);
  const std::string bytes = http_get(last_update->loc).body;
  CHECK(rs::hash_hex(rs::HashAlgorithm::md5, bytes) == last_update->md->hash[0].hex);
  REQUIRE(last_update->links.size() == 1);
  CHECK(last_update->links[0].rel == "duplicate");
  CHECK(http_get(last_update->links[0].href).body == bytes);
  CHECK(http_get(base + "/res/99999999").status == 404);

  // Dumps: the Change Dump has a package per closed part, with its manifest
  // beside it; both dumps' packages pass the consumer's checks.
  auto cd = valid_document(base + "/changedump.xml");
  REQUIRE(cd.document.entries.size() == 2);
  CHECK(cd.document.entries[0].find_link("contents"));
  const auto dir = std::filesystem::temp_directory_path() / ("tributary-simdump-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto blobs = store::BlobStore::open(dir / "blobs");
  REQUIRE(blobs);
  auto check_package = [&](const rs::Entry& pkg, rs::Capability kind) {
    Got zip = http_get(pkg.loc);
    REQUIRE(zip.status == 200);
    CHECK(zip.body.size() == *pkg.md->length);
    std::ofstream(dir / "p.zip", std::ios::binary) << zip.body;
    auto opened = sync::DumpPackage::open(dir / "p.zip", pkg.loc, kind);
    REQUIRE(opened);
    auto m = (*opened)->manifest();
    REQUIRE(m);
    for (size_t i = 0; i < std::min<size_t>(m->entries.size(), 200); ++i) { // a sample of the bitstreams
      if (m->entries[i].md->path) {
        CHECK((*opened)->extract(m->entries[i], i, **blobs)); // bytes match the manifest
      }
    }
    return m->entries.size();
  };
  CHECK(check_package(cd.document.entries[0], rs::Capability::changedump_manifest) == 100);
  auto rd = valid_document(base + "/resourcedump.xml");
  size_t dumped = 0;
  for (const auto& pkg : rd.document.entries) {
    dumped += check_package(pkg, rs::Capability::resourcedump_manifest);
  }
  CHECK(dumped == sim.live());
  std::filesystem::remove_all(dir);

  // Deterministic for a seed: another simulator makes the same changes.
  agg::Simulator twin(o);
  REQUIRE(twin.start());
  twin.change(260);
  CHECK(change_sequence(twin.base_url()) == change_sequence(base));
}

TEST_CASE("Daemon end to end: follows tributary simulate, survives kill -9 mid-baseline, status page in Chromium") {
  TempDatabase db;
  const auto dir = std::filesystem::temp_directory_path() / ("tributary-e2e-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const int sim_port = free_port();
  const std::string sim_base = "http://127.0.0.1:" + std::to_string(sim_port);
  pid_t sim = spawn_tributary({"simulate", "--listen", "127.0.0.1:" + std::to_string(sim_port), "--resources",
                               "3000", "--change-rate", "20", "--max-changes", "200", "--size", "256",
                               "--part-size", "50", "--seed", "3"},
                              (dir / "sim.log").string());
  ProcessGuard sim_guard(sim);
  const int port = free_port();
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  const std::string cfg = (dir / "tributary.json").string();
  // 400 requests/s: the baseline takes several seconds, long enough to kill.
  std::ofstream(cfg) << json{{"database", db.conninfo()},
                             {"data_dir", (dir / "data").string()},
                             {"listen", "127.0.0.1:" + std::to_string(port)},
                             {"sources",
                              {{{"name", "sim"},
                                {"url", sim_base + "/"},
                                {"interval", "1s"},
                                {"concurrency", 4},
                                {"strategy", "lists"}, // a baseline of many requests, to be killed midway
                                {"max_requests_per_second", 400}}}}}
                            .dump();
  REQUIRE(run_tributary("migrate --config " + cfg).status == 0);
  for (int i = 0; i < 200 && http_get(sim_base + "/capabilitylist.xml").status != 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::string log = (dir / "daemon.log").string();
  pid_t daemon = spawn_tributary({"run", "--config", cfg}, log);
  ProcessGuard daemon_guard(daemon);
  pqxx::connection c(db.conninfo());
  auto scalar = [&c](const std::string& sql) {
    pqxx::read_transaction tx(c);
    return tx.exec1(sql)[0].as<long long>();
  };
  // Kill it once part of the baseline has committed.
  bool partly = false;
  for (int i = 0; i < 400 && !partly; ++i) {
    partly = scalar("SELECT count(*) FROM resource") >= 500;
    if (!partly) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
  }
  INFO(slurp(log));
  REQUIRE(partly);
  kill(daemon, SIGKILL);
  waitpid(daemon, nullptr, 0);
  CHECK(scalar("SELECT count(*) FROM resource") < 3000);

  // Restart: it resumes and then follows the (now quiet) Source.
  daemon = spawn_tributary({"run", "--config", cfg}, log + ".2");
  auto status_of = [&base]() {
    Got f = http_get(base + "/api/v1/sources/sim");
    auto j = json::parse(f.body, nullptr, false);
    return f.status == 200 && !j.is_discarded() ? j["data"] : json();
  };
  // In sync: once the simulator has made all its changes, a run that
  // started after that succeeds with nothing left to apply.
  bool quiet = false;
  for (int i = 0; i < 600 && !quiet; ++i) {
    quiet = http_get(sim_base + "/changelist.xml").body.find("changelist-5.xml") != std::string::npos;
    if (!quiet) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  REQUIRE(quiet);
  const long long runs_before = scalar("SELECT coalesce(max(id), 0) FROM sync_run");
  bool synced = false;
  for (int i = 0; i < 600 && !synced; ++i) {
    const json s = status_of();
    synced = s.is_object() && s["last_success"].is_object() && s["last_success"]["id"] > runs_before &&
             s["activity"] == "idle";
    if (!synced) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  INFO(slurp(log + ".2"));
  REQUIRE(synced);

  // The store equals the Source: the same live URIs with the same md5.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100)); // the simulator re-renders its list
  std::map<std::string, std::string> upstream;
  for (const auto& e : entries_of(sim_base + "/resourcelist.xml")) {
    upstream[e.loc] = e.md->hash[0].hex;
  }
  CHECK(upstream.size() >= 3000);
  std::map<std::string, std::string> ours;
  {
    pqxx::read_transaction tx(c);
    for (const auto& row : tx.exec("SELECT uri, md5 FROM resource WHERE state = 'live'")) {
      ours[row[0].as<std::string>()] = row[1].as<std::string>();
    }
  }
  CHECK(ours == upstream);
  // No change logged twice.
  CHECK(scalar("SELECT count(*) FROM (SELECT uri, change, upstream_datetime FROM change_log "
               "GROUP BY 1, 2, 3 HAVING count(*) > 1) d") == 0);

  // The status page, rendered by headless Chromium against the running daemon.
  const std::string dom = chromium_dom(base + "/status", dir / "dom.html", 4000);
  INFO(dom);
  CHECK(dom.find("data-source=\"sim\"") != std::string::npos);
  // Healthy: idle, or in one of its runs (every second; slow under ASan).
  CHECK((dom.find("data-sync-state=\"in_sync\"") != std::string::npos ||
         dom.find("data-sync-state=\"lagging\"") != std::string::npos));
  CHECK(dom.find("<span class=\"state failing\">") == std::string::npos);
  // Which node runs the source (or ran it last): this daemon, in the API;
  // the page names no node while one daemon runs them all.
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  CHECK(status_of()["last_node"] == std::string(host) + " pid " + std::to_string(daemon));
  CHECK(dom.find(" pid " + std::to_string(daemon)) == std::string::npos);
  CHECK(dom.find("<div id=\"problem\"></div>") != std::string::npos); // no error shown

  kill(daemon, SIGTERM);
  int status = 0;
  waitpid(daemon, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  kill(sim, SIGTERM);
  waitpid(sim, nullptr, 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("Simulator: strategy auto baselines from its Resource Dump and catches up through its Change Dump") {
  agg::SimulateOptions o;
  o.port = 0;
  o.resources = 500;
  o.change_rate = 0;
  o.seed = 11;
  o.size = 64;
  o.part_size = 50;
  agg::Simulator sim(o);
  REQUIRE(sim.start());
  SyncEnv env;
  auto src = SyncEnv::source(sim.base_url() + "/", "sim");
  auto has_note = [](const sync::SourceReport& r, const std::string& text) {
    for (const auto& n : r.notes) {
      if (n.find(text) != std::string::npos) {
        return true;
      }
    }
    return false;
  };
  auto r = env.run(src, store::RunMode::incremental);
  REQUIRE(r.status == store::RunStatus::succeeded);
  CHECK(has_note(r, "baselined from the Resource Dump"));
  CHECK(env.live().size() == sim.live());
  sim.change(160); // three closed parts of 50 and an open one
  r = env.run(src, store::RunMode::incremental);
  REQUIRE(r.status == store::RunStatus::succeeded);
  CHECK(has_note(r, "caught up from the Change Dump"));
  CHECK(env.live().size() == sim.live());
  sim.change(5); // a small backlog, less than a package: the Change List does it
  r = env.run(src, store::RunMode::incremental);
  REQUIRE(r.status == store::RunStatus::succeeded);
  CHECK_FALSE(has_note(r, "Change Dump"));
  CHECK(r.counters.created + r.counters.updated + r.counters.deleted == 5);
  // The store equals the Source.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  std::map<std::string, std::string> upstream;
  for (const auto& e : entries_of(sim.base_url() + "/resourcelist.xml")) {
    upstream[e.loc] = e.md->hash[0].hex;
  }
  std::map<std::string, std::string> ours;
  pqxx::connection c(env.db.conninfo());
  pqxx::read_transaction tx(c);
  for (const auto& row : tx.exec("SELECT uri, md5 FROM resource WHERE state = 'live'")) {
    ours[row[0].as<std::string>()] = row[1].as<std::string>();
  }
  CHECK(ours == upstream);
}

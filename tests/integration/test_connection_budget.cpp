// The PostgreSQL connection budget (#38): three daemons on one PostgreSQL
// that allows 40 connections, once directly and once through PgBouncer in
// transaction mode (the session connection, for LISTEN and leases, goes to
// PostgreSQL itself: `database_session`). Every node syncs, republishes and
// takes over a killed node's sources, and pg_stat_activity never shows more
// than 10 connections of one node (the default `database_connections`).
// The cluster is the test's own (pg_budget_cluster.sh): the shared one
// allows 200.
#include "daemon_client.h"
#include "process.h"
#include "sync_fixture.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <fstream>
#include <map>
#include <signal.h>
#include <sys/wait.h>
#include <thread>

using namespace tributary;
using namespace tributary::test;
using nlohmann::json;

namespace {

const std::string k_cluster_script = std::string(TRIBUTARY_SOURCE_DIR) + "/tests/integration/pg_budget_cluster.sh";

struct Cluster {
  std::string dir;
  Cluster() : dir("/tmp/trib-budget-" + std::to_string(::getpid())) {
    (void)std::system(("bash " + k_cluster_script + " stop " + dir + " 2>/dev/null").c_str());
    ok = std::system(("bash " + k_cluster_script + " start " + dir).c_str()) == 0;
  }
  ~Cluster() { (void)std::system(("bash " + k_cluster_script + " stop " + dir).c_str()); }
  std::string direct(const std::string& db) const {
    return "host=" + dir + " port=5432 user=postgres dbname=" + db;
  }
  std::string bouncer(const std::string& db) const {
    return "host=" + dir + " port=6432 user=postgres dbname=" + db;
  }
  bool ok = false;
};

// The most connections each node held at once, sampled every 20 ms on a
// connection of the test's own: a node's are its pool's (named in its
// conninfo) and its session connection (named after its process). Through
// PgBouncer, a server connection carries the name of the last client that
// used it, so there only those in a transaction now count as the node's.
struct Sampler {
  Sampler(std::string conninfo, std::string db, bool through_bouncer)
      : m_conninfo(std::move(conninfo)), m_db(std::move(db)), m_bouncer(through_bouncer) {
    m_thread = std::thread([this] { run(); });
  }
  ~Sampler() { stop(); }
  void stop() {
    m_stop = true;
    if (m_thread.joinable()) {
      m_thread.join();
    }
  }
  void set_pids(const std::vector<pid_t>& pids) {
    std::lock_guard lock(m_mutex);
    m_pids = pids;
  }
  std::map<int, long> max_per_node() {
    std::lock_guard lock(m_mutex);
    return m_max;
  }
  long max_total() {
    std::lock_guard lock(m_mutex);
    return m_max_total;
  }
  long samples() {
    std::lock_guard lock(m_mutex);
    return m_samples;
  }

private:
  void run() {
    pqxx::connection c(m_conninfo + " application_name=budget-sampler");
    while (!m_stop) {
      std::vector<std::pair<std::string, std::string>> rows;
      {
        pqxx::nontransaction tx(c);
        for (const auto& r : tx.exec_params("SELECT coalesce(application_name, ''), coalesce(state, '') "
                                            "FROM pg_stat_activity WHERE datname = $1 AND "
                                            "backend_type = 'client backend' AND pid <> pg_backend_pid()",
                                            m_db)) {
          rows.emplace_back(r[0].as<std::string>(), r[1].as<std::string>());
        }
      }
      {
        std::lock_guard lock(m_mutex);
        ++m_samples;
        long total = 0; // every connection named after a node, idle or not
        for (size_t i = 0; i < m_pids.size(); ++i) {
          const std::string pool_name = "node" + std::to_string(i);
          const std::string session_name = "(pid " + std::to_string(m_pids[i]) + " ";
          long n = 0;
          for (const auto& [name, state] : rows) {
            if (name.find(session_name) != std::string::npos) {
              ++n;
              ++total;
            } else if (name == pool_name) {
              n += !m_bouncer || state != "idle";
              ++total;
            }
          }
          m_max[static_cast<int>(i)] = std::max(m_max[static_cast<int>(i)], n);
        }
        m_max_total = std::max(m_max_total, total);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  std::string m_conninfo, m_db;
  bool m_bouncer;
  std::atomic<bool> m_stop{false};
  std::mutex m_mutex;
  std::vector<pid_t> m_pids;
  std::map<int, long> m_max;
  long m_max_total = 0;
  long m_samples = 0;
  std::thread m_thread;
};

constexpr int k_sources = 8;

bool wait_until(const std::function<bool()>& f, int seconds) {
  for (int i = 0; i < seconds * 10; ++i) {
    if (f()) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

void three_nodes(const Cluster& cluster, bool through_bouncer) {
  const std::string db = through_bouncer ? "budget_bouncer" : "budget_direct";
  {
    pqxx::connection admin(cluster.direct("postgres"));
    pqxx::nontransaction tx(admin);
    tx.exec0("CREATE DATABASE " + db);
  }
  // Eight sources, each request slowed so that runs last and overlap.
  SlowSources upstream(k_sources, 10, std::chrono::milliseconds(30));
  const auto& sources = upstream.sources;
  struct Node {
    std::filesystem::path dir;
    std::string cfg, log, base;
    pid_t pid = 0;
  };
  std::vector<Node> nodes(3);
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node& n = nodes[i];
    n.dir = node_dir("tributary-budget", i);
    n.cfg = (n.dir / "tributary.json").string();
    n.log = (n.dir / "daemon.log").string();
    const int port = free_port();
    n.base = "http://127.0.0.1:" + std::to_string(port);
    const std::string pooled =
        (through_bouncer ? cluster.bouncer(db) : cluster.direct(db)) + " application_name=node" + std::to_string(i);
    json j = json::parse(config_text(pooled, n.dir, port, sources));
    j.erase("max_concurrent_syncs"); // the default: 4 at once
    if (through_bouncer) {
      j["database_session"] = cluster.direct(db);
    }
    std::ofstream(n.cfg) << j.dump(2);
  }
  {
    // Migrations go to PostgreSQL itself, as an operator runs them.
    json j = json::parse(config_text(cluster.direct(db), nodes[0].dir, free_port(), sources));
    std::ofstream(nodes[0].dir / "migrate.json") << j.dump(2);
    REQUIRE(run_tributary("migrate --config " + (nodes[0].dir / "migrate.json").string()).status == 0);
  }
  Sampler sampler(cluster.direct(db), db, through_bouncer);
  std::vector<pid_t> pids;
  for (auto& n : nodes) {
    n.pid = spawn_tributary({"run", "--config", n.cfg}, n.log);
    pids.push_back(n.pid);
  }
  sampler.set_pids(pids);
  pqxx::connection c(cluster.direct(db) + " application_name=budget-test");
  auto scalar = [&c](const std::string& sql) {
    pqxx::nontransaction tx(c);
    return tx.exec1(sql)[0].as<long long>();
  };
  // Readers beside the runs, as a busy node has: on each node, eight
  // clients asking for its documents and its status at once (the
  // republisher's lookups and the status API borrow from the same pool).
  struct Readers {
    std::atomic<bool> reading{true};
    std::atomic<long> answers{0};
    std::vector<std::thread> threads;
    void stop() {
      reading = false;
      for (auto& t : threads) {
        t.join();
      }
      threads.clear();
    }
    ~Readers() { stop(); }
  } readers;
  for (const auto& n : nodes) {
    for (int r = 0; r < 8; ++r) {
      readers.threads.emplace_back([&readers, base = n.base, r] {
        while (readers.reading) {
          const std::string path =
              r % 2 ? "/api/v1/status" : "/sets/s" + std::to_string(r % k_sources) + "/resourcelist.xml";
          if (call(base, "GET", path).status == 200) {
            ++readers.answers;
          } else {
            std::this_thread::sleep_for(std::chrono::milliseconds(50)); // a node killed
          }
        }
      });
    }
  }
  // Every source synced, and every node republishes every source.
  REQUIRE(wait_until(
      [&] { return scalar("SELECT count(DISTINCT source_id) FROM sync_run WHERE status = 'succeeded'") == k_sources; }, 60));
  for (const auto& n : nodes) {
    for (int s = 0; s < k_sources; ++s) {
      const std::string path = "/sets/s" + std::to_string(s) + "/resourcelist.xml";
      const bool listed = wait_until(
          [&] { return call(n.base, "GET", path).body.find("/res/9.txt") != std::string::npos; }, 20);
      REQUIRE_MESSAGE(listed, std::string(n.base + path));
    }
  }
  // Kill the first node in the middle of a run: the others take its
  // sources over (its session connection, holding the leases, closes).
  const bool holding = wait_until([&] { return holds_running_lease(cluster.direct(db), nodes[0].pid); }, 30);
  CHECK(holding);
  const long long killed_at = scalar("SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint");
  ::kill(nodes[0].pid, SIGKILL);
  ::waitpid(nodes[0].pid, nullptr, 0);
  // Its runs left `running` (its run may have ended between the look and
  // the kill: a run here lasts a few tenths of a second).
  const long long left_running = scalar("SELECT count(*) FROM sync_run WHERE status = 'running' AND node LIKE '% pid " +
                                        std::to_string(nodes[0].pid) + "'");
  nodes[0].pid = 0;
  CHECK(wait_until(
      [&] {
        return scalar("SELECT count(DISTINCT source_id) FROM sync_run WHERE status = 'succeeded' AND "
                      "started_at > to_timestamp(" + std::to_string(killed_at) + " / 1000000.0)") == k_sources;
      },
      30));
  // A few more seconds of runs on the two left.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  readers.stop();
  sampler.stop();
  for (auto& n : nodes) {
    if (n.pid > 0) {
      ::kill(n.pid, SIGTERM);
      ::waitpid(n.pid, nullptr, 0);
      n.pid = 0;
    }
  }
  // Never two runs of one source at once; the killed node's runs marked failed.
  CHECK(scalar(k_overlapping_runs_sql) == 0);
  CHECK(scalar("SELECT count(*) FROM sync_run WHERE status = 'running'") == 0);
  CHECK(scalar("SELECT count(*) FROM sync_run WHERE message LIKE '%interrupted: its process ended%'") >= left_running);
  CHECK(scalar("SELECT count(*) FROM sync_run WHERE status = 'failed' AND message NOT LIKE '%interrupted%'") == 0);
  const auto per_node = sampler.max_per_node();
  MESSAGE(std::string(through_bouncer ? "through PgBouncer" : "directly") << ": " << sampler.samples()
                                                               << " samples; most connections at once: node0 "
                                                               << per_node.at(0) << ", node1 " << per_node.at(1)
                                                               << ", node2 " << per_node.at(2) << ", all "
                                                               << sampler.max_total() << "; " << readers.answers.load()
                                                               << " answers to readers");
  for (const auto& [node, most] : per_node) {
    CHECK_MESSAGE(most <= 10, "node" << node);
    CHECK_MESSAGE(most >= 2, "node" << node); // the sampler saw it: a pool connection beside its session
  }
  CHECK(sampler.max_total() <= 30); // directly: 3 x 10; through PgBouncer: its 27 and 3 sessions
  for (const auto& n : nodes) {
    std::ifstream in(n.log);
    const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK_MESSAGE(log.find("too many clients") == std::string::npos, n.log);
    std::filesystem::remove_all(n.dir);
  }
}

} // namespace

TEST_CASE("Connection budget: three nodes on a PostgreSQL allowing 40 connections, directly and through PgBouncer in "
          "transaction mode, each sync, republish and take over with at most 10 connections a node") {
  Cluster cluster;
  REQUIRE_MESSAGE(cluster.ok, "pg_budget_cluster.sh could not start PostgreSQL and PgBouncer (is pgbouncer installed? "
                              "deploy/install-deps.sh installs it)");
  SUBCASE("directly") { three_nodes(cluster, false); }
  SUBCASE("through PgBouncer in transaction mode") { three_nodes(cluster, true); }
}

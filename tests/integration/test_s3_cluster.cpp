// The S3 content tier with three `tributary run` nodes on one database and
// one bucket (a Ceph RGW from deploy/test.sh): split from test_s3.cpp, whose
// tests are about one node.
#include "../common/scratch_dir.h"
#include "daemon_client.h"
#include "http_get.h"
#include "process.h"
#include "s3_fixture.h"
#include "sync_fixture.h"

#include "republisher/url_scheme.h"
#include "resourcesync/reader.h"
#include "common/url_resolve.h"
#include "store/pg/pg_object_index.h"

#include "store/s3/object_tier.h"
#include "store/s3/s3_client.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <tuple>

using namespace tributary;
using namespace tributary::test;

namespace {

// One address in front of several nodes, as a load balancer: each request
// goes to the next node in turn, and to the one after when a node does not
// answer (a node killed midway).
class Rotator {
public:
  explicit Rotator(std::vector<std::string> nodes) : m_nodes(std::move(nodes)) {
    m_server.Get(".*", [this](const httplib::Request& req, httplib::Response& res) { forward(req, res); });
    m_running = std::make_unique<ServerThread>(m_server);
  }
  ~Rotator() { m_running.reset(); } // stopped while what forward() uses is still here
  std::string base() const { return m_running->base(); }
  // Requests each node answered.
  std::vector<size_t> answered() const {
    std::lock_guard lock(m_mutex);
    return m_answered;
  }

private:
  void forward(const httplib::Request& req, httplib::Response& res) {
    httplib::Headers headers;
    for (const auto& [name, value] : req.headers) {
      if (name != "Host" && name != "REMOTE_ADDR" && name != "REMOTE_PORT" && name != "LOCAL_ADDR" &&
          name != "LOCAL_PORT") {
        headers.emplace(name, value);
      }
    }
    const size_t first = m_next++;
    for (size_t k = 0; k < m_nodes.size(); ++k) {
      const size_t i = (first + k) % m_nodes.size();
      httplib::Client c(m_nodes[i]);
      c.set_connection_timeout(1);
      c.set_read_timeout(30);
      auto r = c.Get(req.target, headers);
      if (!r) {
        continue;
      }
      {
        std::lock_guard lock(m_mutex);
        ++m_answered[i];
      }
      res.status = r->status;
      for (const auto& [name, value] : r->headers) {
        if (name != "Content-Length" && name != "Transfer-Encoding" && name != "Connection" &&
            name != "Keep-Alive") {
          res.headers.emplace(name, value);
        }
      }
      res.body = std::move(r->body);
      return;
    }
    res.status = 502;
  }

  std::vector<std::string> m_nodes;
  httplib::Server m_server;
  std::unique_ptr<ServerThread> m_running;
  std::atomic<size_t> m_next{0};
  mutable std::mutex m_mutex;
  std::vector<size_t> m_answered = std::vector<size_t>(m_nodes.size());
};

// A change as a log holds it: the resource, the change, the sha-256 of the
// bytes (empty for a deletion).
using Logged = std::tuple<std::string, std::string, std::string>;

// The changes a database logged for the source named `source` after its
// first `skip` (the baseline's creations), sorted; a deletion without the
// hash of what it deleted.
std::vector<Logged> logged_changes(const std::string& conninfo, const std::string& source, size_t skip) {
  pqxx::connection c(conninfo);
  pqxx::read_transaction tx(c);
  std::vector<Logged> out;
  size_t n = 0;
  for (const auto& row : tx.exec_params("SELECT l.uri, l.change, CASE WHEN l.change = 'deleted' THEN '' "
                                        "ELSE l.sha256 END FROM change_log l JOIN feed f ON f.id = l.feed_id "
                                        "JOIN source s ON s.id = f.source_id WHERE s.name = $1 ORDER BY l.seq",
                                        source)) {
    if (n++ >= skip) {
      out.emplace_back(row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::string>());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Live resources of `source`: URI -> sha-256 of the bytes held.
std::map<std::string, std::string> live_of(const std::string& conninfo, const std::string& source) {
  pqxx::connection c(conninfo);
  pqxx::read_transaction tx(c);
  std::map<std::string, std::string> out;
  for (const auto& row : tx.exec_params("SELECT r.uri, r.blob_sha256 FROM resource r JOIN feed f ON f.id = r.feed_id "
                                        "JOIN source s ON s.id = f.source_id WHERE s.name = $1 AND r.state = 'live'",
                                        source)) {
    out[row[0].as<std::string>()] = row[1].as<std::string>();
  }
  return out;
}

} // namespace

TEST_CASE("S3 content: three `tributary run` nodes on one database and bucket follow 6 changing sources, one is "
          "killed midway, and a Tributary following them through one address in rotation ends identical to the "
          "sources, with no change lost or repeated") {
  // Six sources of 30 resources. Once everything is followed, each source
  // makes 50 changes over 20 rounds: a creation, an update and (in the
  // first 10 rounds) a deletion a round, each to a resource of its own, so
  // no two changes can fold into one.
  constexpr int k_sources = 6, k_rounds = 20;
  // Each request slowed: runs last, so a kill finds one in progress.
  SlowSources upstream(k_sources, 30, std::chrono::milliseconds(20),
                       [](int i) { return "source " + std::to_string(i) + " resource "; });
  auto& ups = upstream.ups;
  auto& sites = upstream.sites;
  const auto& sources = upstream.sources;
  TempDatabase db;
  const auto s3 = s3_config();
  ScratchDir dir("three");
  // The nodes, each with its own data_dir (its own machine), behind one
  // address that all of them publish as theirs.
  struct Node {
    std::string cfg, log, base;
    pid_t pid = 0;
  };
  std::vector<Node> nodes(3);
  std::vector<int> ports;
  std::vector<std::string> bases;
  for (size_t k = 0; k < nodes.size(); ++k) {
    ports.push_back(free_port());
    bases.push_back("http://127.0.0.1:" + std::to_string(ports.back()));
  }
  Rotator rotator(bases);
  for (size_t k = 0; k < nodes.size(); ++k) {
    const auto node_dir = dir / ("node" + std::to_string(k));
    std::filesystem::create_directories(node_dir);
    std::ofstream(node_dir / "token") << "token\n";
    json config = json::parse(config_text(db.conninfo(), node_dir, ports[k], sources));
    config["public_url"] = rotator.base();
    config["change_list_part_size"] = 40; // parts close, and Change Dump packages are built and shared
    config["content"] = s3_content(s3);
    nodes[k].cfg = write_config(node_dir / "tributary.json", config);
    nodes[k].log = (node_dir / "run.log").string();
    nodes[k].base = bases[k];
  }
  REQUIRE(run_tributary("migrate --config " + nodes[0].cfg).status == 0);
  for (auto& n : nodes) {
    n.pid = spawn_tributary({"run", "--config", n.cfg}, n.log);
  }
  struct Guards {
    std::vector<Node>& nodes;
    ~Guards() {
      for (auto& n : nodes) {
        ProcessGuard g(n.pid);
      }
    }
  } guards{nodes};
  for (int i = 0; i < k_sources; ++i) {
    CHECK(wait_for(nodes[1].base, [&](const json& st) { return in_sync(st, "s" + std::to_string(i), 30); }, 60));
  }

  // The follower: a Tributary of its own (its own database, the local
  // store), each of the three's sets a source of it, through the rotator.
  pub::UrlScheme published(rotator.base());
  std::vector<std::pair<std::string, std::string>> followed;
  for (int i = 0; i < k_sources; ++i) {
    followed.emplace_back("s" + std::to_string(i), published.capability_list("s" + std::to_string(i)));
  }
  TestDaemon follower(followed);
  follower.start();
  for (int i = 0; i < k_sources; ++i) {
    CHECK(wait_for(follower.base, [&](const json& st) { return in_sync(st, "s" + std::to_string(i), 30); }, 60));
  }

  // The changes, and the kill of node 0 in the middle of a run of its.
  const rs::Timestamp t0 = ts("2026-01-01T00:00:00Z");
  std::vector<std::vector<rs::Entry>> change_lists(k_sources);
  std::vector<std::vector<Logged>> made(k_sources);
  long long killed_at = 0;
  for (int round = 0; round < k_rounds; ++round) {
    for (int i = 0; i < k_sources; ++i) {
      Site& site = *sites[i];
      const auto at = [&](int k) { return t0 + std::chrono::seconds(60 * round + k + 1); };
      const std::string created = "/res/new" + std::to_string(round) + ".txt";
      const std::string updated = "/res/" + std::to_string(round) + ".txt";
      const std::string bytes_c = "source " + std::to_string(i) + " created in round " + std::to_string(round);
      const std::string bytes_u = "source " + std::to_string(i) + " updated in round " + std::to_string(round);
      site.put(created, bytes_c);
      site.put(updated, bytes_u);
      change_lists[i].push_back(change_entry(ups[i]->url(created), rs::Change::created, at(0), bytes_c));
      change_lists[i].push_back(change_entry(ups[i]->url(updated), rs::Change::updated, at(1), bytes_u));
      made[i].emplace_back(ups[i]->url(created), "created", rs::hash_hex(rs::HashAlgorithm::sha256, bytes_c));
      made[i].emplace_back(ups[i]->url(updated), "updated", rs::hash_hex(rs::HashAlgorithm::sha256, bytes_u));
      if (round < 10) {
        const std::string deleted = "/res/" + std::to_string(29 - round) + ".txt";
        site.erase(deleted);
        change_lists[i].push_back(change_entry(ups[i]->url(deleted), rs::Change::deleted, at(2)));
        made[i].emplace_back(ups[i]->url(deleted), "deleted", "");
      }
      site.publish_change_list("/cl.xml", t0, std::nullopt, change_lists[i]);
    }
    if (round == k_rounds / 2) {
      const bool holding = [&] {
        for (int tries = 0; tries < 300; ++tries) {
          if (holds_running_lease(db.conninfo(), nodes[0].pid)) {
            return true;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return false;
      }();
      CHECK(holding);
      killed_at = count(db.conninfo(), "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint");
      ::kill(nodes[0].pid, SIGKILL);
      ::waitpid(nodes[0].pid, nullptr, 0);
      nodes[0].pid = 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }

  // Every source is taken over within a bounded time: a run started after
  // the kill succeeded for each.
  const auto taken_over = [&] {
    return count(db.conninfo(), "SELECT count(DISTINCT source_id) FROM sync_run WHERE status = 'succeeded' AND "
                                "started_at > to_timestamp(" + std::to_string(killed_at) + " / 1000000.0)");
  };
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (taken_over() < k_sources && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(taken_over() == k_sources);

  // The three end with each source as it is, and logged each change once.
  for (int i = 0; i < k_sources; ++i) {
    const std::string name = "s" + std::to_string(i);
    CAPTURE(name);
    std::map<std::string, std::string> expected;
    for (const auto& [path, bytes] : sites[i]->content) {
      expected[ups[i]->url(path)] = rs::hash_hex(rs::HashAlgorithm::sha256, bytes);
    }
    CHECK(wait_for(nodes[1].base, [&](const json& st) { return in_sync(st, name, expected.size()); }, 30));
    CHECK(live_of(db.conninfo(), name) == expected);
    std::sort(made[i].begin(), made[i].end());
    CHECK(logged_changes(db.conninfo(), name, 30) == made[i]);

    // The follower too, under the names the three publish.
    std::map<std::string, std::string> republished;
    for (const auto& [uri, sha] : expected) {
      republished[published.resource(name, uri)] = sha;
    }
    std::vector<Logged> followed_changes;
    for (const auto& [uri, change, sha] : made[i]) {
      followed_changes.emplace_back(published.resource(name, uri), change, sha);
    }
    std::sort(followed_changes.begin(), followed_changes.end());
    // The follower's rotation still names the killed node: a run that hits it
    // fails and backs off, so on a loaded 2-core host it may take longer than
    // the nodes themselves (one CI run: 46 s for this case, 14 s alone).
    CHECK(wait_for(follower.base, [&](const json& st) { return in_sync(st, name, expected.size()); }, 90));
    CHECK(live_of(follower.db.conninfo(), name) == republished);
    CHECK(logged_changes(follower.db.conninfo(), name, 30) == followed_changes);
  }
  // Each set's dumps, read through the one address: every package a
  // document lists (whichever node answered for it) is served, by
  // whichever node answers for that, with the bytes its hash says.
  CHECK(count(db.conninfo(), "SELECT count(*) FROM shared_dump") == k_sources);
  CHECK(count(db.conninfo(), "SELECT count(DISTINCT set_name) FROM shared_dump_file WHERE part IS NOT NULL") ==
        k_sources);
  for (int i = 0; i < k_sources; ++i) {
    const std::string name = "s" + std::to_string(i);
    for (const std::string& dump : {published.resource_dump(name), published.change_dump(name)}) {
      for (int again = 0; again < 3; ++again) {
        CAPTURE(dump);
        Got listing = http_get(dump);
        REQUIRE(listing.status == 200);
        auto doc = rs::parse_document(listing.body);
        REQUIRE(doc.summary.valid());
        REQUIRE_FALSE(doc.document.entries.empty());
        for (const auto& e : doc.document.entries) {
          for (int node = 0; node < 2; ++node) {
            Got zip = http_get(e.loc);
            CHECK(zip.status == 200);
            CHECK(rs::hash_hex(rs::HashAlgorithm::sha256, zip.body) == e.md->hash[0].hex);
          }
        }
      }
    }
  }
  // Every node answered through the one address, and the follower's runs
  // never fell back from a document one node offered and another lacked.
  for (size_t answered : rotator.answered()) {
    CHECK(answered > 0);
  }
  CHECK(count(follower.db.conninfo(), "SELECT count(*) FROM sync_run WHERE status IN ('failed', 'partial')") == 0);
  CHECK(follower.log_text().find("unusable") == std::string::npos);
}

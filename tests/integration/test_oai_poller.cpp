// Our OAI-PMH face under concurrent commits (#52): a harvester that asks
// every half second for what changed `from` the previous answer's
// responseDate, while four Sources change at once and are synced side by
// side, misses nothing: what it merged equals a whole harvest at the end,
// record for record and datestamp for datestamp. On one node, then on three
// nodes sharing one database, the poller asking a different node each time
// (tokens too). A batch that commits late with an early datestamp is the
// classic way such a harvester loses records.
#include "daemon_client.h"
#include "http_get.h"
#include "process.h"
#include "../common/scratch_dir.h"

#include <csignal>
#include <map>
#include <regex>

#include <sys/wait.h>

using namespace tributary;
using namespace tributary::test;

namespace {

std::string first_match(const std::string& text, const std::regex& re) {
  std::smatch m;
  return std::regex_search(text, m, re) ? m[1].str() : std::string();
}

struct Record {
  bool deleted = false;
  std::string datestamp;
  bool operator==(const Record&) const = default;
};

// One ListIdentifiers harvest through every token, the i-th request to
// bases[(turn + i) % n]; merged into `into`. The first page's responseDate.
std::string harvest(const std::vector<std::string>& bases, size_t& turn, const std::string& from,
                    std::map<std::string, Record>& into) {
  static const std::regex date("<responseDate>([^<]+)</responseDate>");
  static const std::regex token("<resumptionToken[^>]*>([^<]*)</resumptionToken>");
  static const std::regex header(
      "<header( status=\"deleted\")?><identifier>([^<]+)</identifier><datestamp>([^<]+)</datestamp>");
  std::string args = "verb=ListIdentifiers&metadataPrefix=oai_dc" + (from.empty() ? "" : "&from=" + from);
  std::string response_date;
  for (;;) {
    Got g = http_get(bases[turn++ % bases.size()] + "/oai?" + args);
    REQUIRE(g.status == 200);
    if (response_date.empty()) {
      response_date = first_match(g.body, date);
    }
    if (g.body.find("noRecordsMatch") != std::string::npos) {
      break;
    }
    REQUIRE(g.body.find("<error") == std::string::npos);
    for (auto it = std::sregex_iterator(g.body.begin(), g.body.end(), header); it != std::sregex_iterator(); ++it) {
      into[(*it)[2].str()] = Record{(*it)[1].matched, (*it)[3].str()};
    }
    const std::string next = first_match(g.body, token);
    if (next.empty()) {
      break;
    }
    args = "verb=ListIdentifiers&resumptionToken=" + next;
  }
  REQUIRE(!response_date.empty());
  return response_date;
}

// Kills what it holds at the end (the simulators, the daemons).
struct Processes {
  std::vector<pid_t> pids;
  ~Processes() {
    for (pid_t p : pids) {
      if (p > 0 && waitpid(p, nullptr, WNOHANG) == 0) {
        kill(p, SIGKILL);
        waitpid(p, nullptr, 0);
      }
    }
  }
};

// Four Sources changing at 25/s each until 150 changes, followed by
// `nodes` daemons on one database with the poller beside them; what it
// merged must equal a whole harvest once all is synced.
void poll_while_committing(size_t nodes) {
  ScratchDir dir("oai-poller");
  std::vector<std::pair<std::string, std::string>> sources;
  Processes processes;
  for (int i = 0; i < 4; ++i) {
    const int port = free_port();
    processes.pids.push_back(spawn_tributary({"simulate", "--listen", "127.0.0.1:" + std::to_string(port), "--resources",
                                       "60", "--change-rate", "25", "--max-changes", "150", "--size", "64",
                                       "--part-size", "30", "--seed", std::to_string(20 + i)},
                                      (dir / ("sim" + std::to_string(i) + ".log")).string()));
    sources.emplace_back("s" + std::to_string(i), "http://127.0.0.1:" + std::to_string(port) + "/");
  }
  TempDatabase db;
  struct Node {
    std::filesystem::path dir;
    std::string cfg, base;
    pid_t pid = 0;
  };
  std::vector<Node> daemons(nodes);
  std::vector<std::string> bases;
  int first_port = 0;
  for (size_t i = 0; i < nodes; ++i) {
    Node& n = daemons[i];
    n.dir = node_dir("tributary-oai-poller", i);
    n.cfg = (n.dir / "tributary.json").string();
    const int port = free_port();
    first_port = first_port ? first_port : port;
    n.base = "http://127.0.0.1:" + std::to_string(port);
    json j = json::parse(config_text(db.conninfo(), n.dir, port, sources));
    j["max_concurrent_syncs"] = 4; // the sources commit side by side
    // One public URL, as behind a load balancer: identifiers are our URLs.
    j["public_url"] = "http://127.0.0.1:" + std::to_string(nodes == 1 ? port : first_port);
    std::ofstream(n.cfg) << j.dump(2);
    bases.push_back(n.base);
  }
  REQUIRE(run_tributary("migrate --config " + daemons[0].cfg).status == 0);
  for (auto& n : daemons) {
    n.pid = spawn_tributary({"run", "--config", n.cfg}, (n.dir / "daemon.log").string());
    processes.pids.push_back(n.pid);
  }
  for (const auto& b : bases) {
    REQUIRE(eventually([&] { return http_get(b + "/oai?verb=Identify").status == 200; }, 30));
  }

  // Poll until the log has been still for 4 s after the Sources stopped
  // (4 × (60 + 150) changes at most; each Source stops after 150).
  pqxx::connection c(db.conninfo());
  auto log_size = [&c] {
    pqxx::nontransaction tx(c);
    return tx.exec1("SELECT count(*) FROM change_log")[0].as<long long>();
  };
  std::map<std::string, Record> merged;
  size_t turn = 0;
  std::string from;
  int polls = 0;
  long long last_size = -1;
  auto still_since = std::chrono::steady_clock::now();
  const auto started = std::chrono::steady_clock::now();
  std::string froms; // each poll's from, for a failure's message
  while (std::chrono::steady_clock::now() - started < std::chrono::seconds(90)) {
    from = harvest(bases, turn, from, merged);
    froms += " " + from;
    ++polls;
    const long long size = log_size();
    if (size != last_size) {
      last_size = size;
      still_since = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - still_since > std::chrono::seconds(4) &&
               std::chrono::steady_clock::now() - started > std::chrono::seconds(8)) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  from = harvest(bases, turn, from, merged); // the last poll, after all is still
  std::map<std::string, Record> whole;
  harvest(bases, turn, "", whole);
  INFO("nodes " << nodes << ", polls " << polls << ", log " << last_size);
  CHECK(last_size > 4 * 60);
  CHECK(polls > 10);
  CHECK(whole.size() >= 4 * 60);
  size_t missed = 0, stale = 0;
  for (const auto& [id, r] : whole) {
    auto m = merged.find(id);
    missed += m == merged.end();
    stale += m != merged.end() && !(m->second == r);
    // Named, with what the poller last took: which datestamp it went past.
    if (m == merged.end() || !(m->second == r)) {
      MESSAGE(id << ": whole harvest " << (r.deleted ? "deleted " : "") << r.datestamp << ", poller "
                 << (m == merged.end() ? std::string("never saw it")
                                       : (m->second.deleted ? "deleted " : "") + m->second.datestamp)
                 << "; its froms: " << froms);
    }
  }
  CHECK(missed == 0);
  CHECK(stale == 0);
  CHECK(merged.size() == whole.size());
  // And the harvest is the store: one record per resource held.
  pqxx::nontransaction tx(c);
  CHECK(static_cast<long long>(whole.size()) == tx.exec1("SELECT count(*) FROM resource")[0].as<long long>());
}

} // namespace

TEST_CASE("OAI-PMH provider: a poller asking from the last responseDate every half second misses nothing while four "
          "sources commit at once, on one node") {
  poll_while_committing(1);
}

TEST_CASE("OAI-PMH provider: a poller asking from the last responseDate misses nothing on three nodes sharing one "
          "database, each request to the next node") {
  poll_while_committing(3);
}

TEST_CASE("OAI-PMH provider: an aggregate with nothing in it yet answers noRecordsMatch for oai_dc, not "
          "cannotDisseminateFormat") {
  TestDaemon d({});
  d.start();
  REQUIRE(eventually([&] { return http_get(d.base + "/oai?verb=Identify").status == 200; }, 30));
  const std::string body = http_get(d.base + "/oai?verb=ListIdentifiers&metadataPrefix=oai_dc").body;
  INFO(body);
  CHECK(body.find("<error code=\"noRecordsMatch\">") != std::string::npos);
  CHECK(http_get(d.base + "/oai?verb=ListIdentifiers&metadataPrefix=marc").body.find("cannotDisseminateFormat") !=
        std::string::npos);
}

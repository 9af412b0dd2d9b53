#pragma once

// Talking to a `tributary run` started by a test: HTTP calls, the status
// API, a config for it, and the process itself.
#include "../common/files.h"
#include "pg_fixture.h"
#include "process.h"

#include "sync_engine/fetcher.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace tributary::test {

using nlohmann::json;

// The admin token every test daemon's config names (daemon_config below).
inline const httplib::Headers k_admin{{"Authorization", "Bearer token"}};

// The value of one series of a /metrics text ("name{labels}"), or -1.
inline double metric(const std::string& text, const std::string& series) {
  const auto at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size() + 2));
}

// Seconds since `t`.
inline double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

struct Answer {
  int status = 0;
  std::string body;
  std::string content_type;
};

// Every answer of the status API a test reads (through call() below) is
// checked against docs/openapi.json when the test's process ends
// (check_openapi.py --partial): the document is the contract. An answer
// that does not match fails the process, naming it. A few of each
// (method, path, status) are kept: wait_for() asks hundreds of times.
class ApiAnswers {
public:
  void add(const std::string& method, const std::string& path, int status, const std::string& body) {
    if (status == 0) {
      return;
    }
    std::lock_guard lock(m_mutex);
    const std::string key = method + " " + path.substr(0, path.find('?')) + " " + std::to_string(status);
    auto& kept = m_kept[key];
    json a{{"method", method}, {"path", path}, {"status", status}, {"body", body}};
    if (kept.size() < 3) {
      kept.push_back(std::move(a));
    } else {
      kept.back() = std::move(a); // the newest stays
    }
  }
  ~ApiAnswers() {
    if (m_kept.empty()) {
      return;
    }
    const auto file = std::filesystem::temp_directory_path() / ("tributary-api-answers-" + std::to_string(::getpid()));
    {
      std::ofstream out(file.string() + ".jsonl");
      for (const auto& [key, kept] : m_kept) {
        for (const auto& a : kept) {
          out << a.dump() << '\n';
        }
      }
    }
    const std::string cmd = "python3 " + (std::filesystem::path(TRIBUTARY_SOURCE_DIR) / "tests/integration/check_openapi.py")
                                              .string() +
                            " --partial " + (std::filesystem::path(TRIBUTARY_SOURCE_DIR) / "docs/openapi.json").string() +
                            " " + file.string() + ".jsonl > " + file.string() + ".out 2>&1";
    const int rc = std::system(cmd.c_str());
    std::ifstream in(file.string() + ".out");
    const std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::filesystem::remove(file.string() + ".jsonl");
    std::filesystem::remove(file.string() + ".out");
    if (rc != 0) {
      std::fprintf(stderr, "status API answers that do not match docs/openapi.json:\n%s\n", said.c_str());
      std::fflush(stderr);
      std::_Exit(1);
    }
  }

private:
  std::mutex m_mutex;
  std::map<std::string, std::vector<json>> m_kept;
};

inline ApiAnswers& api_answers() {
  static ApiAnswers answers;
  return answers;
}

inline Answer call(const std::string& base, const std::string& method, const std::string& path,
            const httplib::Headers& headers = {}, const std::string& body = "") {
  auto u = sync::parse_url(base);
  httplib::Client c(u->origin());
  c.set_connection_timeout(2);
  c.set_read_timeout(5);
  auto r = method == "POST" ? c.Post(path.c_str(), headers, body, "application/json") : c.Get(path.c_str(), headers);
  if (!r) {
    return {};
  }
  // The status API answers JSON, errors too; another answer under /api/ is
  // not the API's (the public listener when operator_listen moved it).
  if (path.rfind("/api/", 0) == 0 && r->get_header_value("Content-Type").rfind("application/json", 0) == 0) {
    api_answers().add(method, path, r->status, r->body);
  }
  return {r->status, r->body, r->get_header_value("Content-Type")};
}

inline json status_of(const std::string& base) {
  Answer a = call(base, "GET", "/api/v1/status");
  if (a.status != 200) {
    return json();
  }
  auto j = json::parse(a.body, nullptr, false);
  return j.is_discarded() ? json() : j;
}

inline const json* find_source(const json& status, const std::string& name) {
  if (!status.is_object() || !status.contains("data")) {
    return nullptr;
  }
  for (const auto& s : status["data"]["sources"]) {
    if (s["name"] == name) {
      return &s;
    }
  }
  return nullptr;
}

// Waits until `pred(status)` holds (true) or `seconds` pass (false).
inline bool wait_for(const std::string& base, const std::function<bool(const json&)>& pred, double seconds = 20) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (pred(status_of(base))) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

inline bool in_sync(const json& st, const std::string& name, uint64_t live) {
  const json* s = find_source(st, name);
  return s && (*s)["activity"] == "idle" && !(*s)["last_success"].is_null() && (*s)["resources"]["live"] == live;
}

inline std::string config_text(const std::string& db, const std::filesystem::path& dir, int port,
                        const std::vector<std::pair<std::string, std::string>>& sources) {
  json j{{"database", db},
         {"data_dir", (dir / "data").string()},
         {"listen", "127.0.0.1:" + std::to_string(port)},
         {"admin_token_file", (dir / "token").string()},
         {"max_concurrent_syncs", 2}};
  j["sources"] = json::array();
  for (const auto& [name, url] : sources) {
    j["sources"].push_back({{"name", name}, {"url", url}, {"interval", "1s"}});
  }
  return j.dump(2);
}


// How many pairs of runs of one source overlapped in time (never more
// than 0: a source's lease admits one run at a time, across processes).
inline const char* const k_overlapping_runs_sql =
    "SELECT count(*) FROM sync_run a JOIN sync_run b ON a.source_id = b.source_id AND a.id < b.id "
    "AND b.started_at < coalesce(a.finished_at, 'infinity') AND a.started_at < coalesce(b.finished_at, 'infinity')";

// A fresh directory for daemon `i` of a test (`prefix`-PID-i under the
// temporary directory), with the admin token "token" in it.
inline std::filesystem::path node_dir(const std::string& prefix, size_t i) {
  auto dir = std::filesystem::temp_directory_path() /
             (prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(i));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "token") << "token\n";
  return dir;
}

// Whether the daemon of process `pid` holds a source's lease with a run of
// it in progress: its session connection (named after it) holds the
// source's advisory lock (class "trib", two-key form), and the source has a
// run `running` (only the lock's holder can have one). The lock alone is not
// enough: it is taken before the run is recorded.
inline bool holds_running_lease(const std::string& conninfo, pid_t pid) {
  pqxx::connection c(conninfo);
  pqxx::nontransaction tx(c);
  return !tx.exec_params("SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                         "JOIN sync_run r ON r.source_id = l.objid::bigint AND r.status = 'running' "
                         "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 1953655138::oid "
                         "AND l.objsubid = 2 AND a.application_name LIKE $1",
                         "%(pid " + std::to_string(pid) + " %")
              .empty();
}

// `tributary run` of its own: a database (migrated), a directory with the
// admin token, a port and a config naming `sources`; started by start(),
// killed (if still running) and removed at the end.
struct TestDaemon {
  TempDatabase db;
  std::filesystem::path dir;
  int port = 0;
  std::string base, cfg, log;
  pid_t pid = 0;

  explicit TestDaemon(const std::vector<std::pair<std::string, std::string>>& sources,
                      const std::string& token = "token") {
    static int n = 0;
    dir = std::filesystem::temp_directory_path() /
          ("tributary-daemon-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "token") << token << "\n";
    port = free_port();
    base = "http://127.0.0.1:" + std::to_string(port);
    cfg = (dir / "tributary.json").string();
    log = (dir / "daemon.log").string();
    std::ofstream(cfg) << config_text(db.conninfo(), dir, port, sources);
    REQUIRE(run_tributary("migrate --config " + cfg).status == 0);
  }
  ~TestDaemon() {
    if (pid > 0 && waitpid(pid, nullptr, WNOHANG) == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    std::filesystem::remove_all(dir);
  }
  void start() { pid = spawn_tributary({"run", "--config", cfg}, log); }
  std::string log_text() const { return slurp(log); }
  // SIGTERM; the seconds until the process was gone, and its exit status.
  std::pair<double, int> stop() {
    const auto at = std::chrono::steady_clock::now();
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    pid = 0;
    return {std::chrono::duration<double>(std::chrono::steady_clock::now() - at).count(),
            WIFEXITED(status) ? WEXITSTATUS(status) : -1};
  }
};

// One value of a query on the daemon's database ("" for none or NULL).
inline std::string scalar(const TestDaemon& d, const std::string& sql) {
  pqxx::connection c(d.db.conninfo());
  pqxx::read_transaction tx(c);
  auto r = tx.exec(sql);
  return r.empty() || r[0][0].is_null() ? std::string() : r[0][0].as<std::string>();
}

// Rewrites a daemon's config (before it starts, or then SIGHUP).
inline void edit_config(TestDaemon& d, const std::function<void(json&)>& f) {
  json j;
  {
    std::ifstream in(d.cfg);
    j = json::parse(in);
  }
  f(j);
  std::ofstream(d.cfg) << j.dump(2);
}

} // namespace tributary::test

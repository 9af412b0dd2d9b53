#include "aggregator/setup/config.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>

using namespace tributary;
using namespace tributary::agg;

namespace {

bool has(const ConfigLoad& l, const std::string& problem) {
  return std::find(l.problems.begin(), l.problems.end(), problem) != l.problems.end();
}

std::string all(const ConfigLoad& l) {
  std::string s;
  for (const auto& p : l.problems) {
    s += p + "\n";
  }
  return s;
}

} // namespace

TEST_CASE("Config: the commented example is valid") {
  setenv("EXAMPLE_REPOSITORY_TOKEN", "t", 1);
  auto l = load_config(std::string(TRIBUTARY_SOURCE_DIR) + "/config/example.json");
  INFO(all(l));
  REQUIRE(l.config);
  const auto& s = l.config->sources.at(0);
  CHECK(s.name == "example-repository");
  CHECK(s.mirrors.at(0).pri == 2);
  CHECK(s.auth.type == sync::AuthConfig::Type::bearer);
  CHECK(s.auth.secret.env == "EXAMPLE_REPOSITORY_TOKEN");
  CHECK(s.timeout == std::chrono::seconds(60));
  CHECK(s.max_deletion_share == 0.5);
  CHECK(s.selects("https://repository.example.org/items/1.pdf", std::string("application/pdf")));
  CHECK(s.selects("https://repository.example.org/items/1.txt", std::string("text/plain; charset=utf-8")));
  CHECK_FALSE(s.selects("https://repository.example.org/items/1.tmp", std::string("text/plain")));
  CHECK_FALSE(s.selects("https://repository.example.org/other/1.pdf", std::string("application/pdf")));
  CHECK_FALSE(s.selects("https://repository.example.org/items/1.png", std::string("image/png")));
  CHECK_FALSE(s.selects("https://repository.example.org/items/1", std::nullopt));
  CHECK(l.config->dump_package_size == 10000);
  CHECK(l.config->dump_package_bytes == 1073741824);
}

TEST_CASE("Config: dump package limits, within what a Tributary accepts") {
  auto ok = parse_config(R"({"database": "db", "data_dir": "/tmp/x", "dump_package_size": 500,
                            "dump_package_bytes": 104857600})",
                         "c.json");
  REQUIRE(ok.config);
  CHECK(ok.config->dump_package_size == 500);
  CHECK(ok.config->dump_package_bytes == 104857600);
  auto bad = parse_config(R"({"database": "db", "data_dir": "/tmp/x", "dump_package_size": 0,
                             "dump_package_bytes": 17179869185})",
                          "c.json");
  INFO(all(bad));
  CHECK_FALSE(bad.config);
  CHECK(has(bad, "c.json: /dump_package_size: must be between 1 and 1000000"));
  CHECK(has(bad, "c.json: /dump_package_bytes: must be between 1024 and 17179869184"));
}

TEST_CASE("Config: defaults") {
  auto l = parse_config(R"({"database": "dbname=t", "data_dir": "/tmp/d",
                            "sources": [{"name": "a", "url": "http://a.example.org/"}]})",
                        "c.json");
  REQUIRE(l.config);
  const auto& s = l.config->sources[0];
  CHECK(s.concurrency == 8);
  CHECK(s.verify_tls);
  CHECK(s.enabled);
  CHECK(s.capability_lists.empty());
  CHECK(s.max_deletion_share == 0.5);
  CHECK(s.selects("http://anything", std::nullopt));
}

TEST_CASE("Config: every problem is reported with its JSON pointer") {
  auto l = parse_config(R"({
    "database": "",
    "colour": "blue",
    "sources": [
      {"name": "ok", "url": "http://a.example.org/"},
      {"name": "bad name!", "url": "ftp://x", "concurrency": 0, "mirrors": [{"url": "http://m/", "pri": 0}],
       "include": ["re:(unclosed"], "media_types": ["pdf"], "auth": {"type": "basic", "password_env": "P"},
       "verify_tls": "yes", "timeout_seconds": -1, "max_deletion_share": 1.5, "extra": 1},
      {"name": "ok", "url": "http://b.example.org/", "auth": {"type": "bearer"}}
    ]})",
                        "c.json");
  INFO(all(l));
  CHECK_FALSE(l.config);
  CHECK(has(l, "c.json: /database: must not be empty"));
  CHECK(has(l, "c.json: /colour: unknown key"));
  CHECK(has(l, "c.json: /data_dir: missing (required)"));
  CHECK(has(l, "c.json: /sources/1/name: use letters, digits, '-', '_' and '.' only"));
  CHECK(has(l, "c.json: /sources/1/url: expected an http(s) or file URL"));
  CHECK(has(l, "c.json: /sources/1/concurrency: must be between 1 and 256"));
  CHECK(has(l, "c.json: /sources/1/mirrors/0/pri: must be between 1 and 999999"));
  CHECK(l.problems.end() != std::find_if(l.problems.begin(), l.problems.end(), [](const std::string& p) {
          return p.rfind("c.json: /sources/1/include/0: invalid regular expression", 0) == 0;
        }));
  CHECK(has(l, "c.json: /sources/1/media_types/0: expected a media type such as \"application/pdf\" or \"text/*\""));
  CHECK(has(l, "c.json: /sources/1/auth/username: missing (required for basic auth)"));
  CHECK(has(l, "c.json: /sources/1/verify_tls: expected true or false"));
  CHECK(has(l, "c.json: /sources/1/timeout_seconds: must be between 0.1 and 3600"));
  CHECK(has(l, "c.json: /sources/1/max_deletion_share: must be between 0 and 1"));
  CHECK(has(l, "c.json: /sources/1/extra: unknown key"));
  CHECK(has(l, "c.json: /sources/2/auth: give exactly one of token_file and token_env"));
  CHECK(has(l, "c.json: /sources/2/name: duplicate source name 'ok'"));
}

TEST_CASE("Config: not JSON, or not readable") {
  auto l = parse_config("{", "c.json");
  REQUIRE(l.problems.size() == 1);
  CHECK(l.problems[0].rfind("c.json: not valid JSON:", 0) == 0);
  auto m = load_config("/nonexistent/tributary.json");
  CHECK(has(m, "/nonexistent/tributary.json: cannot be read"));
}

TEST_CASE("Config: named sets must name configured sources") {
  auto ok = parse_config(R"({"database": "d", "data_dir": "/tmp/d", "sources": [{"name": "a", "url": "http://a.example.org/"}],
                             "sets": [{"name": "everything", "sources": ["a"]}]})",
                         "c.json");
  REQUIRE(ok.config);
  REQUIRE(ok.config->sets.size() == 1);
  CHECK(ok.config->sets[0].sources == std::vector<std::string>{"a"});
  CHECK(ok.config->public_url == "http://127.0.0.1:8080");
  auto bad = parse_config(R"({"database": "d", "data_dir": "/tmp/d", "sets": [{"name": "x", "sources": ["nope"]}],
                              "listen": "nowhere"})",
                          "c.json");
  CHECK(has(bad, "c.json: /sets/0/sources/0: no source named 'nope'"));
  CHECK(has(bad, "c.json: /listen: expected \"host:port\", e.g. \"127.0.0.1:8080\""));
}

TEST_CASE("Config: durations for the scheduler") {
  CHECK(parse_duration("90s") == std::chrono::seconds(90));
  CHECK(parse_duration("15m") == std::chrono::seconds(900));
  CHECK(parse_duration("1h30m") == std::chrono::seconds(5400));
  CHECK(parse_duration("2d") == std::chrono::seconds(172800));
  CHECK_FALSE(parse_duration(""));
  CHECK_FALSE(parse_duration("15"));
  CHECK_FALSE(parse_duration("m"));
  CHECK_FALSE(parse_duration("0s"));
  CHECK_FALSE(parse_duration("5w"));
  CHECK_FALSE(parse_duration("-5m"));
}

TEST_CASE("Config: daemon keys (schedule, strategy, logging, concurrency, admin token) and their problems") {
  auto ok = parse_config(R"({"database": "db", "data_dir": "/tmp/x", "max_concurrent_syncs": 3,
      "admin_token_env": "TRIBUTARY_ADMIN", "log": {"level": "debug", "format": "json"},
      "sources": [{"name": "a", "url": "http://a.example/", "interval": "5m", "audit_interval": "1d",
                   "strategy": "lists"},
                  {"name": "b", "url": "http://b.example/", "audit_interval": "never"}]})",
                         "c.json");
  INFO(all(ok));
  REQUIRE(ok.config);
  CHECK(ok.config->max_concurrent_syncs == 3);
  REQUIRE(ok.config->admin_token);
  CHECK(ok.config->admin_token->env == "TRIBUTARY_ADMIN");
  CHECK(ok.config->log_level == "debug");
  CHECK(ok.config->log_format == "json");
  CHECK(ok.config->sources[0].interval == std::chrono::seconds(300));
  CHECK(ok.config->sources[0].audit_interval == std::chrono::seconds(86400));
  CHECK(ok.config->sources[0].strategy == "lists");
  CHECK(ok.config->sources[1].interval == std::chrono::seconds(900));
  CHECK(ok.config->sources[1].audit_interval == std::chrono::seconds(0));
  CHECK(ok.config->sources[1].strategy == "auto");

  auto bad = parse_config(R"({"database": "db", "data_dir": "/tmp/x", "max_concurrent_syncs": 0,
      "admin_token_env": "A", "admin_token_file": "/nonexistent/token", "log": {"level": "loud", "colour": true},
      "sources": [{"name": "a", "url": "http://a.example/", "interval": "often", "strategy": "torrent"}]})",
                          "c.json");
  INFO(all(bad));
  CHECK_FALSE(bad.config);
  CHECK(has(bad, "c.json: /max_concurrent_syncs: must be between 1 and 256"));
  CHECK(has(bad, "c.json: /admin_token_file: cannot read /nonexistent/token"));
  CHECK(has(bad, "c.json: /admin_token_env: give only one of admin_token_file and admin_token_env"));
  CHECK(has(bad, "c.json: /log/level: expected one of \"debug\", \"info\", \"warn\", \"error\""));
  CHECK(has(bad, "c.json: /log/colour: unknown key"));
  CHECK(has(bad, "c.json: /sources/0/interval: expected a duration such as \"30s\", \"15m\", \"1h30m\" or \"1d\""));
  CHECK(has(bad, "c.json: /sources/0/strategy: expected one of \"auto\", \"lists\", \"dumps\""));
}

TEST_CASE("Config: the PostgreSQL connection budget: 10 by default, a wait, a session connection of its own") {
  auto plain = parse_config(R"({"database": "db", "data_dir": "/tmp/x"})", "c.json");
  REQUIRE(plain.config);
  CHECK(plain.config->database_connections == 10);
  CHECK(plain.config->database_wait == std::chrono::seconds(30));
  CHECK(plain.config->database_session.empty());
  auto ok = parse_config(R"({"database": "host=bouncer port=6432", "data_dir": "/tmp/x", "database_connections": 4,
      "database_wait": "5s", "database_session": "host=pg port=5432"})",
                         "c.json");
  INFO(all(ok));
  REQUIRE(ok.config);
  CHECK(ok.config->database_connections == 4);
  CHECK(ok.config->database_wait == std::chrono::seconds(5));
  CHECK(ok.config->database_session == "host=pg port=5432");
  auto bad = parse_config(R"({"database": "db", "data_dir": "/tmp/x", "database_connections": 1,
      "database_wait": "never"})",
                          "c.json");
  INFO(all(bad));
  CHECK_FALSE(bad.config);
  CHECK(has(bad, "c.json: /database_connections: must be between 2 and 1000"));
  CHECK(has(bad, "c.json: /database_wait: expected a duration such as \"30s\", \"15m\", \"1h30m\" or \"1d\""));
}

TEST_CASE("Config: the example's exclude pattern matches a 1 MiB URI in linear time, without recursion") {
  // std::regex recursed once per character here and overflowed the stack
  // (SIGSEGV) on a 300 KB loc; RE2 does not recurse.
  setenv("EXAMPLE_REPOSITORY_TOKEN", "t", 1);
  auto l = load_config(std::string(TRIBUTARY_SOURCE_DIR) + "/config/example.json");
  REQUIRE(l.config);
  const auto& s = l.config->sources.at(0);
  const std::string huge = "https://repository.example.org/items/" + std::string(1024 * 1024, 'a');
  CHECK(s.selects(huge, std::string("text/plain")));
  CHECK_FALSE(s.selects(huge + ".tmp", std::string("text/plain")));
  auto bad = parse_config(R"({"database": "d", "data_dir": "/tmp/d", "sources": [{"name": "a", "url": "http://a.example.org/",
                              "exclude": ["re:(unclosed"]}]})",
                          "c.json");
  REQUIRE_FALSE(bad.problems.empty());
  CHECK(bad.problems[0].find("c.json: /sources/0/exclude/0: invalid regular expression: missing )") == 0);
}

TEST_CASE("Config: source and set names are a safe alphabet, never '', '.' or '..'") {
  for (const char* name : {"", ".", "..", "../..", "a/b", ".hidden", "-x", "sp ace", "caf\xc3\xa9"}) {
    CAPTURE(name);
    nlohmann::json j = {{"database", "d"},
                        {"data_dir", "/tmp/d"},
                        {"sources", {{{"name", name}, {"url", "http://a.example.org/"}}}},
                        {"sets", {{{"name", name}, {"sources", nlohmann::json::array()}}}}};
    auto l = parse_config(j.dump(), "c.json");
    CHECK_FALSE(l.config);
    bool source_refused = false;
    bool set_refused = false;
    for (const auto& p : l.problems) {
      source_refused = source_refused || p.rfind("c.json: /sources/0/name: ", 0) == 0;
      set_refused = set_refused || p.rfind("c.json: /sets/0/name: ", 0) == 0;
    }
    CHECK(source_refused);
    CHECK(set_refused);
  }
  auto ok = parse_config(R"({"database": "d", "data_dir": "/tmp/d",
                             "sources": [{"name": "arXiv.org_2-b", "url": "http://a.example.org/"}]})",
                         "c.json");
  INFO(all(ok));
  CHECK(ok.config);
}

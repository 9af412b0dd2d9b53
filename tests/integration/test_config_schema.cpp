// Issue #17: docs/config.schema.json (JSON Schema 2020-12) and `tributary
// check-config` agree: on the shipped configs and on each kind of mistake,
// both accept or both refuse. The schema is checked by python3-jsonschema
// (a validator this project did not write), the config by the built binary.
#include "../common/files.h"
#include "../common/scratch_dir.h"
#include "process.h"

#include <nlohmann/json.hpp>
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

using namespace tributary::test;
using nlohmann::json;

namespace {

const std::filesystem::path k_root(TRIBUTARY_SOURCE_DIR);

struct Verdicts {
  bool schema = false;
  bool check_config = false;
  std::string said;
};

Verdicts judge(const ScratchDir& dir, const json& config) {
  static int n = 0;
  const auto file = dir / ("config-" + std::to_string(n++) + ".json");
  std::ofstream(file) << config.dump(2);
  Verdicts v;
  const std::string script = (dir / "validate.py").string();
  if (!std::filesystem::exists(script)) {
    std::ofstream(script) << "import json, sys, jsonschema\n"
                             "schema = json.load(open(sys.argv[1]))\n"
                             "jsonschema.Draft202012Validator.check_schema(schema)\n"
                             "errors = list(jsonschema.Draft202012Validator(schema).iter_errors(json.load(open(sys.argv[2]))))\n"
                             "for e in errors: print('schema:', '/' + '/'.join(map(str, e.path)), e.message)\n"
                             "sys.exit(1 if errors else 0)\n";
  }
  const std::string cmd = python3() + " " + script + " " + (k_root / "docs" / "config.schema.json").string() + " " +
                          file.string() + " > " + file.string() + ".out 2>&1";
  const int rc = std::system(cmd.c_str());
  v.schema = WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
  Run r = run_tributary("check-config " + file.string());
  v.check_config = r.status == 0;
  v.said = slurp(file.string() + ".out") + r.out;
  return v;
}

json minimal() { return {{"database", "dbname=x"}, {"data_dir", "/tmp/x"}}; }

json with_source(const json& fields) {
  json c = minimal();
  json s = {{"name", "up"}, {"url", "https://repo.example.org/"}};
  s.update(fields);
  c["sources"] = json::array({s});
  return c;
}

} // namespace

TEST_CASE("Config schema: docs/config.schema.json and check-config accept the same configs and refuse the same "
          "mistakes") {
  REQUIRE(std::system((python3() + " -c 'import jsonschema' 2>/dev/null").c_str()) == 0);
  ScratchDir dir("config-schema");

  SUBCASE("accepted by both") {
    const json shipped_example = json::parse(slurp(k_root / "config" / "example.json"), nullptr, true, true);
    json shipped_quickstart = json::parse(slurp(k_root / "config" / "quickstart.json"), nullptr, true, true);
    // Its token file is made by deploy/quickstart.sh, relative to the
    // checkout: one of ours stands in (a file check the schema cannot make).
    std::ofstream(dir / "token") << "t\n";
    shipped_quickstart["admin_token_file"] = (dir / "token").string();
    json s3 = minimal();
    s3["content"] = {{"store", "s3"}, {"endpoint", "http://rgw.internal:7480"}, {"bucket", "tributary"},
                     {"region", "us-east-1"}, {"path_style", true}, {"cache_bytes", 0},
                     {"access_key_env", "KEY"}, {"secret_key_env", "SECRET"}};
    json sets = with_source({{"interval", "1h30m"}, {"audit_interval", "never"}, {"strategy", "dumps"}});
    sets["sets"] = json::array({{{"name", "all"}, {"sources", {"up"}}}});
    for (const json& c : {shipped_example, shipped_quickstart, minimal(), s3, sets,
                          with_source({{"auth", {{"type", "bearer"}, {"token_env", "T"}}},
                                       {"mirrors", json::array({{{"url", "https://m.example.net/"}, {"pri", 2}}})},
                                       {"include", {"re:.*\\.xml$"}},
                                       {"media_types", {"text/*"}},
                                       {"max_deletion_share", 1}})}) {
      const Verdicts v = judge(dir, c);
      INFO(c.dump(), "\n", v.said);
      CHECK(v.schema);
      CHECK(v.check_config);
    }
  }

  SUBCASE("refused by both") {
    json unknown_top = minimal();
    unknown_top["datadir"] = "/tmp/typo";
    json no_database = minimal();
    no_database.erase("database");
    json s3_without_endpoint = minimal();
    s3_without_endpoint["content"] = {{"store", "s3"}, {"bucket", "tributary"}};
    json bad_bucket = minimal();
    bad_bucket["content"] = {{"store", "s3"}, {"endpoint", "http://rgw:7480"}, {"bucket", "Bad_Bucket"}};
    json bad_log = minimal();
    bad_log["log"] = {{"level", "verbose"}};
    json bad_lease = minimal();
    bad_lease["push"] = {{"lease", "a week"}};
    json big_parts = minimal();
    big_parts["change_list_part_size"] = 60000;
    json ftp_public = minimal();
    ftp_public["public_url"] = "ftp://example.org/";
    json no_port = minimal();
    no_port["listen"] = "localhost";
    json set_without_sources = with_source(json::object());
    set_without_sources["sets"] = json::array({{{"name", "all"}}});
    json no_url = minimal();
    no_url["sources"] = json::array({{{"name", "up"}}});
    for (const json& c :
         {unknown_top, no_database, s3_without_endpoint, bad_bucket, bad_log, bad_lease, big_parts, ftp_public,
          no_port, set_without_sources, no_url, with_source({{"intervall", "1h"}}), with_source({{"concurrency", 0}}),
          with_source({{"strategy", "fast"}}), with_source({{"interval", "5"}}), with_source({{"interval", "never"}}),
          with_source({{"name", "-starts-badly"}}), with_source({{"url", "gopher://x/"}}),
          with_source({{"auth", {{"type", "bearer"}}}}), with_source({{"auth", {{"type", "digest"}}}}),
          with_source({{"max_deletion_share", 1.5}}), with_source({{"media_types", {"pdf"}}}),
          with_source({{"verify_tls", "yes"}})}) {
      const Verdicts v = judge(dir, c);
      INFO(c.dump(), "\n", v.said);
      CHECK_FALSE(v.schema);
      CHECK_FALSE(v.check_config);
    }
  }
}

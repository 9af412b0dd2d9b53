// The integration suite's database: deploy/test.sh starts a throwaway
// PostgreSQL 15 cluster and passes its connection string in
// TRIBUTARY_TEST_PG. These tests fail, never skip, when it is missing.
#include "pg_fixture.h"

TEST_CASE("PostgreSQL: the test cluster is PostgreSQL 15 and takes batched writes") {
  pqxx::connection c(tributary::test::admin_conninfo());
  pqxx::work tx(c);
  auto v = tx.exec1("SHOW server_version_num")[0].as<int>();
  CHECK(v / 10000 == 15);
  tx.exec0("CREATE TEMP TABLE t (uri text PRIMARY KEY, n bigint)");
  {
    pqxx::stream_to s(tx, "t", std::vector<std::string>{"uri", "n"});
    for (int i = 0; i < 1000; ++i) {
      s << std::make_tuple("http://e.org/" + std::to_string(i), i);
    }
    s.complete();
  }
  CHECK(tx.exec1("SELECT count(*) FROM t")[0].as<long>() == 1000);
  CHECK(tx.exec1("SELECT sum(n) FROM t")[0].as<long>() == 499500);
  tx.abort();
}

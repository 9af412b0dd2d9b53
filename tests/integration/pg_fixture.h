#pragma once

// A fresh database per test on the cluster deploy/test.sh started
// (TRIBUTARY_TEST_PG). Tests fail, never skip, when it is missing.
#define PQXX_HAVE_OPTIONAL 1
#include <pqxx/pqxx>
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace tributary::test {

inline std::string admin_conninfo() {
  const char* env = std::getenv("TRIBUTARY_TEST_PG");
  REQUIRE_MESSAGE(env != nullptr, "TRIBUTARY_TEST_PG is not set: run the tests through deploy/test.sh");
  return env;
}

class TempDatabase {
public:
  TempDatabase() {
    static std::atomic<int> counter{0};
    m_name = "tributary_t" + std::to_string(getpid()) + "_" + std::to_string(counter++);
    pqxx::connection c(admin_conninfo());
    pqxx::nontransaction tx(c);
    tx.exec0("DROP DATABASE IF EXISTS " + m_name);
    tx.exec0("CREATE DATABASE " + m_name);
  }
  ~TempDatabase() {
    try {
      pqxx::connection c(admin_conninfo());
      pqxx::nontransaction tx(c);
      tx.exec0("DROP DATABASE IF EXISTS " + m_name + " WITH (FORCE)");
    } catch (...) {
    }
  }
  TempDatabase(const TempDatabase&) = delete;
  TempDatabase& operator=(const TempDatabase&) = delete;

  std::string conninfo() const { return admin_conninfo() + " dbname=" + m_name; }
  const std::string& name() const { return m_name; }

private:
  std::string m_name;
};

} // namespace tributary::test

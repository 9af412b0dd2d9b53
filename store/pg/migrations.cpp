#include "store/pg/migrations.h"

#include "store/pg/pg_guard.h"

#include <pqxx/pqxx>

namespace tributary::store {

namespace {

// Bump together with a new schema/NNNN_*.sql (a test checks they agree).
constexpr int k_schema_version = 17;

// Arbitrary constant for pg_advisory_xact_lock: serialises migrations.
constexpr long long k_migration_lock = 0x7472696275746172LL; // "tributar"

} // namespace

int expected_schema_version() { return k_schema_version; }

Result<MigrateReport> migrate(const std::string& conninfo) {
  return guarded("migrate", [&]() -> Result<MigrateReport> {
    pqxx::connection c(conninfo);
    MigrateReport report;
    bool first = true;
    for (;;) {
      pqxx::work tx(c);
      tx.exec("SELECT pg_advisory_xact_lock(" + std::to_string(k_migration_lock) + ")");
      tx.exec0("CREATE TABLE IF NOT EXISTS schema_version ("
               "version integer PRIMARY KEY, name text NOT NULL, "
               "applied_at timestamptz NOT NULL DEFAULT now())");
      int current = tx.exec1("SELECT coalesce(max(version), 0) FROM schema_version")[0].as<int>();
      if (first) {
        report.from_version = current;
        first = false;
      }
      report.to_version = current;
      if (current > k_schema_version) {
        return make_error(ErrorKind::conflict, "the database schema is at version " + std::to_string(current) +
                                                   ", newer than this Tributary (" +
                                                   std::to_string(k_schema_version) + "): upgrade Tributary");
      }
      const Migration* next = nullptr;
      for (const auto& m : migrations()) {
        if (m.version > current && m.version <= k_schema_version) {
          next = &m;
          break;
        }
      }
      if (!next) {
        tx.commit();
        return report;
      }
      tx.exec0(next->sql);
      tx.exec_params("INSERT INTO schema_version (version, name) VALUES ($1, $2)", next->version, next->name);
      tx.commit();
      report.applied.push_back(next->name);
      report.to_version = next->version;
    }
  });
}

Result<int> schema_version(const std::string& conninfo) {
  return guarded("schema version", [&]() -> Result<int> {
    pqxx::connection c(conninfo);
    pqxx::read_transaction tx(c);
    return read_schema_version(tx);
  });
}

Result<void> check_schema(const std::string& conninfo) {
  auto v = schema_version(conninfo);
  if (!v) {
    return tl::unexpected(v.error());
  }
  if (*v < k_schema_version) {
    return make_error(ErrorKind::permanent,
                      "the database schema is at version " + std::to_string(*v) + ", this Tributary needs " +
                          std::to_string(k_schema_version) + ": run `tributary migrate --config FILE` first");
  }
  if (*v > k_schema_version) {
    return make_error(ErrorKind::permanent, "the database schema is at version " + std::to_string(*v) +
                                                ", newer than this Tributary (" +
                                                std::to_string(k_schema_version) + "): upgrade Tributary");
  }
  return {};
}

} // namespace tributary::store

#include "store/pg/migrations.h"

#include "store/pg/pg_guard.h"
#include "store/pg/pg_pool.h"

#include "store/pg/entry_json.h"

#include "resourcesync/reader.h"

#include <pqxx/pqxx>

namespace tributary::store {

namespace {

// Bump together with a new schema/NNNN_*.sql (a test checks they agree).
constexpr int k_schema_version = 25;

// Arbitrary constant for pg_advisory_xact_lock: serialises migrations.
constexpr long long k_migration_lock = 0x7472696275746172LL; // "tributar"

// 0018: each retry row's entry, kept until then as a one-entry XML urlset,
// read once with the protocol reader and stored as a record. Should the
// text not be one entry for its URI (it cannot be, unless the row was
// edited), the record names the URI alone, so the resource is still
// fetched (unverified) rather than never.
void convert_retry_entries(pqxx::work& tx) {
  for (const auto& row : tx.exec("SELECT feed_id, uri, entry FROM retry WHERE entry_json IS NULL")) {
    const std::string uri = row[1].as<std::string>();
    auto parsed = rs::parse_document(row[2].as<std::string>());
    rs::Entry e;
    if (parsed.document.entries.size() == 1 && parsed.document.entries[0].loc == uri) {
      e = std::move(parsed.document.entries[0]);
    } else {
      e.loc = uri;
    }
    tx.exec_params("UPDATE retry SET entry_json = $3::jsonb WHERE feed_id = $1 AND uri = $2", row[0].as<int64_t>(),
                   uri, entry_to_json(e));
  }
}

// Steps a migration's SQL cannot take, run in its transaction after it.
struct Step {
  int version;
  void (*run)(pqxx::work&);
};
constexpr Step k_steps[] = {{18, convert_retry_entries}};

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
      for (const auto& step : k_steps) {
        if (step.version == next->version) {
          step.run(tx);
        }
      }
      tx.exec_params("INSERT INTO schema_version (version, name) VALUES ($1, $2)", next->version, next->name);
      tx.commit();
      report.applied.push_back(next->name);
      report.to_version = next->version;
    }
  });
}

Result<int> schema_version(const std::string& conninfo) {
  return guarded("schema version", [&]() -> Result<int> {
    // One of the process's connections (PgPool), not one more of its own.
    auto pool = PgPool::of(conninfo);
    auto c = pool->borrow();
    pqxx::read_transaction tx(c.get());
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

#pragma once

#include "common/result.h"

#include <string>
#include <vector>

// The PostgreSQL schema: numbered migrations (schema/NNNN_*.sql, compiled
// into the binary) and the checks that a database is at this build's
// version.
namespace tributary::store {

// The schema version this build expects; schema/NNNN_*.sql up to it are
// compiled into the binary.
int expected_schema_version();

struct Migration {
  int version;
  std::string name; // file name, e.g. "0001_initial.sql"
  std::string sql;
};
// The migrations compiled into this binary, in version order.
const std::vector<Migration>& migrations();

struct MigrateReport {
  int from_version = 0;
  int to_version = 0;
  std::vector<std::string> applied; // file names
};

// Applies every missing migration, each in its own transaction, under an
// advisory lock so that two `migrate`s cannot interleave. Fails (conflict)
// if the database is newer than this build.
Result<MigrateReport> migrate(const std::string& conninfo);

// The database's schema version (0 when Tributary never migrated it).
Result<int> schema_version(const std::string& conninfo);

// Fails with a message that says to run `tributary migrate` when the schema
// is behind, or to upgrade Tributary when it is ahead.
Result<void> check_schema(const std::string& conninfo);

} // namespace tributary::store

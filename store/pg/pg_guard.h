#pragma once

// Internal to the store's PostgreSQL sources: libpqxx exceptions as
// Errors. Include it before anything else that includes pqxx.

#include "common/result.h"

#define PQXX_HAVE_OPTIONAL 1 // before pqxx: as<std::optional<T>> on NULL
#include <pqxx/pqxx>

#include <stdexcept>
#include <string>

namespace tributary::store {

// No connection of the process's budget came free in time (PgPool).
struct PoolExhausted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Translates libpqxx exceptions into Errors; callers never see pqxx types.
template <typename F> auto guarded(const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const pqxx::broken_connection& e) {
    return make_error(ErrorKind::database, std::string(what) + ": database connection lost: " + e.what());
  } catch (const pqxx::sql_error& e) {
    const std::string state = e.sqlstate();
    ErrorKind kind = ErrorKind::permanent;
    if (state.rfind("08", 0) == 0 || state == "57P01" || state == "57P02" || state == "57P03") {
      // A connection failure, the server shutting down or not yet up.
      kind = ErrorKind::database;
    } else if (state == "40001" || state == "40P01" || state == "55P03") {
      kind = ErrorKind::transient;
    } else if (state.rfind("23", 0) == 0) {
      kind = ErrorKind::conflict;
    }
    std::string msg = e.what();
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) {
      msg.pop_back();
    }
    return make_error(kind, std::string(what) + ": " + msg + " (SQLSTATE " + state + ")");
  } catch (const PoolExhausted& e) {
    return make_error(ErrorKind::transient, std::string(what) + ": " + e.what());
  } catch (const std::exception& e) {
    return make_error(ErrorKind::permanent, std::string(what) + ": " + e.what());
  }
}

// The schema version recorded in the database (0: none yet).
inline int read_schema_version(pqxx::transaction_base& tx) {
  if (!tx.exec1("SELECT to_regclass('schema_version') IS NOT NULL")[0].as<bool>()) {
    return 0;
  }
  return tx.exec1("SELECT coalesce(max(version), 0) FROM schema_version")[0].as<int>();
}

} // namespace tributary::store

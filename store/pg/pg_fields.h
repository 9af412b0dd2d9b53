#pragma once

// Internal to the store's PostgreSQL sources: how columns are read. It
// includes pg_guard.h first, so it may stand where pg_guard.h would.

#include "store/pg/pg_guard.h"

#include "resourcesync/datetime.h"

#include <chrono>
#include <optional>
#include <string>

namespace tributary::store {

// Timestamps are read as microseconds since the epoch: exact, and cheaper
// than parsing PostgreSQL's text form. `column` is any SQL expression.
inline std::string us(const std::string& column) {
  return "(extract(epoch from " + column + ") * 1000000)::bigint";
}

// A column selected through us().
inline rs::Timestamp read_time(const pqxx::field& f) {
  return rs::Timestamp(std::chrono::microseconds(f.as<long long>()));
}
inline std::optional<rs::Timestamp> read_opt_time(const pqxx::field& f) {
  return f.is_null() ? std::nullopt : std::optional<rs::Timestamp>(read_time(f));
}

// A text column, NULL as "".
inline std::string text_or_empty(const pqxx::field& f) { return f.is_null() ? std::string() : f.as<std::string>(); }

} // namespace tributary::store

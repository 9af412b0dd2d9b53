#pragma once

// PgStatusStore's connection, shared by its files: pg_status_store.cpp (the
// history and a source's detail) and pg_operator.cpp (pauses, operator
// actions).
#include "store/pg/pg_conn.h"
#include "store/pg/pg_status_store.h"

#include <mutex>

namespace tributary::store {

struct PgStatusStore::Impl {
  explicit Impl(const std::string& conninfo) : conn(conninfo) {}
  std::mutex mutex;
  PgConn conn; // borrowed per transaction
};

} // namespace tributary::store

#pragma once

// A migrated throwaway database, a PgStore over it, and one source's feed:
// what the PgStore tests start from.

#include "store/pg/migrations.h"
#include "store/pg/pg_store.h"

#include "pg_fixture.h"

#include <memory>
#include <string>

namespace tributary::test {

struct FeedStore {
  TempDatabase db;
  std::unique_ptr<store::PgStore> store;
  int64_t source = 0;
  int64_t feed = 0;

  explicit FeedStore(const std::string& base) {
    REQUIRE(store::migrate(db.conninfo()));
    auto opened = store::PgStore::open(db.conninfo());
    REQUIRE(opened);
    store = std::move(*opened);
    auto src = store->ensure_source("example", base);
    REQUIRE(src);
    source = *src;
    auto f = store->ensure_feed(source, base + "caps.xml");
    REQUIRE(f);
    feed = *f;
  }
};

} // namespace tributary::test

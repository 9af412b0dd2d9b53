#pragma once

// Room store/pg/pg_harvest: the resources held, by the time their last
// change entered the change log (schema/0025), as our OAI-PMH face lists
// them (#52): the horizon a listing may reach, pages by (datestamp, feed,
// URI), one resource. One part of PgStore (pg_store.h), which owns it and
// forwards to it; works through the store's connection.

#include "store/store_reader.h"

#include <optional>
#include <string>
#include <vector>

namespace tributary::store {

struct PgStoreConnection;

class PgHarvest {
public:
  explicit PgHarvest(PgStoreConnection& db) : m_db(db) {}

  Result<Timestamp> horizon();
  Result<std::vector<DatedResource>> page(const DatedQuery& q);
  Result<std::optional<DatedResource>> one(int64_t feed_id, const std::string& uri);
  Result<std::optional<Timestamp>> earliest();
  Result<std::vector<std::string>> link_targets(const std::vector<int64_t>& feed_ids, const std::string& rel,
                                                size_t limit);

private:
  PgStoreConnection& m_db;
};

} // namespace tributary::store

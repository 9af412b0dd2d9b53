#pragma once

// Room store/pg/pg_shared_dumps: PgStore's shared dumps (SharedDumps): the
// Resource Dump and Change Dump packages of each set as the database names
// them, whichever node built them, and the claim on building one. One part of
// PgStore (pg_store.h), which owns it and forwards to it; works through the
// store's connection (pg_store_internal.h).

#include "store/blob_references.h"
#include "store/shared_dumps.h"
#include "store/store.h"
#include "store/store_reader.h"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace tributary::store {

struct PgStoreConnection;

class PgSharedDumps {
public:
  explicit PgSharedDumps(PgStoreConnection& db) : m_db(db) {}

  using ResourceDump = SharedDumps::ResourceDump;
  using File = SharedDumps::File;
  using ChangePackage = SharedDumps::ChangePackage;

  Result<std::optional<ResourceDump>> resource_dump(const std::string& set);
  Result<std::vector<std::pair<std::string, ResourceDump>>> resource_dumps();
  Result<bool> put_resource_dump(const std::string& set, const ResourceDump& dump, const std::vector<File>& files);
  Result<bool> claim(const std::string& set);
  Result<void> release(const std::string& set);
  Result<void> put_change_package(const std::string& set, const ChangePackage& p);
  Result<std::vector<ChangePackage>> change_packages(const std::string& set);
  Result<void> drop_change_packages(const std::string& set, size_t up_to_part);
  Result<std::optional<File>> file(const std::string& url_path);

private:
  PgStoreConnection& m_db;
};

} // namespace tributary::store

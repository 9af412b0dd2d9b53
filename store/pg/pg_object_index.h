#pragma once

#include "store/object_index.h"

#include <memory>
#include <string>

namespace tributary::store {

// The bucket's index over PostgreSQL (content_object, content_object_dead),
// on a few pooled connections of its own: uploads come from every source's
// committer thread, downloads from the server's workers.
class PgObjectIndex : public ObjectIndex {
public:
  // Connects lazily; check() says whether the schema is there.
  explicit PgObjectIndex(std::string conninfo);
  ~PgObjectIndex() override;

  Result<void> with(const char* what, const std::function<void(Work&)>& fn) override;
  Result<void> check() override;
  Result<std::optional<Place>> find(const std::string& sha256) override;
  Result<std::vector<Row>> members(const std::string& object) override;
  Result<Collected> collect_rows(std::chrono::seconds grace, bool dry_run) override;
  Result<std::vector<std::string>> dead_objects() override;

private:
  struct Pool;
  std::unique_ptr<Pool> m_pool;
};

} // namespace tributary::store

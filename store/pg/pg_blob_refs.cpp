// PgStore as BlobReferences: every blob the database names, for the
// collections of the blob store and of the bucket.
#include "store/pg/pg_blob_refs.h"

#include "store/pg/pg_store_internal.h"

namespace tributary::store {

using namespace pg_detail;

namespace {
const char* k_referenced_blobs =
    "SELECT blob_sha256 FROM resource WHERE state = 'live' AND blob_sha256 IS NOT NULL "
    "UNION ALL "
    "SELECT blob_sha256 FROM change_log WHERE change <> 'deleted' AND blob_sha256 IS NOT NULL "
    "UNION ALL "
    "SELECT sha256 FROM shared_dump_file "
    "UNION ALL "
    "SELECT sha256 FROM archived_document";
} // namespace

Result<void> PgBlobRefs::for_each_unplaced_blob(const std::function<void(const std::string&)>& fn) {
  return for_each_blob_of(std::string("SELECT DISTINCT x.blob_sha256 FROM (") + k_referenced_blobs +
                              ") x WHERE NOT EXISTS (SELECT 1 FROM content_object o WHERE o.sha256 = x.blob_sha256)",
                          fn);
}

const char* PgBlobRefs::referenced_blobs_sql() {
  return k_referenced_blobs;
}

Result<void> PgBlobRefs::for_each_placed_blob(const std::function<void(const std::string&)>& fn) {
  return for_each_blob_of("SELECT sha256 FROM content_object", fn);
}

Result<void> PgBlobRefs::for_each_referenced_blob(const std::function<void(const std::string&)>& fn) {
  return for_each_blob_of(k_referenced_blobs, fn);
}

Result<void> PgBlobRefs::for_each_blob_of(const std::string& query, const std::function<void(const std::string&)>& fn) {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("list referenced blobs", [&]() -> Result<void> {
    pqxx::work tx(m_db.conn);
    tx.exec0("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY");
    tx.exec0("DECLARE referenced NO SCROLL CURSOR FOR " + query);
    for (;;) {
      pqxx::result r = tx.exec("FETCH 20000 FROM referenced");
      for (const auto& row : r) {
        fn(row[0].as<std::string>());
      }
      if (r.size() < 20000) {
        break;
      }
    }
    tx.commit();
    return {};
  });
}

} // namespace tributary::store

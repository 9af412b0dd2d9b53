// PgStore as SharedDumps: dump packages built once and shared by the
// nodes of one database (and bucket).
#include "store/pg/pg_shared_dumps.h"

#include "store/pg/pg_store_internal.h"

namespace tributary::store {

using namespace pg_detail;

Result<std::optional<SharedDumps::ResourceDump>> PgSharedDumps::resource_dump(const std::string& set) {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("read the shared Resource Dump", [&]() -> Result<std::optional<ResourceDump>> {
    pqxx::read_transaction tx(m_db.conn);
    auto rows = tx.exec_params("SELECT generation, document, seq, (extract(epoch FROM built_at) * 1000000)::bigint "
                               "FROM shared_dump WHERE set_name = $1",
                               set);
    if (rows.empty()) {
      return std::nullopt;
    }
    ResourceDump d;
    d.generation = rows[0][0].as<std::string>();
    d.document = rows[0][1].as<std::string>();
    d.seq = rows[0][2].as<int64_t>();
    d.built_at = std::chrono::system_clock::time_point(std::chrono::microseconds(rows[0][3].as<int64_t>()));
    return d;
  });
}

Result<std::vector<std::pair<std::string, SharedDumps::ResourceDump>>> PgSharedDumps::resource_dumps() {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("read the shared Resource Dumps", [&]() -> Result<std::vector<std::pair<std::string, ResourceDump>>> {
    pqxx::read_transaction tx(m_db.conn);
    std::vector<std::pair<std::string, ResourceDump>> out;
    for (const auto& row : tx.exec("SELECT set_name, generation, seq, (extract(epoch FROM built_at) * 1000000)::bigint "
                                   "FROM shared_dump ORDER BY set_name")) {
      ResourceDump d;
      d.generation = row[1].as<std::string>();
      d.seq = row[2].as<int64_t>();
      d.built_at = std::chrono::system_clock::time_point(std::chrono::microseconds(row[3].as<int64_t>()));
      out.emplace_back(row[0].as<std::string>(), std::move(d));
    }
    return out;
  });
}

Result<bool> PgSharedDumps::put_resource_dump(const std::string& set, const ResourceDump& dump,
                                        const std::vector<File>& files) {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("record the shared Resource Dump", [&]() -> Result<bool> {
    pqxx::work tx(m_db.conn);
    auto current = tx.exec_params("SELECT seq, generation FROM shared_dump WHERE set_name = $1 FOR UPDATE", set);
    if (!current.empty() && current[0][0].as<int64_t>() > dump.seq) {
      return false; // a newer one is there
    }
    const std::string replaced = current.empty() ? "" : current[0][1].as<std::string>();
    tx.exec_params("INSERT INTO shared_dump (set_name, generation, document, seq) VALUES ($1, $2, $3, $4) "
                   "ON CONFLICT (set_name) DO UPDATE SET generation = EXCLUDED.generation, "
                   "document = EXCLUDED.document, seq = EXCLUDED.seq, built_at = now()",
                   set, dump.generation, dump.document, dump.seq);
    for (const auto& f : files) {
      tx.exec_params("INSERT INTO shared_dump_file (url_path, set_name, generation, sha256, length) "
                     "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (url_path) DO NOTHING",
                     f.url_path, set, dump.generation, f.sha256, static_cast<long long>(f.length));
    }
    tx.exec_params("DELETE FROM shared_dump_file WHERE set_name = $1 AND generation IS NOT NULL "
                   "AND generation <> $2 AND generation <> $3",
                   set, dump.generation, replaced);
    tx.commit();
    return true;
  });
}

// Session advisory locks of the two-key form (a space apart from the
// sources' leases, which take one bigint key): this constant, then the
// set name's hash.
constexpr int k_dump_lock_space = 0x74726475; // "trdu"

// The set's key within that space, as hashtext() would give it, asked of
// the server once (the lock lives on the session connection).
namespace {
Result<int> dump_lock_key(PgConn& conn, const std::string& set) {
  return conn.run("name a set's Resource Dump lock", [&]() -> Result<int> {
    pqxx::read_transaction tx(conn);
    return tx.exec_params1("SELECT hashtext($1)", set)[0].as<int>();
  });
}
} // namespace

Result<bool> PgSharedDumps::claim(const std::string& set) {
  auto key = dump_lock_key(m_db.conn, set);
  if (!key) {
    return tl::unexpected(key.error());
  }
  return guarded("claim a set's Resource Dump", [&]() -> Result<bool> {
    // Held (by this process) until released or the session is lost.
    return m_db.session->hold(k_dump_lock_space, *key);
  });
}

Result<void> PgSharedDumps::release(const std::string& set) {
  auto key = dump_lock_key(m_db.conn, set);
  if (!key) {
    return tl::unexpected(key.error());
  }
  m_db.session->unlock(k_dump_lock_space, *key, m_db.session->generation());
  return {};
}

Result<void> PgSharedDumps::put_change_package(const std::string& set, const ChangePackage& p) {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("record a shared Change Dump package", [&]() -> Result<void> {
    pqxx::work tx(m_db.conn);
    for (const File* f : {&p.zip, &p.manifest}) {
      tx.exec_params("INSERT INTO shared_dump_file (url_path, set_name, part, part_from, part_until, sha256, length) "
                     "VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (url_path) DO NOTHING",
                     f->url_path, set, static_cast<long long>(p.part), rs::format_w3c_datetime(p.from),
                     rs::format_w3c_datetime(p.until), f->sha256, static_cast<long long>(f->length));
    }
    tx.commit();
    return {};
  });
}

Result<std::vector<SharedDumps::ChangePackage>> PgSharedDumps::change_packages(const std::string& set) {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("read shared Change Dump packages", [&]() -> Result<std::vector<ChangePackage>> {
    pqxx::read_transaction tx(m_db.conn);
    // Each part's two files, written in one transaction: its package and
    // the copy of its manifest.
    auto rows = tx.exec_params("SELECT part, " + us("part_from") + ", " + us("part_until") +
                                   ", url_path, sha256, length FROM shared_dump_file "
                                   "WHERE set_name = $1 AND part IS NOT NULL ORDER BY part",
                               set);
    std::vector<ChangePackage> out;
    for (const auto& row : rows) {
      const auto part = row[0].as<size_t>();
      if (out.empty() || out.back().part != part) {
        ChangePackage p;
        p.part = part;
        p.from = rs::Timestamp(std::chrono::microseconds(row[1].as<int64_t>()));
        p.until = rs::Timestamp(std::chrono::microseconds(row[2].as<int64_t>()));
        out.push_back(std::move(p));
      }
      File f{row[3].as<std::string>(), row[4].as<std::string>(), row[5].as<uint64_t>()};
      const bool zip = f.url_path.size() > 4 && f.url_path.compare(f.url_path.size() - 4, 4, ".zip") == 0;
      (zip ? out.back().zip : out.back().manifest) = std::move(f);
    }
    return out;
  });
}

Result<void> PgSharedDumps::drop_change_packages(const std::string& set, size_t up_to_part) {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("drop shared Change Dump packages", [&]() -> Result<void> {
    pqxx::work tx(m_db.conn);
    tx.exec_params("DELETE FROM shared_dump_file WHERE set_name = $1 AND part <= $2", set,
                   static_cast<long long>(up_to_part));
    tx.commit();
    return {};
  });
}

Result<std::optional<SharedDumps::File>> PgSharedDumps::file(const std::string& url_path) {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("read a shared dump file", [&]() -> Result<std::optional<File>> {
    pqxx::read_transaction tx(m_db.conn);
    auto rows = tx.exec_params("SELECT sha256, length FROM shared_dump_file WHERE url_path = $1", url_path);
    if (rows.empty()) {
      return std::nullopt;
    }
    return File{url_path, rows[0][0].as<std::string>(), rows[0][1].as<uint64_t>()};
  });
}

} // namespace tributary::store

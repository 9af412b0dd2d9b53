#include "store/pg/pg_object_index.h"

#include "store/pg/pg_guard.h"
#include "store/pg/pg_pool.h"
#include "store/pg/pg_store.h"

#include <pqxx/pqxx>

#include <mutex>

namespace tributary::store {

namespace {

std::string text_array(const std::vector<std::string>& items) {
  // Only hex names and our own object keys go in: no quoting needed, but
  // quote anyway so that a surprise cannot change the query's meaning.
  std::string out = "{";
  for (size_t i = 0; i < items.size(); ++i) {
    out += (i ? ",\"" : "\"");
    for (char c : items[i]) {
      if (c == '"' || c == '\\') {
        out.push_back('\\');
      }
      out.push_back(c);
    }
    out.push_back('"');
  }
  return out + "}";
}

std::string bigint_array(const std::vector<uint64_t>& v) {
  std::string out = "{";
  for (size_t i = 0; i < v.size(); ++i) {
    out += (i ? "," : "") + std::to_string(v[i]);
  }
  return out + "}";
}

// Session-less advisory locks on object keys, two-key form: this constant,
// then the key's hash.
constexpr int k_object_lock_space = 0x7472626f; // "trbo"

class PgWork : public ObjectIndex::Work {
public:
  explicit PgWork(pqxx::work& tx) : m_tx(tx) {}

  std::set<std::string> known(const std::vector<std::string>& sha256s) override {
    std::set<std::string> out;
    for (const auto& row : m_tx.exec_params("SELECT sha256 FROM content_object WHERE sha256 = ANY($1::text[]) "
                                            "AND condemned_at IS NULL",
                                            text_array(sha256s))) {
      out.insert(row[0].as<std::string>());
    }
    return out;
  }
  void lock_object(const std::string& key, bool exclusive) override {
    m_tx.exec_params(exclusive ? "SELECT pg_advisory_xact_lock($1, hashtext($2))"
                               : "SELECT pg_advisory_xact_lock_shared($1, hashtext($2))",
                     k_object_lock_space, key);
  }
  void name(const std::vector<ObjectIndex::Row>& rows) override {
    if (rows.empty()) {
      return;
    }
    std::vector<std::string> sha, object;
    std::vector<uint64_t> offset, length;
    for (const auto& r : rows) {
      sha.push_back(r.sha256);
      object.push_back(r.place.object);
      offset.push_back(r.place.offset);
      length.push_back(r.place.length);
    }
    m_tx.exec_params("INSERT INTO content_object (sha256, object, \"offset\", length) "
                     "SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) "
                     "ON CONFLICT (sha256) DO UPDATE SET object = EXCLUDED.object, \"offset\" = EXCLUDED.\"offset\", "
                     "length = EXCLUDED.length, condemned_at = NULL WHERE content_object.condemned_at IS NOT NULL",
                     text_array(sha), text_array(object), bigint_array(offset), bigint_array(length));
  }
  bool names_object(const std::string& key) override {
    return !m_tx.exec_params("SELECT 1 FROM content_object WHERE object = $1 LIMIT 1", key).empty();
  }
  void forget_dead(const std::string& key) override {
    m_tx.exec_params("DELETE FROM content_object_dead WHERE object = $1", key);
  }

private:
  pqxx::work& m_tx;
};

} // namespace

// The process's connections (PgPool), one lent per transaction.
struct PgObjectIndex::Pool {
  std::shared_ptr<PgPool> pool;

  // Runs `fn` in a transaction on a lent connection; a broken connection
  // is dropped and the work tried once more on a new one.
  template <typename Fn>
  Result<void> with(const char* what, Fn&& fn) {
    for (int attempt = 0;; ++attempt) {
      try {
        auto c = pool->borrow();
        try {
          pqxx::work tx(c.get());
          fn(tx);
          tx.commit();
        } catch (const pqxx::broken_connection&) {
          c.discard();
          // The server went away: the idle ones are as dead as this one.
          pool->discard_idle();
          throw;
        }
        return {};
      } catch (const pqxx::broken_connection& e) {
        if (attempt > 0) {
          return make_error(ErrorKind::io, std::string("content_object ") + what + ": " + e.what());
        }
      } catch (const std::exception& e) {
        return make_error(ErrorKind::io, std::string("content_object ") + what + ": " + e.what());
      }
    }
  }
};

PgObjectIndex::PgObjectIndex(std::string conninfo) : m_pool(std::make_unique<Pool>()) {
  m_pool->pool = PgPool::of(conninfo);
}

PgObjectIndex::~PgObjectIndex() = default;

Result<void> PgObjectIndex::with(const char* what, const std::function<void(Work&)>& fn) {
  return m_pool->with(what, [&](pqxx::work& tx) {
    PgWork work(tx);
    fn(work);
  });
}

Result<void> PgObjectIndex::check() {
  return m_pool->with("check", [](pqxx::work& tx) { tx.exec("SELECT 1 FROM content_object LIMIT 1"); });
}

Result<std::optional<ObjectIndex::Place>> PgObjectIndex::find(const std::string& sha256) {
  std::optional<Place> out;
  auto r = m_pool->with("lookup", [&](pqxx::work& tx) {
    auto rows = tx.exec_params("SELECT object, \"offset\", length FROM content_object WHERE sha256 = $1", sha256);
    if (!rows.empty()) {
      out = Place{rows[0][0].as<std::string>(), rows[0][1].as<uint64_t>(), rows[0][2].as<uint64_t>()};
    }
  });
  if (!r) {
    return tl::unexpected(r.error());
  }
  return out;
}

Result<std::vector<ObjectIndex::Row>> PgObjectIndex::members(const std::string& object) {
  std::vector<Row> out;
  auto r = m_pool->with("group lookup", [&](pqxx::work& tx) {
    out.clear();
    auto rows = tx.exec_params("SELECT sha256, \"offset\", length FROM content_object WHERE object = $1 "
                               "ORDER BY \"offset\"",
                               object);
    for (const auto& row : rows) {
      out.push_back(Row{row[0].as<std::string>(), Place{object, row[1].as<uint64_t>(), row[2].as<uint64_t>()}});
    }
  });
  if (!r) {
    return tl::unexpected(r.error());
  }
  return out;
}

Result<ObjectIndex::Collected> PgObjectIndex::collect_rows(std::chrono::seconds grace, bool dry_run) {
  Collected out;
  const std::string unnamed = "NOT EXISTS (SELECT 1 FROM gc_named n WHERE n.sha = c.sha256)";
  const std::string due = "c.condemned_at < now() - $1 * interval '1 second'";
  const long long grace_s = grace.count();
  // In one transaction: what the database names now, read once into a
  // table of this transaction, joined as a whole.
  auto r = m_pool->with("collect", [&](pqxx::work& tx) {
    out = Collected{};
    tx.exec0(std::string("CREATE TEMP TABLE gc_named ON COMMIT DROP AS SELECT DISTINCT blob_sha256 AS sha FROM (") +
             PgStore::referenced_blobs_sql() + ") x");
    tx.exec0("ANALYZE gc_named");
    out.rows = tx.exec1("SELECT count(*) FROM content_object")[0].as<uint64_t>();
    if (dry_run) {
      out.pardoned = tx.exec1("SELECT count(*) FROM content_object c WHERE c.condemned_at IS NOT NULL AND NOT " +
                              unnamed)[0]
                         .as<uint64_t>();
      out.condemned =
          tx.exec1("SELECT count(*) FROM content_object c WHERE c.condemned_at IS NULL AND " + unnamed)[0].as<uint64_t>();
      auto removed = tx.exec_params1("SELECT count(*), coalesce(sum(length), 0) FROM content_object c WHERE " + due +
                                         " AND " + unnamed,
                                     grace_s);
      out.removed = removed[0].as<uint64_t>();
      out.removed_bytes = removed[1].as<uint64_t>();
      return;
    }
    out.pardoned = tx.exec0("UPDATE content_object c SET condemned_at = NULL WHERE c.condemned_at IS NOT NULL AND "
                            "NOT " + unnamed)
                       .affected_rows();
    // Deleted (with the objects they leave empty recorded) before the new
    // marks, which are all younger than any grace.
    std::set<std::string> emptied;
    for (const auto& row : tx.exec_params("DELETE FROM content_object c WHERE " + due + " AND " + unnamed +
                                              " RETURNING c.object, c.length",
                                          grace_s)) {
      ++out.removed;
      out.removed_bytes += row[1].as<uint64_t>();
      emptied.insert(row[0].as<std::string>());
    }
    tx.exec_params("INSERT INTO content_object_dead (object) SELECT o FROM unnest($1::text[]) o "
                   "WHERE NOT EXISTS (SELECT 1 FROM content_object c WHERE c.object = o) ON CONFLICT DO NOTHING",
                   text_array(std::vector<std::string>(emptied.begin(), emptied.end())));
    out.condemned =
        tx.exec0("UPDATE content_object c SET condemned_at = now() WHERE c.condemned_at IS NULL AND " + unnamed)
            .affected_rows();
    out.waiting = tx.exec1("SELECT count(*) FROM content_object WHERE condemned_at IS NOT NULL")[0].as<uint64_t>();
  });
  if (!r) {
    return tl::unexpected(r.error());
  }
  return out;
}

Result<std::vector<std::string>> PgObjectIndex::dead_objects() {
  std::vector<std::string> dead;
  auto r = m_pool->with("list dead objects", [&](pqxx::work& tx) {
    dead.clear();
    for (const auto& row : tx.exec("SELECT object FROM content_object_dead ORDER BY object")) {
      dead.push_back(row[0].as<std::string>());
    }
  });
  if (!r) {
    return tl::unexpected(r.error());
  }
  return dead;
}

} // namespace tributary::store

// PgStore's change log: which feeds changed, compaction (retention), and
// LISTEN for commits of other processes (ChangeListener).
#include "store/pg/pg_change_log.h"

#include "store/pg/pg_store_internal.h"

#include "common/log.h"

namespace tributary::store {

using namespace pg_detail;

namespace {

std::vector<int64_t> read_bigint_array(const pqxx::field& f) {
  std::vector<int64_t> out;
  auto parser = f.as_array();
  for (auto [kind, text] = parser.get_next(); kind != pqxx::array_parser::done; std::tie(kind, text) = parser.get_next()) {
    if (kind == pqxx::array_parser::string_value) {
      out.push_back(std::stoll(text));
    }
  }
  return out;
}

std::vector<Compaction> read_compactions(pqxx::transaction_base& tx) {
  std::vector<Compaction> out;
  for (const auto& row : tx.exec("SELECT set_name, feeds, part_size, parts, last_seq, " + us("until") +
                                 " FROM change_log_compaction ORDER BY set_name")) {
    Compaction c;
    c.set_name = row[0].as<std::string>();
    c.feeds = read_bigint_array(row[1]);
    c.part_size = row[2].as<size_t>();
    c.parts = row[3].as<size_t>();
    c.last_seq = row[4].as<int64_t>();
    c.until = *read_opt_time(row[5]);
    out.push_back(std::move(c));
  }
  return out;
}

} // namespace

Result<std::vector<int64_t>> PgChangeLog::changed_feeds(int64_t after_seq, int64_t up_to_seq) {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("read change log", [&]() -> Result<std::vector<int64_t>> {
    pqxx::read_transaction tx(m_db.conn);
    std::vector<int64_t> out;
    for (const auto& row : tx.exec_params("SELECT DISTINCT feed_id FROM change_log WHERE seq > $1 AND seq <= $2",
                                          static_cast<long long>(after_seq), static_cast<long long>(up_to_seq))) {
      out.push_back(row[0].as<int64_t>());
    }
    return out;
  });
}

Result<std::vector<Compaction>> PgChangeLog::compactions() {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("read compactions", [&]() -> Result<std::vector<Compaction>> {
    pqxx::read_transaction tx(m_db.conn);
    return read_compactions(tx);
  });
}

Result<uint64_t> PgChangeLog::compact_change_log(const std::vector<Compaction>& done,
                                             const std::map<std::string, std::vector<int64_t>>& published) {
  std::lock_guard lock(m_db.mutex);
  return m_db.conn.run("compact the change log", [&]() -> Result<uint64_t> {
    pqxx::work tx(m_db.conn);
    for (const auto& c : done) {
      tx.exec_params("INSERT INTO change_log_compaction AS k (set_name, feeds, part_size, parts, last_seq, until) "
                     "VALUES ($1, $2::bigint[], $3, $4, $5, timestamptz 'epoch' + $6 * interval '1 microsecond') "
                     "ON CONFLICT (set_name) DO UPDATE SET feeds = EXCLUDED.feeds, part_size = EXCLUDED.part_size, "
                     "parts = EXCLUDED.parts, last_seq = EXCLUDED.last_seq, until = EXCLUDED.until, "
                     "compacted_at = now() "
                     "WHERE k.feeds <> EXCLUDED.feeds OR k.part_size <> EXCLUDED.part_size OR k.parts < EXCLUDED.parts",
                     c.set_name, bigint_array(c.feeds), static_cast<long long>(c.part_size),
                     static_cast<long long>(c.parts), static_cast<long long>(c.last_seq),
                     static_cast<long long>(
                         std::chrono::duration_cast<std::chrono::microseconds>(c.until.time_since_epoch()).count()));
    }
    std::map<std::string, Compaction> rows;
    for (auto& c : read_compactions(tx)) {
      if (!published.count(c.set_name)) {
        tx.exec_params("DELETE FROM change_log_compaction WHERE set_name = $1", c.set_name);
        continue;
      }
      rows[c.set_name] = std::move(c);
    }
    // Per feed, the highest seq that every set published over it compacted
    // (a set that compacted nothing of it, or over other feeds, keeps all).
    std::map<int64_t, int64_t> bound;
    for (const auto& [name, feeds] : published) {
      auto it = rows.find(name);
      const int64_t upto = it != rows.end() && it->second.feeds == feeds ? it->second.last_seq : 0;
      for (int64_t f : feeds) {
        auto [b, fresh] = bound.emplace(f, upto);
        if (!fresh) {
          b->second = std::min(b->second, upto);
        }
      }
    }
    uint64_t removed = 0;
    for (const auto& [feed, upto] : bound) {
      if (upto > 0) {
        // A resource whose last entry goes keeps that entry's time: our
        // OAI-PMH face still lists it by when its last change entered the
        // log (schema/0025).
        tx.exec_params("UPDATE resource r SET logged_at = h.recorded_at FROM (SELECT DISTINCT ON (uri) uri, recorded_at "
                       "FROM change_log WHERE feed_id = $1 AND seq <= $2 ORDER BY uri, seq DESC) h "
                       "WHERE r.feed_id = $1 AND r.uri = h.uri AND NOT EXISTS (SELECT 1 FROM change_log c "
                       "WHERE c.feed_id = $1 AND c.uri = h.uri AND c.seq > $2)",
                       feed, static_cast<long long>(upto));
        removed += static_cast<uint64_t>(
            tx.exec_params("DELETE FROM change_log WHERE feed_id = $1 AND seq <= $2", feed, static_cast<long long>(upto))
                .affected_rows());
      }
    }
    tx.exec("NOTIFY " + std::string(k_change_channel));
    tx.commit();
    return removed;
  });
}


ChangeListener::ChangeListener(std::string conninfo, std::function<void()> on_change)
    : m_session(PgSession::of(conninfo)), m_id(m_session->listen(std::move(on_change))) {}

ChangeListener::~ChangeListener() { m_session->unlisten(m_id); }

} // namespace tributary::store

#include "store/pg/pg_aux_store.h"

#include "store/pg/pg_conn.h"
#include "store/pg/pg_session.h"
#include "store/pg/migrations.h"
#include "store/pg/pg_fields.h"

#include <mutex>

namespace tributary::store {

namespace {

// Advisory lock space of the hub's delivery lease ("trhb").
constexpr int k_hub_lock_space = 0x74726862;

std::optional<std::string> nonempty(const std::string& s) {
  return s.empty() ? std::nullopt : std::optional<std::string>(s);
}

std::optional<std::string> opt_time(const std::optional<rs::Timestamp>& t) {
  return t ? std::optional<std::string>(rs::format_w3c_datetime(*t)) : std::nullopt;
}

} // namespace

struct PgAuxStore::Impl {
  explicit Impl(const std::string& conninfo) : conn(conninfo), session(PgSession::of(conninfo)) {}
  std::mutex mutex;
  PgConn conn;                         // borrowed per transaction
  std::shared_ptr<PgSession> session; // the hub's delivery lease
};

PgAuxStore::PgAuxStore(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
PgAuxStore::~PgAuxStore() = default;

Result<std::unique_ptr<PgAuxStore>> PgAuxStore::open(const std::string& conninfo) {
  if (auto ok = check_schema(conninfo); !ok) {
    return tl::unexpected(ok.error());
  }
  return guarded("open the subscription store", [&]() -> Result<std::unique_ptr<PgAuxStore>> {
    return std::unique_ptr<PgAuxStore>(new PgAuxStore(std::make_unique<Impl>(conninfo)));
  });
}

Result<void> PgAuxStore::put_hub_subscription(const HubSubscription& s) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("record a hub subscription", [&]() -> Result<void> {
    pqxx::work tx(m_impl->conn);
    tx.exec_params("INSERT INTO hub_subscription (topic, callback, secret, lease_seconds, expires_at, delivered_seq) "
                   "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (topic, callback) DO UPDATE SET "
                   "secret = EXCLUDED.secret, lease_seconds = EXCLUDED.lease_seconds, expires_at = EXCLUDED.expires_at",
                   s.topic, s.callback, nonempty(s.secret), s.lease_seconds, rs::format_w3c_datetime(s.expires_at),
                   static_cast<long long>(s.delivered_seq));
    tx.commit();
    return {};
  });
}

Result<bool> PgAuxStore::remove_hub_subscription(const std::string& topic, const std::string& callback) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("remove a hub subscription", [&]() -> Result<bool> {
    pqxx::work tx(m_impl->conn);
    auto r = tx.exec_params("DELETE FROM hub_subscription WHERE topic = $1 AND callback = $2", topic, callback);
    tx.commit();
    return r.affected_rows() > 0;
  });
}

Result<std::vector<HubSubscription>> PgAuxStore::hub_subscriptions() {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read hub subscriptions", [&]() -> Result<std::vector<HubSubscription>> {
    pqxx::read_transaction tx(m_impl->conn);
    auto rows = tx.exec("SELECT topic, callback, secret, lease_seconds, " + us("expires_at") + ", " +
                        us("created_at") + ", delivered_seq, " + us("delivered_at") +
                        ", deliveries, failures, failures_total, " + us("retry_at") +
                        ", last_error FROM hub_subscription ORDER BY topic, callback");
    std::vector<HubSubscription> out;
    for (const auto& row : rows) {
      HubSubscription s;
      s.topic = row[0].as<std::string>();
      s.callback = row[1].as<std::string>();
      s.secret = text_or_empty(row[2]);
      s.lease_seconds = row[3].as<int>();
      s.expires_at = read_time(row[4]);
      s.created_at = read_time(row[5]);
      s.delivered_seq = row[6].as<int64_t>();
      s.delivered_at = read_opt_time(row[7]);
      s.deliveries = row[8].as<uint64_t>();
      s.failures = row[9].as<int>();
      s.failures_total = row[10].as<uint64_t>();
      s.retry_at = read_opt_time(row[11]);
      s.last_error = text_or_empty(row[12]);
      out.push_back(std::move(s));
    }
    return out;
  });
}

Result<void> PgAuxStore::hub_delivered(const std::string& topic, const std::string& callback, int64_t seq,
                                        rs::Timestamp at) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("record a hub delivery", [&]() -> Result<void> {
    pqxx::work tx(m_impl->conn);
    tx.exec_params("UPDATE hub_subscription SET delivered_seq = greatest(delivered_seq, $3), delivered_at = $4, "
                   "deliveries = deliveries + 1, failures = 0, retry_at = NULL WHERE topic = $1 AND callback = $2",
                   topic, callback, static_cast<long long>(seq), rs::format_w3c_datetime(at));
    tx.commit();
    return {};
  });
}

Result<void> PgAuxStore::hub_delivery_failed(const std::string& topic, const std::string& callback,
                                              rs::Timestamp retry_at, const std::string& error) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("record a failed hub delivery", [&]() -> Result<void> {
    pqxx::work tx(m_impl->conn);
    tx.exec_params("UPDATE hub_subscription SET failures = failures + 1, failures_total = failures_total + 1, "
                   "retry_at = $3, last_error = $4 WHERE topic = $1 AND callback = $2",
                   topic, callback, rs::format_w3c_datetime(retry_at), error);
    tx.commit();
    return {};
  });
}

Result<bool> PgAuxStore::lead_hub_delivery() {
  return guarded("take the hub's delivery lease", [&]() -> Result<bool> {
    // On the session connection: held until the process ends or loses it
    // (when another node's next try takes it). Asked again only when not
    // held, so that it is held once however often this is called.
    return m_impl->session->hold(k_hub_lock_space, 1);
  });
}

Result<void> PgAuxStore::add_framework_events(const std::vector<FrameworkEvent>& events) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("record framework events", [&]() -> Result<void> {
    pqxx::work tx(m_impl->conn);
    for (const auto& e : events) {
      tx.exec_params("INSERT INTO framework_event (set_name, loc, capability, change, at) VALUES ($1, $2, $3, $4, $5)",
                     e.set_name, e.loc, e.capability, e.change, rs::format_w3c_datetime(e.at));
    }
    tx.commit();
    return {};
  });
}

Result<std::vector<FrameworkEvent>> PgAuxStore::framework_events(const std::string& set, int64_t after_seq,
                                                                size_t limit) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read framework events", [&]() -> Result<std::vector<FrameworkEvent>> {
    pqxx::read_transaction tx(m_impl->conn);
    auto rows = tx.exec_params("SELECT seq, set_name, loc, capability, change, " + us("at") +
                                   " FROM framework_event WHERE set_name = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                               set, static_cast<long long>(after_seq), static_cast<long long>(limit));
    std::vector<FrameworkEvent> out;
    for (const auto& row : rows) {
      out.push_back(FrameworkEvent{row[0].as<int64_t>(), row[1].as<std::string>(), row[2].as<std::string>(),
                                   row[3].as<std::string>(), row[4].as<std::string>(), read_time(row[5])});
    }
    return out;
  });
}

Result<int64_t> PgAuxStore::last_framework_seq() {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read the last framework event", [&]() -> Result<int64_t> {
    pqxx::read_transaction tx(m_impl->conn);
    return tx.exec1("SELECT coalesce(max(seq), 0) FROM framework_event")[0].as<int64_t>();
  });
}

Result<uint64_t> PgAuxStore::expire_framework_events(rs::Timestamp before) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("expire framework events", [&]() -> Result<uint64_t> {
    pqxx::work tx(m_impl->conn);
    auto r = tx.exec_params("DELETE FROM framework_event WHERE at < $1", rs::format_w3c_datetime(before));
    tx.commit();
    return static_cast<uint64_t>(r.affected_rows());
  });
}

Result<void> PgAuxStore::put_push_subscription(const PushSubscription& s) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("record a push subscription", [&]() -> Result<void> {
    pqxx::work tx(m_impl->conn);
    tx.exec_params("INSERT INTO push_subscription (source, topic, hub, token, secret, state, lease_seconds, "
                   "expires_at, requested_at, verified_at, last_notification_at, notifications, ignored, last_note) "
                   "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) "
                   "ON CONFLICT (source, topic) DO UPDATE SET hub = EXCLUDED.hub, token = EXCLUDED.token, "
                   "secret = EXCLUDED.secret, state = EXCLUDED.state, lease_seconds = EXCLUDED.lease_seconds, "
                   "expires_at = EXCLUDED.expires_at, requested_at = EXCLUDED.requested_at, "
                   "verified_at = EXCLUDED.verified_at, last_notification_at = EXCLUDED.last_notification_at, "
                   "notifications = EXCLUDED.notifications, ignored = EXCLUDED.ignored, last_note = EXCLUDED.last_note",
                   s.source, s.topic, s.hub, s.token, nonempty(s.secret), s.state, s.lease_seconds,
                   opt_time(s.expires_at), rs::format_w3c_datetime(s.requested_at), opt_time(s.verified_at),
                   opt_time(s.last_notification_at), static_cast<long long>(s.notifications),
                   static_cast<long long>(s.ignored), nonempty(s.last_note));
    tx.commit();
    return {};
  });
}

Result<bool> PgAuxStore::remove_push_subscription(const std::string& source, const std::string& topic) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("remove a push subscription", [&]() -> Result<bool> {
    pqxx::work tx(m_impl->conn);
    auto r = tx.exec_params("DELETE FROM push_subscription WHERE source = $1 AND topic = $2", source, topic);
    tx.commit();
    return r.affected_rows() > 0;
  });
}

Result<std::vector<PushSubscription>> PgAuxStore::push_subscriptions() {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read push subscriptions", [&]() -> Result<std::vector<PushSubscription>> {
    pqxx::read_transaction tx(m_impl->conn);
    auto rows = tx.exec("SELECT source, topic, hub, token, secret, state, coalesce(lease_seconds, 0), " +
                        us("expires_at") + ", " + us("requested_at") + ", " + us("verified_at") + ", " +
                        us("last_notification_at") +
                        ", notifications, ignored, last_note FROM push_subscription ORDER BY source, topic");
    std::vector<PushSubscription> out;
    for (const auto& row : rows) {
      PushSubscription s;
      s.source = row[0].as<std::string>();
      s.topic = row[1].as<std::string>();
      s.hub = row[2].as<std::string>();
      s.token = row[3].as<std::string>();
      s.secret = text_or_empty(row[4]);
      s.state = row[5].as<std::string>();
      s.lease_seconds = row[6].as<int>();
      s.expires_at = read_opt_time(row[7]);
      s.requested_at = read_time(row[8]);
      s.verified_at = read_opt_time(row[9]);
      s.last_notification_at = read_opt_time(row[10]);
      s.notifications = row[11].as<uint64_t>();
      s.ignored = row[12].as<uint64_t>();
      s.last_note = text_or_empty(row[13]);
      out.push_back(std::move(s));
    }
    return out;
  });
}

namespace {

const char* k_archived_columns = "url_path, set_name, kind, coalesce(part, 0), "
                                 "(extract(epoch from part_from) * 1000000)::bigint, "
                                 "(extract(epoch from part_until) * 1000000)::bigint, coalesce(snapshot, ''), "
                                 "(extract(epoch from at) * 1000000)::bigint, "
                                 "(extract(epoch from completed) * 1000000)::bigint, is_index, sha256, length, "
                                 "(extract(epoch from archived_at) * 1000000)::bigint";

ArchivedDocument read_archived(const pqxx::row& row) {
  ArchivedDocument d;
  d.url_path = row[0].as<std::string>();
  d.set_name = row[1].as<std::string>();
  d.kind = row[2].as<std::string>();
  d.part = row[3].as<size_t>();
  d.from = read_opt_time(row[4]);
  d.until = read_opt_time(row[5]);
  d.snapshot = row[6].as<std::string>();
  d.at = read_opt_time(row[7]);
  d.completed = read_opt_time(row[8]);
  d.is_index = row[9].as<bool>();
  d.sha256 = row[10].as<std::string>();
  d.length = row[11].as<uint64_t>();
  d.archived_at = read_time(row[12]);
  return d;
}

} // namespace

Result<void> PgAuxStore::put_archived(const std::vector<ArchivedDocument>& docs) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("record archived documents", [&]() -> Result<void> {
    pqxx::work tx(m_impl->conn);
    for (const auto& d : docs) {
      tx.exec_params("INSERT INTO archived_document (url_path, set_name, kind, part, part_from, part_until, snapshot, "
                     "at, completed, is_index, sha256, length) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, "
                     "$12) ON CONFLICT (url_path) DO NOTHING",
                     d.url_path, d.set_name, d.kind,
                     d.part > 0 ? std::optional<long long>(static_cast<long long>(d.part)) : std::nullopt,
                     opt_time(d.from), opt_time(d.until), nonempty(d.snapshot), opt_time(d.at), opt_time(d.completed),
                     d.is_index, d.sha256, static_cast<long long>(d.length));
    }
    tx.commit();
    return {};
  });
}

Result<std::vector<ArchivedDocument>> PgAuxStore::archived(const std::string& set, const std::string& kind) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read archived documents", [&]() -> Result<std::vector<ArchivedDocument>> {
    pqxx::read_transaction tx(m_impl->conn);
    auto rows = tx.exec_params(std::string("SELECT ") + k_archived_columns +
                                   " FROM archived_document WHERE set_name = $1 AND kind = $2 "
                                   "ORDER BY part NULLS LAST, at NULLS LAST, url_path",
                               set, kind);
    std::vector<ArchivedDocument> out;
    for (const auto& row : rows) {
      out.push_back(read_archived(row));
    }
    return out;
  });
}

Result<std::optional<ArchivedDocument>> PgAuxStore::archived_document(const std::string& url_path) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("read an archived document", [&]() -> Result<std::optional<ArchivedDocument>> {
    pqxx::read_transaction tx(m_impl->conn);
    auto rows = tx.exec_params(std::string("SELECT ") + k_archived_columns +
                                   " FROM archived_document WHERE url_path = $1",
                               url_path);
    if (rows.empty()) {
      return std::optional<ArchivedDocument>();
    }
    return std::optional<ArchivedDocument>(read_archived(rows[0]));
  });
}

Result<uint64_t> PgAuxStore::expire_archived(rs::Timestamp before) {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->conn.run("expire archived documents", [&]() -> Result<uint64_t> {
    pqxx::work tx(m_impl->conn);
    const std::string t = rs::format_w3c_datetime(before);
    // A snapshot goes whole: every document of it, by its `at`.
    // A Change List part, and the Change Dump package of it, by its end.
    auto r = tx.exec_params("DELETE FROM archived_document WHERE (kind IN ('changelist', 'changedump', "
                            "'changedump-package') AND part_until < $1) OR (kind = 'resourcelist' AND at < $1)",
                            t);
    tx.commit();
    return static_cast<uint64_t>(r.affected_rows());
  });
}

} // namespace tributary::store

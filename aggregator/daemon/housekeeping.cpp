#include "aggregator/daemon/housekeeping.h"

#include "aggregator/daemon/source_actions.h"

#include "aggregator/status/json.h"
#include "common/log.h"
#include "republisher/server.h"
#include "store/pg/pg_store.h"

#include <algorithm>

namespace tributary::agg {

Housekeeping::Housekeeping(DaemonState& state, pub::Republisher* republisher)
    : m_state(state), m_republisher(republisher) {}

void Housekeeping::prune_runs() {
  constexpr size_t k_slice = 10000;
  std::unique_ptr<store::PgStore> conn;
  std::unique_lock lock(m_state.mutex);
  while (!m_state.stopping) {
    const std::chrono::seconds keep = m_state.config.run_retention;
    lock.unlock();
    if (keep.count() > 0) {
      if (!conn) {
        auto opened = store::PgStore::open(config_database());
        if (opened) {
          conn = std::move(*opened);
        } else {
          log::warn("", "run retention: " + opened.error().message);
        }
      }
      uint64_t removed = 0;
      for (bool more = conn != nullptr; more && !m_state.stopping;) {
        auto n = conn->prune_runs(keep, k_slice);
        if (!n) {
          log::warn("", "run retention: " + n.error().message);
          conn.reset(); // opened again next time
          break;
        }
        removed += *n;
        more = *n == k_slice;
      }
      if (removed > 0) {
        log::info("", "run retention: removed runs past " + std::to_string(keep.count() / 86400) + " days",
                  {{"runs", std::to_string(removed)}});
      }
    }
    compact_change_log(conn);
    expire_archive();
    lock.lock();
    // Hourly; a horizon shorter than ten hours is kept within a tenth of
    // itself (at least every 10 s).
    std::chrono::seconds period = std::chrono::hours(1);
    for (std::chrono::seconds h : {m_state.config.change_retention, m_state.config.run_retention}) {
      if (h.count() > 0) {
        period = std::min(period, std::max<std::chrono::seconds>(h / 10, std::chrono::seconds(10)));
      }
    }
    m_state.wake.wait_for(lock, period, [this] { return m_state.stopping.load(); });
  }
}

// Change-log retention: the closed Change List parts of every published
// set that ended more than `change_retention` ago are compacted (their
// change-log rows, then their Change Dump packages, go; the documents
// follow by the change notification).
void Housekeeping::compact_change_log(std::unique_ptr<store::PgStore>& conn) {
  std::chrono::seconds keep;
  {
    std::lock_guard lock(m_state.mutex);
    keep = m_state.config.change_retention;
  }
  if (keep.count() == 0 || !m_republisher) {
    return;
  }
  if (!conn) {
    auto opened = store::PgStore::open(config_database());
    if (!opened) {
      log::warn("", "change-log retention: " + opened.error().message);
      return;
    }
    conn = std::move(*opened);
  }
  const auto plan = m_republisher->compactable(
      std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now()) - keep);
  if (plan.compact.empty()) {
    return;
  }
  // The parts go into the archive first: a part compacted without its
  // archived copy would be history lost.
  if (auto archived = m_republisher->archive(plan.compact); !archived) {
    log::warn("", "change-log retention: not compacted, the parts could not be archived: " +
                      archived.error().message);
    return;
  }
  auto n = conn->compact_change_log(plan.compact, plan.published);
  if (!n) {
    log::warn("", "change-log retention: " + n.error().message);
    conn.reset();
    return;
  }
  std::string sets;
  for (const auto& c : plan.compact) {
    sets += (sets.empty() ? "" : ", ") + c.set_name + " to part " + std::to_string(c.parts);
  }
  log::info("", "change-log retention: compacted Change List parts that ended over " +
                    std::to_string(keep.count() / 86400) + " days ago",
            {{"changes", std::to_string(*n)}, {"sets", sets}});
  m_republisher->refresh_soon();
}

// Archive retention: documents archived longer ago than
// archive_retention go (their blobs with the next `tributary gc`).
void Housekeeping::expire_archive() {
  std::chrono::seconds keep;
  {
    std::lock_guard lock(m_state.mutex);
    if (!m_state.config.archives || m_state.config.archive_retention.count() == 0 || !m_state.push_store) {
      return;
    }
    keep = m_state.config.archive_retention;
  }
  auto n = m_state.push_store->expire_archived(
      std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now()) - keep);
  if (!n) {
    log::warn("", "archive retention: " + n.error().message);
  } else if (*n > 0) {
    log::info("", "archive retention: removed archived documents older than " +
                      std::to_string(keep.count() / 86400) + " days",
              {{"documents", std::to_string(*n)}});
  }
}

void Housekeeping::sample_history() {
  constexpr auto k_period = std::chrono::seconds(60);
  constexpr auto k_min_gap = std::chrono::seconds(5);
  constexpr auto k_history_retention = std::chrono::hours(24 * 7);
  std::unique_ptr<store::PgStatusStore> conn;
  std::unique_ptr<store::PgOperatorStore> pauses_from; // the operators' pauses, on any node
  auto last = std::chrono::steady_clock::now() - k_period;
  std::unique_lock lock(m_state.mutex);
  while (!m_state.stopping) {
    const auto since = std::chrono::steady_clock::now() - last;
    if (since < k_min_gap) {
      m_state.wake.wait_for(lock, k_min_gap - since, [this] { return m_state.stopping.load(); });
      continue;
    }
    if (!m_state.sample_soon && since < k_period) {
      m_state.wake.wait_for(lock, k_period - since, [this] { return m_state.stopping || m_state.sample_soon; });
      continue;
    }
    m_state.sample_soon = false;
    last = std::chrono::steady_clock::now();
    lock.unlock();
    if (!conn) {
      const std::string database = config_database();
      auto opened = store::PgStatusStore::open(database);
      auto opened_pauses = opened ? store::PgOperatorStore::open(database)
                                  : Result<std::unique_ptr<store::PgOperatorStore>>(tl::unexpected(opened.error()));
      if (!opened_pauses) {
        opened = tl::unexpected(opened_pauses.error());
      }
      if (opened) {
        conn = std::move(*opened);
        pauses_from = std::move(*opened_pauses);
      } else if (opened.error().kind == ErrorKind::database) {
        m_state.database.lost(opened.error().message);
      } else {
        log::warn("", "status history: " + opened.error().message);
      }
    }
    if (conn) {
      if (auto r = conn->sample(history_samples(m_state), k_history_retention); !r) {
        if (r.error().kind == ErrorKind::database) {
          m_state.database.lost(r.error().message); // said once a minute there
        } else {
          log::warn("", "status history: " + r.error().message);
        }
        conn.reset(); // opened again next time
      }
    }
    // Pauses and resumptions by operators on other nodes.
    auto pauses =
        conn ? pauses_from->pauses() : Result<std::vector<store::PauseInfo>>(std::vector<store::PauseInfo>{});
    lock.lock();
    if (conn && pauses) {
      apply_pauses(m_state, *pauses);
    }
  }
}

std::string Housekeeping::config_database() {
  std::lock_guard lock(m_state.mutex);
  return m_state.config.database;
}

} // namespace tributary::agg

// PgPool: the process's connections to a database, lent one transaction at a
// time.
#include "store/pg/pg_pool.h"

#include <map>

namespace tributary::store {

namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, std::weak_ptr<PgPool>> pools;
  PgBudget budget;
};

Registry& registry() {
  static Registry* r = new Registry; // never destroyed: pools may outlive static destruction
  return *r;
}

} // namespace

std::shared_ptr<PgPool> PgPool::of(const std::string& conninfo) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  auto& slot = r.pools[conninfo];
  if (auto p = slot.lock()) {
    return p;
  }
  auto p = std::make_shared<PgPool>(conninfo);
  slot = p;
  return p;
}

void set_pg_budget(const PgBudget& budget) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  r.budget = budget;
  r.budget.connections = std::max<size_t>(2, budget.connections);
}

PgBudget pg_budget() {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  return r.budget;
}

size_t PgPool::size() { return pg_budget().connections - 1; }

PgPoolStats pg_pool_stats() {
  std::vector<std::shared_ptr<PgPool>> live;
  {
    auto& r = registry();
    std::lock_guard lock(r.mutex);
    for (auto it = r.pools.begin(); it != r.pools.end();) {
      if (auto p = it->second.lock()) {
        live.push_back(std::move(p));
        ++it;
      } else {
        it = r.pools.erase(it);
      }
    }
  }
  PgPoolStats sum;
  sum.size = PgPool::size();
  for (const auto& p : live) {
    const PgPoolStats s = p->stats();
    sum.open += s.open;
    sum.in_use += s.in_use;
    sum.borrows += s.borrows;
    sum.waits += s.waits;
    sum.timeouts += s.timeouts;
    sum.wait_seconds += s.wait_seconds;
    sum.max_wait_seconds = std::max(sum.max_wait_seconds, s.max_wait_seconds);
  }
  return sum;
}

PgPool::PgPool(std::string conninfo) : m_conninfo(std::move(conninfo)) {}

PgPool::~PgPool() = default;

PgPool::Borrowed& PgPool::Borrowed::operator=(Borrowed&& o) noexcept {
  if (this != &o) {
    give_back();
    m_pool = o.m_pool;
    m_conn = std::move(o.m_conn);
    o.m_pool = nullptr;
  }
  return *this;
}

void PgPool::Borrowed::give_back() {
  if (m_pool) {
    m_pool->give(std::move(m_conn));
    m_pool = nullptr;
  }
}

PgPool::Borrowed PgPool::borrow() {
  const PgBudget budget = pg_budget();
  const size_t limit = budget.connections - 1;
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  std::unique_lock lock(m_mutex);
  bool waited = false;
  auto count_wait = [&] { // under the lock
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    m_stats.wait_seconds += s;
    m_stats.max_wait_seconds = std::max(m_stats.max_wait_seconds, s);
  };
  auto lend = [&] {
    ++m_stats.in_use;
    ++m_stats.borrows;
    if (waited) {
      count_wait();
    }
  };
  for (;;) {
    if (!m_idle.empty()) {
      auto c = std::move(m_idle.back());
      m_idle.pop_back();
      lend();
      return Borrowed(this, std::move(c));
    }
    if (m_stats.open < limit) {
      ++m_stats.open;
      lend();
      lock.unlock();
      try {
        return Borrowed(this, std::make_unique<pqxx::connection>(m_conninfo));
      } catch (...) {
        give(nullptr);
        throw;
      }
    }
    if (!waited) {
      waited = true;
      ++m_stats.waits;
    }
    if (m_freed.wait_until(lock, start + budget.wait) == std::cv_status::timeout && m_idle.empty() &&
        m_stats.open >= limit) {
      ++m_stats.timeouts;
      count_wait();
      throw PoolExhausted("no database connection came free within " +
                          std::to_string(budget.wait.count() / 1000.0).substr(0, 4) + " s (all " +
                          std::to_string(limit) + " of this process's are in use; see database_connections)");
    }
  }
}

void PgPool::give(std::unique_ptr<pqxx::connection> c) {
  {
    std::lock_guard lock(m_mutex);
    --m_stats.in_use;
    if (c && c->is_open() && m_stats.open <= size()) {
      m_idle.push_back(std::move(c));
    } else {
      --m_stats.open;
    }
  }
  m_freed.notify_one();
  // (a connection not kept closes here, outside the lock)
}

void PgPool::discard_idle() {
  std::vector<std::unique_ptr<pqxx::connection>> gone;
  {
    std::lock_guard lock(m_mutex);
    gone.swap(m_idle);
    m_stats.open -= gone.size();
  }
  m_freed.notify_all();
}

PgPool::Stats PgPool::stats() const {
  std::lock_guard lock(m_mutex);
  Stats s = m_stats;
  s.size = size();
  return s;
}

} // namespace tributary::store

// PgSession: the process's connection for LISTEN and advisory locks.
#include "store/pg/pg_session.h"

#include "store/pg/pg_pool.h"
#include "store/pg/pg_store.h"

#include "common/log.h"
#include "common/thread_name.h"

#include <poll.h>
#include <unistd.h>

namespace tributary::store {

class PgSession::Receiver : public pqxx::notification_receiver {
public:
  Receiver(pqxx::connection_base& c, std::atomic<bool>& pending)
      : notification_receiver(c, k_change_channel), m_pending(pending) {}
  void operator()(const std::string&, int) override { m_pending = true; }

private:
  std::atomic<bool>& m_pending;
};

std::shared_ptr<PgSession> PgSession::of(const std::string& conninfo) {
  static std::mutex mutex;
  static auto* sessions = new std::map<std::string, std::weak_ptr<PgSession>>;
  const std::string own = pg_budget().session_conninfo;
  const std::string& where = own.empty() ? conninfo : own;
  std::lock_guard lock(mutex);
  auto& slot = (*sessions)[where];
  if (auto s = slot.lock()) {
    return s;
  }
  auto s = std::make_shared<PgSession>(where);
  slot = s;
  return s;
}

std::string PgSession::process_name() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return "tributary (pid " + std::to_string(::getpid()) + " on " + host + ")";
}

PgSession::PgSession(std::string conninfo) : m_conninfo(std::move(conninfo)) {
  if (::pipe(m_wake) != 0) {
    m_wake[0] = m_wake[1] = -1;
  }
  m_thread = std::thread([this] {
    name_thread("pg session");
    loop();
  });
}

PgSession::~PgSession() {
  m_stop = true;
  wake();
  if (m_thread.joinable()) {
    m_thread.join();
  }
  std::lock_guard lock(m_mutex);
  m_receiver.reset();
  m_conn.reset();
  for (int fd : m_wake) {
    if (fd >= 0) {
      ::close(fd);
    }
  }
}

void PgSession::wake() {
  if (m_wake[1] >= 0) {
    const char c = 1;
    (void)!::write(m_wake[1], &c, 1);
  }
}

void PgSession::connect_locked() {
  auto c = std::make_unique<pqxx::connection>(m_conninfo);
  {
    pqxx::nontransaction tx(*c);
    // A process whose host died (no FIN reaches the server) holds its locks
    // until the server notices: keepalive probes bound that to about 25 s
    // instead of the kernel's two hours (over a Unix socket they do not
    // apply, nor are they needed: the peer's exit closes it). One round
    // trip for all four.
    tx.exec_params("SELECT set_config('application_name', $1, false), set_config('tcp_keepalives_idle', '10', false), "
                   "set_config('tcp_keepalives_interval', '5', false), set_config('tcp_keepalives_count', '3', false)",
                   process_name().substr(0, 63));
  }
  m_receiver = std::make_unique<Receiver>(*c, m_pending); // LISTEN
  m_conn = std::move(c);
  m_pending = true; // whatever was committed while not listening
  if (!m_last_error.empty()) {
    log::info("", "database session back: listening for changes again");
    m_last_error.clear();
  }
  wake();
}

void PgSession::lost_locked() {
  m_receiver.reset();
  m_conn.reset();
  m_held.clear();
  ++m_generation;
}

// Notifications that arrived while a lock was being taken are read with
// its answer: delivered now, not at the next byte on the socket.
void PgSession::drain_locked() {
  if (m_conn) {
    m_conn->get_notifs();
  }
  if (m_pending) {
    wake();
  }
}

void PgSession::connect_soon() {
  m_wanted = true;
  wake();
}

bool PgSession::try_lock(int a, int b, uint64_t* generation) {
  std::lock_guard lock(m_mutex);
  try {
    if (!m_conn) {
      connect_locked();
    }
    if (generation) {
      *generation = m_generation;
    }
    if (m_held.count({a, b})) {
      return false;
    }
    bool got = false;
    {
      pqxx::nontransaction tx(*m_conn);
      got = tx.exec_params1("SELECT pg_try_advisory_lock($1, $2)", a, b)[0].as<bool>();
    }
    if (got) {
      m_held.insert({a, b});
    }
    drain_locked();
    return got;
  } catch (const pqxx::broken_connection&) {
    lost_locked();
    throw;
  } catch (const pqxx::sql_error& e) {
    if (m_conn && !m_conn->is_open()) {
      lost_locked();
    }
    throw;
  }
}

void PgSession::unlock(int a, int b, uint64_t generation) {
  std::lock_guard lock(m_mutex);
  if (generation != m_generation || !m_held.count({a, b})) {
    return; // gone with the connection it was taken on
  }
  m_held.erase({a, b});
  try {
    if (m_conn) {
      {
        pqxx::nontransaction tx(*m_conn);
        tx.exec_params1("SELECT pg_advisory_unlock($1, $2)", a, b);
      }
      drain_locked();
    }
  } catch (const std::exception&) {
    lost_locked(); // the server releases what it held
  }
}

bool PgSession::holds(int a, int b) {
  std::lock_guard lock(m_mutex);
  return m_conn && m_held.count({a, b});
}

bool PgSession::confirm(uint64_t generation) {
  std::lock_guard lock(m_mutex);
  if (generation != m_generation || !m_conn) {
    return false;
  }
  try {
    {
      pqxx::nontransaction tx(*m_conn);
      tx.exec("SELECT 1");
    }
    drain_locked();
    return true;
  } catch (const std::exception&) {
    lost_locked();
    return false;
  }
}

uint64_t PgSession::listen(std::function<void()> fn) {
  uint64_t id = 0;
  {
    std::lock_guard lock(m_listeners_mutex);
    id = m_next_listener++;
    m_listeners[id] = std::move(fn);
  }
  m_pending = true; // once soon, as if something had been missed
  wake();
  return id;
}

void PgSession::unlisten(uint64_t id) {
  std::lock_guard calling(m_call_mutex); // not called after this returns
  std::lock_guard lock(m_listeners_mutex);
  m_listeners.erase(id);
}

void PgSession::loop() {
  auto next_try = std::chrono::steady_clock::now();
  while (!m_stop) {
    int fd = -1;
    bool has_listeners = false;
    {
      std::lock_guard lock(m_listeners_mutex);
      has_listeners = !m_listeners.empty();
    }
    {
      std::lock_guard lock(m_mutex);
      // Connected while anyone listens (or holds a lock: then it is up), or
      // once asked to (connect_soon).
      if (!m_conn && (has_listeners || m_wanted.exchange(false)) && std::chrono::steady_clock::now() >= next_try) {
        try {
          connect_locked();
        } catch (const std::exception& e) {
          // (Unheard of without listeners: the first lock says why.)
          if (has_listeners && e.what() != m_last_error) {
            log::warn("", std::string("not listening for changes (documents follow on their own schedule): ") +
                              e.what());
            m_last_error = e.what();
          }
          if (has_listeners) {
            next_try = std::chrono::steady_clock::now() + std::chrono::seconds(5);
          }
        }
      }
      if (m_conn) {
        fd = m_conn->sock();
      }
    }
    pollfd p[2] = {{fd, POLLIN, 0}, {m_wake[0], POLLIN, 0}};
    ::poll(p, 2, 1000);
    if (p[1].revents & POLLIN) {
      char buf[64];
      (void)!::read(m_wake[0], buf, sizeof buf);
    }
    if (fd >= 0 && p[0].revents) {
      std::lock_guard lock(m_mutex);
      try {
        if (m_conn && m_conn->sock() == fd) {
          m_conn->get_notifs();
          if (!m_conn->is_open()) {
            throw pqxx::broken_connection("the server closed the connection");
          }
        }
      } catch (const std::exception& e) {
        log::warn("", std::string("database session lost (its locks with it): ") + e.what());
        m_last_error = e.what();
        lost_locked();
        next_try = std::chrono::steady_clock::now();
      }
    }
    if (m_pending.exchange(false)) {
      std::lock_guard calling(m_call_mutex); // unlisten() waits for the round
      std::vector<std::function<void()>> call;
      {
        std::lock_guard lock(m_listeners_mutex);
        for (const auto& [id, fn] : m_listeners) {
          call.push_back(fn);
        }
      }
      for (const auto& fn : call) {
        fn();
      }
    }
  }
}

} // namespace tributary::store

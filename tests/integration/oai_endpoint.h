#pragma once

// A test OAI-PMH 2.0 repository over real HTTP, answering as DSpace does
// (default namespace, oai_dc records, com_/col_ sets, tokens with cursor and
// completeListSize) and able to misbehave as real ones do: tokens that
// expire (arXiv's, daily), 503 with Retry-After, a window refused as too
// large, a character XML forbids inside one record.

#include "http_get.h"

#include "resourcesync/datetime.h"

#include <httplib.h>

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace tributary::test {

class OaiEndpoint {
public:
  struct Record {
    std::string datestamp; // at the repository's granularity
    std::vector<std::string> sets;
    bool deleted = false;
    std::string title;
  };

  bool second_granularity = true;
  std::string deleted_record = "persistent"; // Identify's deletedRecord
  size_t page_size = 3;
  // Pages answered 503 (Retry-After: 1) before they are served, once each.
  std::atomic<int> unavailable{0};
  // A harvest window (from..until) wider than this many days, or none, is
  // refused with badArgument; 0: never.
  int max_window_days = 0;
  std::atomic<int> requests{0};
  std::atomic<int> delay_ms{0}; // before each answer
  // Identify's earliestDatestamp; empty: the earliest record's, as DSpace
  // computes it.
  std::string earliest;
  std::atomic<int> refused_windows{0};
  std::atomic<int> bad_tokens{0};

  OaiEndpoint() : m_running(setup()) {}

  std::string base() const { return m_running.base() + "/oai/request"; }

  // Sets a record (or changes it), dated now.
  void put(const std::string& id, const std::string& title, std::vector<std::string> sets = {"col_1"}) {
    std::lock_guard lock(m_mutex);
    m_records[id] = Record{stamp(), std::move(sets), false, title};
  }
  void remove(const std::string& id) {
    std::lock_guard lock(m_mutex);
    if (deleted_record == "no") {
      m_records.erase(id);
    } else {
      m_records[id].deleted = true;
      m_records[id].datestamp = stamp();
    }
  }
  // Forgets a deleted record's trace (a "transient" repository does).
  void forget(const std::string& id) {
    std::lock_guard lock(m_mutex);
    m_records.erase(id);
  }
  // Every token issued so far stops being honoured.
  void expire_tokens() { ++m_generation; }
  std::map<std::string, Record> records() {
    std::lock_guard lock(m_mutex);
    return m_records;
  }
  std::string stamp() const {
    const auto now = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
    const std::string s = rs::format_w3c_datetime(std::chrono::time_point_cast<std::chrono::microseconds>(now));
    return second_granularity ? s : s.substr(0, 10);
  }
  // What GetRecord's URL for a record is, as our republished lists name it.
  std::string record_url(const std::string& id) const;

private:
  httplib::Server& setup();
  std::string envelope(const std::string& verb, const std::string& inner) const;
  std::string list(const httplib::Request& req);

  httplib::Server m_server;
  mutable std::mutex m_mutex;
  std::map<std::string, Record> m_records;
  std::atomic<int> m_generation{0};
  ServerThread m_running;
};

} // namespace tributary::test

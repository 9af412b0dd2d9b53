#include "sync_engine/read_ahead.h"

#include "common/thread_name.h"

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace tributary::sync {

namespace {

// One entry as the reader handed it on: `reason` set for a rejected one.
struct Event {
  rs::Entry entry;
  uint64_t line = 0;
  std::optional<std::string> reason;
};
using Chunk = std::vector<Event>;

// Between the parsing thread and the caller.
class Queue {
public:
  // False once the caller stopped: the parser gives up.
  bool put(Chunk&& c) {
    std::unique_lock lock(m_mutex);
    m_cv.wait(lock, [&] { return m_chunks.empty() || m_stopped; });
    if (m_stopped) {
      return false;
    }
    m_chunks.push_back(std::move(c));
    m_cv.notify_all();
    return true;
  }
  void close(Result<rs::ReadSummary> r) {
    std::lock_guard lock(m_mutex);
    m_result = std::move(r);
    m_closed = true;
    m_cv.notify_all();
  }
  void close(std::exception_ptr e) {
    std::lock_guard lock(m_mutex);
    m_error = e;
    m_closed = true;
    m_cv.notify_all();
  }
  // The next chunk; nullopt once the parser is done.
  std::optional<Chunk> take() {
    std::unique_lock lock(m_mutex);
    m_cv.wait(lock, [&] { return !m_chunks.empty() || m_closed; });
    if (m_chunks.empty()) {
      return std::nullopt;
    }
    Chunk c = std::move(m_chunks.front());
    m_chunks.pop_front();
    m_cv.notify_all();
    return c;
  }
  void stop() {
    std::lock_guard lock(m_mutex);
    m_stopped = true;
    m_cv.notify_all();
  }
  bool stopped() {
    std::lock_guard lock(m_mutex);
    return m_stopped;
  }
  // Once the parser has returned.
  Result<rs::ReadSummary> result() {
    if (m_error) {
      std::rethrow_exception(m_error);
    }
    return std::move(m_result);
  }

private:
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::deque<Chunk> m_chunks;
  bool m_closed = false;
  bool m_stopped = false;
  Result<rs::ReadSummary> m_result = make_error(ErrorKind::transient, "stopped before the end of the document");
  std::exception_ptr m_error;
};

// Thrown on the parsing thread to end the reading once the caller stopped.
struct Stopped {};

class Producer : public rs::DocumentHandler {
public:
  Producer(Queue& q, size_t chunk, size_t first) : m_queue(q), m_chunk(chunk), m_first(first) {}
  void on_entry(rs::Entry&& e, uint64_t line) override {
    m_current.push_back(Event{std::move(e), line, std::nullopt});
    if (++m_entries >= (m_flushed || m_first == 0 ? m_chunk : m_first)) {
      flush();
    }
  }
  void on_rejected_entry(rs::Entry&& e, uint64_t line, const std::string& reason) override {
    m_current.push_back(Event{std::move(e), line, reason});
  }
  void flush() {
    if (m_current.empty()) {
      return;
    }
    if (!m_queue.put(std::exchange(m_current, {}))) {
      throw Stopped{};
    }
    m_entries = 0;
    m_flushed = true;
  }

private:
  Queue& m_queue;
  size_t m_chunk;
  size_t m_first;
  bool m_flushed = false;
  Chunk m_current;
  size_t m_entries = 0;
};

} // namespace

Result<rs::ReadSummary> read_ahead(const SpooledDocument& doc, rs::DocumentHandler& into, size_t chunk,
                                   const std::function<bool()>& stopped, size_t first_chunk) {
  Queue queue;
  std::thread parser([&] {
    name_thread("read ahead");
    try {
      Producer p(queue, std::max<size_t>(chunk, 1), first_chunk);
      auto r = doc.read(p);
      if (r && !queue.stopped()) {
        p.flush();
      }
      queue.close(std::move(r));
    } catch (const Stopped&) {
      queue.close(make_error(ErrorKind::transient, "stopped before the end of the document"));
    } catch (...) {
      queue.close(std::current_exception());
    }
  });
  try {
    while (auto c = queue.take()) {
      for (auto& ev : *c) {
        if (ev.reason) {
          into.on_rejected_entry(std::move(ev.entry), ev.line, *ev.reason);
        } else {
          into.on_entry(std::move(ev.entry), ev.line);
        }
      }
      if (stopped()) {
        break;
      }
    }
  } catch (...) {
    queue.stop();
    parser.join();
    throw;
  }
  queue.stop();
  parser.join();
  return queue.result();
}

} // namespace tributary::sync

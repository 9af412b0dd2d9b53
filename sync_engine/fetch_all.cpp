// Fetching a slice of entries' content: pipelined where the origin allows,
// the ordinary way (fetch_content) for the rest and for whatever the
// pipelined path hands back.
#include "sync_engine/run_context.h"

#include "sync_engine/pipelined_http.h"
#include "sync_engine/retry.h"

#include "common/log.h"
#include "common/blocking_semaphore.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <thread>

namespace tributary::sync {

namespace {

// Connections to an origin that answers fast (see fetch_all).
constexpr size_t k_fast_connections = 2;
// Requests one pipelined worker sends before it stores what came back.
constexpr size_t k_pipelined_chunk = 32;
} // namespace

// Fetches one slice of entries' content (RunContext::fetch_all): the
// entries of origins that allow it in pipelined chunks, the rest (and
// whatever a chunk hands back) the ordinary way, by up to `concurrency`
// workers, this thread the first of them.
class SliceFetch {
public:
  SliceFetch(RunContext& ctx, const std::vector<const rs::Entry*>& entries)
      : m_ctx(ctx), m_entries(entries), m_slots(static_cast<std::ptrdiff_t>(ctx.src().concurrency)),
        m_workers(std::min<size_t>(std::min<size_t>(ctx.src().concurrency, 64), entries.size())) {
    m_results.reserve(entries.size());
    for (size_t i = 0; i < entries.size(); ++i) {
      m_results.emplace_back(make_error(ErrorKind::transient, "not fetched"));
    }
  }

  std::vector<Result<FetchedContent>> run() {
    plan_chunks();
    {
      std::lock_guard lock(m_plain_mutex);
      for (size_t t = 1; t < std::min(m_workers, k_fast_connections); ++t) {
        m_threads.emplace_back([this, t] { work(t); });
      }
      bool all_fast = true;
      for (const auto& ch : m_chunks) {
        all_fast = all_fast && ch.origin->fast() && !ch.origin->far();
      }
      if (!m_plain.empty() || !all_fast) {
        start_rest();
      }
    }
    if (m_workers > 0) {
      work(0);
    }
    join();
    return std::move(m_results);
  }

private:
  // Entries of one origin, pipelined together.
  struct Chunk {
    PipelinedOrigin* origin;
    std::vector<size_t> index;
    std::vector<PipelinedGet> gets;
  };

  // The ordinary way, with the run's retries. `concurrency` requests in
  // flight, by as many workers: blobs are sealed here and published by the
  // committer, once for the slice (stage_sealed), so no worker waits on a
  // disk. Four times as many workers (as when each blob was synced on its
  // own) only queued for the slots: on 2 cores a default baseline from
  // nginx ran at a median 5,682 resources/s with 32 workers and 6,711/s
  // with 8 (five runs each, alternated).
  void fetch_one(size_t i) {
    const rs::Entry& e = *m_entries[i];
    auto policy = [&](const std::string& url, std::string& why) { return m_ctx.host_allowed(url, e, why); };
    // Nothing may leave a worker thread: an exception there is
    // std::terminate for the whole daemon. It costs this entry.
    try {
      for (int round = 1;; ++round) {
        m_results[i] = fetch_content(*m_ctx.m_content_fetcher, m_ctx.blobs(), m_ctx.fetch_options(), e.loc, e.links,
                                     expected_of(e), policy, &m_slots, /*defer_publish=*/true);
        if (m_results[i] || m_results[i].error().kind != ErrorKind::transient ||
            round >= m_ctx.opt().retry.max_attempts) {
          break;
        }
        if (!sleep_unless_cancelled(m_ctx.opt().cancel, backoff_delay(m_ctx.opt().retry, round))) {
          break;
        }
      }
    } catch (const std::exception& ex) {
      m_results[i] = make_error(ErrorKind::permanent, e.loc + ": internal error: " + ex.what());
    } catch (...) {
      m_results[i] = make_error(ErrorKind::permanent, e.loc + ": internal error");
    }
  }

  // Pipelined chunks (entries of one origin), and the ordinary queue.
  void plan_chunks() {
    std::map<PipelinedOrigin*, size_t> open_chunk;
    for (size_t i = 0; i < m_entries.size(); ++i) {
      std::string target;
      PipelinedOrigin* p = m_ctx.pipeline_for(*m_entries[i], target);
      if (!p) {
        m_plain.push_back(i);
        continue;
      }
      auto it = open_chunk.find(p);
      if (it == open_chunk.end() || m_chunks[it->second].index.size() >= k_pipelined_chunk) {
        m_chunks.push_back(Chunk{p, {}, {}});
        it = open_chunk.insert_or_assign(p, m_chunks.size() - 1).first;
      }
      m_chunks[it->second].index.push_back(i);
      m_chunks[it->second].gets.push_back(PipelinedGet{std::move(target)});
    }
  }

  // Returns whether the waiting workers have something to do now: its
  // fallbacks, a chunk they may take (its origin turned out slow), or the
  // end. (Waking them after every chunk cost a futex wake and six thread
  // switches a chunk, for nothing, to an origin that answers fast.)
  bool run_chunk(Chunk& ch) {
    if (ch.origin->usable()) {
      try {
        ch.origin->run(ch.gets);
      } catch (const std::exception& ex) {
        log::warn(m_ctx.src().name, std::string("pipelined fetch failed: ") + ex.what(), {});
      }
    }
    std::vector<size_t> again;
    for (size_t k = 0; k < ch.index.size(); ++k) {
      PipelinedGet& g = ch.gets[k];
      const size_t i = ch.index[k];
      if (g.answered && g.status >= 200 && g.status <= 299 &&
          (g.content_encoding.empty() || g.content_encoding == "identity")) {
        auto r = accept_content(m_ctx.blobs(), expected_of(*m_entries[i]), m_entries[i]->loc, g.body, g.content_type);
        if (r || r.error().kind != ErrorKind::invalid_document) {
          m_results[i] = std::move(r);
          continue;
        }
      }
      // Anything but a clean answer is asked again the ordinary way,
      // which judges it (statuses, redirects, mirrors, retries).
      again.push_back(i);
    }
    ch.gets.clear();
    std::lock_guard lock(m_plain_mutex);
    m_plain.insert(m_plain.end(), again.begin(), again.end());
    --m_running;
    if (!again.empty() || !ch.origin->fast() || ch.origin->far()) {
      start_rest();
      return true;
    }
    return m_running == 0 && m_next_chunk.load() >= m_chunks.size();
  }

  // Each worker pipelines on a connection of its own. To a near origin
  // that answers fast, two connections carry bursts (on 2 cores more only
  // cost thread switches); to one that does not, every worker does, one
  // request at a time each (PipelinedOrigin::fast()); to a far one, every
  // worker does, with bursts: a burst's round trip is the path's, and
  // two connections filled a 50 ms path with 32 requests at most.
  bool may_pipeline(size_t worker, const Chunk& ch) const {
    return worker < k_fast_connections || !ch.origin->fast() || ch.origin->far();
  }

  void work(size_t worker) {
    for (;;) {
      size_t c = m_next_chunk.load();
      while (c < m_chunks.size() && !m_ctx.cancelled() && may_pipeline(worker, m_chunks[c])) {
        if (m_next_chunk.compare_exchange_weak(c, c + 1)) {
          {
            std::lock_guard lock(m_plain_mutex);
            ++m_running;
          }
          if (run_chunk(m_chunks[c])) {
            m_plain_cv.notify_all();
          }
          c = m_next_chunk.load();
        }
      }
      size_t i = 0;
      {
        std::unique_lock lock(m_plain_mutex);
        if (m_plain.empty()) {
          const bool chunks_left = m_next_chunk.load() < m_chunks.size() && !m_ctx.cancelled();
          if (!chunks_left && m_running == 0) {
            return;
          }
          // Fallbacks may come from the chunks running; a chunk this
          // worker may take once its origin turns out slow.
          m_plain_cv.wait_for(lock, std::chrono::milliseconds(50));
          continue;
        }
        i = m_plain.front();
        m_plain.pop_front();
      }
      if (m_ctx.cancelled()) {
        continue; // the batch will not be committed
      }
      fetch_one(i);
    }
  }

  // The workers beyond those that pipeline are started once there is work
  // for them (call under m_plain_mutex): to an origin that answers fast
  // they would only wait, made and joined each batch (six threads a batch
  // of 1,000). Worker 0 is the calling thread; the list holds workers 1
  // onwards.
  void start_rest() {
    for (size_t t = std::max(m_threads.size() + 1, std::min(m_workers, k_fast_connections)); t < m_workers; ++t) {
      m_threads.emplace_back([this, t] { work(t); });
    }
  }

  // Workers may be started until the last chunk is done with: joined one
  // by one, the list read under the lock.
  void join() {
    for (size_t k = 0;; ++k) {
      std::thread* t = nullptr;
      {
        std::lock_guard lock(m_plain_mutex);
        if (k >= m_threads.size()) {
          break;
        }
        t = &m_threads[k];
      }
      t->join();
    }
  }

  RunContext& m_ctx;
  const std::vector<const rs::Entry*>& m_entries;
  std::vector<Result<FetchedContent>> m_results;
  BlockingSemaphore m_slots;
  const size_t m_workers;
  std::vector<Chunk> m_chunks;
  std::mutex m_plain_mutex; // guards m_plain, m_running, m_threads
  std::condition_variable m_plain_cv;
  std::deque<size_t> m_plain;
  std::atomic<size_t> m_next_chunk{0};
  size_t m_running = 0; // chunks taken and not yet done with
  std::deque<std::thread> m_threads;
};

std::vector<Result<FetchedContent>> fetch_slice(RunContext& ctx, const std::vector<const rs::Entry*>& entries) {
  return SliceFetch(ctx, entries).run();
}

} // namespace tributary::sync

// Fetching a slice of entries' content: pipelined where the origin allows,
// the ordinary way (fetch_content) for the rest and for whatever the
// pipelined path hands back.
#include "sync_engine/run_context.h"

#include "sync_engine/pipelined_http.h"
#include "sync_engine/retry.h"

#include "common/log.h"
#include "common/slots.h"

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
// Answers larger than this are not for the pipelined path: they are read
// whole into memory there.
constexpr uint64_t k_pipelined_max_body = 256 * 1024;

bool has_duplicates(const rs::Entry& e) {
  for (const auto& l : e.links) {
    if (l.rel == "duplicate" && !l.href.empty()) {
      return true;
    }
  }
  return false;
}

} // namespace

PipelinedOrigin* RunContext::pipeline_for(const rs::Entry& e, std::string& target) {
  if (!src.pipelining || has_duplicates(e)) {
    return nullptr;
  }
  if (const auto& x = expected_of(e); x.length && *x.length > k_pipelined_max_body) {
    return nullptr;
  }
  auto u = parse_url(e.loc);
  if (!u || u->scheme != "http") {
    return nullptr; // https goes the ordinary way (cpp-httplib's TLS)
  }
  std::string origin = u->origin();
  std::lock_guard lock(m_pipelines_mutex);
  auto it = m_pipelines.find(origin);
  if (it == m_pipelines.end()) {
    auto headers = m_endpoint->direct_headers(e.loc, fetch_options);
    if (!headers || !m_throttle || !m_throttle->robots_known(origin)) {
      return nullptr; // robots.txt is read by the first ordinary request
    }
    PipelineSettings s;
    s.connect_timeout = fetch_options.connect_timeout;
    s.read_timeout = fetch_options.read_timeout;
    s.max_body_bytes = std::min(k_pipelined_max_body, fetch_options.max_body_bytes);
    s.headers.assign(headers->begin(), headers->end());
    s.addresses = fetch_options.addresses;
    s.cancel = opt.cancel;
    s.max_connections = fetch_options.max_connections;
    s.requests_per_second = fetch_options.requests_per_second;
    it = m_pipelines.emplace(origin, std::make_unique<PipelinedOrigin>(*u, std::move(s), m_throttle)).first;
  }
  PipelinedOrigin* p = it->second.get();
  if (!p->usable()) {
    if (m_pipeline_warned.insert(origin).second) {
      log::warn(src.name, "pipelining turned off for " + origin + ": " + p->broken_reason() +
                              "; its requests go one at a time",
                {});
    }
    return nullptr;
  }
  std::string why;
  if (!host_allowed(*u, e.loc, e, why)) {
    return nullptr;
  }
  target = std::move(u->target);
  return p;
}

std::vector<Result<FetchedContent>> RunContext::fetch_all(const std::vector<const rs::Entry*>& entries) {
  std::vector<Result<FetchedContent>> results;
  results.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    results.emplace_back(make_error(ErrorKind::transient, "not fetched"));
  }
  // `concurrency` requests in flight, by as many workers: blobs are sealed
  // here and published by the committer, once for the slice (stage_sealed),
  // so no worker waits on a disk. Four times as many workers (as
  // when each blob was synced on its own) only queued for the slots: on 2
  // cores a default baseline from nginx ran at a median 5,682 resources/s
  // with 32 workers and 6,711/s with 8 (five runs each, alternated).
  Slots slots(static_cast<std::ptrdiff_t>(src.concurrency));
  auto fetch_one = [&](size_t i) {
    const rs::Entry& e = *entries[i];
    auto policy = [&](const std::string& url, std::string& why) { return host_allowed(url, e, why); };
    // Nothing may leave a worker thread: an exception there is
    // std::terminate for the whole daemon. It costs this entry.
    try {
      for (int round = 1;; ++round) {
        results[i] = fetch_content(*m_content_fetcher, blobs, fetch_options, e.loc, e.links, expected_of(e), policy,
                                   &slots, /*defer_publish=*/true);
        if (results[i] || results[i].error().kind != ErrorKind::transient || round >= opt.retry.max_attempts) {
          break;
        }
        if (!sleep_unless_cancelled(opt.cancel, backoff_delay(opt.retry, round))) {
          break;
        }
      }
    } catch (const std::exception& ex) {
      results[i] = make_error(ErrorKind::permanent, e.loc + ": internal error: " + ex.what());
    } catch (...) {
      results[i] = make_error(ErrorKind::permanent, e.loc + ": internal error");
    }
  };

  // Pipelined chunks (entries of one origin), and the ordinary queue.
  struct Chunk {
    PipelinedOrigin* origin;
    std::vector<size_t> index;
    std::vector<PipelinedGet> gets;
  };
  std::vector<Chunk> chunks;
  std::deque<size_t> plain;
  {
    std::map<PipelinedOrigin*, size_t> open_chunk;
    for (size_t i = 0; i < entries.size(); ++i) {
      std::string target;
      PipelinedOrigin* p = pipeline_for(*entries[i], target);
      if (!p) {
        plain.push_back(i);
        continue;
      }
      auto it = open_chunk.find(p);
      if (it == open_chunk.end() || chunks[it->second].index.size() >= k_pipelined_chunk) {
        chunks.push_back(Chunk{p, {}, {}});
        it = open_chunk.insert_or_assign(p, chunks.size() - 1).first;
      }
      chunks[it->second].index.push_back(i);
      chunks[it->second].gets.push_back(PipelinedGet{std::move(target)});
    }
  }
  std::mutex plain_mutex;
  std::condition_variable plain_cv;
  std::atomic<size_t> next_chunk{0};
  size_t running = 0; // chunks taken and not yet done with (plain_mutex)
  const size_t n = std::min<size_t>(std::min<size_t>(src.concurrency, 64), entries.size());
  // The workers beyond those that pipeline are started once there is work
  // for them (plain_mutex): to an origin that answers fast they would only
  // wait, made and joined each batch (six threads a batch of 1,000).
  std::deque<std::thread> threads;
  std::function<void()> start_rest; // set below; called under plain_mutex

  // Returns whether the waiting workers have something to do now: its
  // fallbacks, a chunk they may take (its origin turned out slow), or the
  // end. (Waking them after every chunk cost a futex wake and six thread
  // switches a chunk, for nothing, to an origin that answers fast.)
  auto run_chunk = [&](Chunk& ch) -> bool {
    if (ch.origin->usable()) {
      try {
        ch.origin->run(ch.gets);
      } catch (const std::exception& ex) {
        log::warn(src.name, std::string("pipelined fetch failed: ") + ex.what(), {});
      }
    }
    std::vector<size_t> again;
    for (size_t k = 0; k < ch.index.size(); ++k) {
      PipelinedGet& g = ch.gets[k];
      const size_t i = ch.index[k];
      if (g.answered && g.status >= 200 && g.status <= 299 &&
          (g.content_encoding.empty() || g.content_encoding == "identity")) {
        auto r = accept_content(blobs, expected_of(*entries[i]), entries[i]->loc, g.body, g.content_type);
        if (r || r.error().kind != ErrorKind::invalid_document) {
          results[i] = std::move(r);
          continue;
        }
      }
      // Anything but a clean answer is asked again the ordinary way,
      // which judges it (statuses, redirects, mirrors, retries).
      again.push_back(i);
    }
    ch.gets.clear();
    std::lock_guard lock(plain_mutex);
    plain.insert(plain.end(), again.begin(), again.end());
    --running;
    if (!again.empty() || !ch.origin->fast()) {
      start_rest();
      return true;
    }
    return running == 0 && next_chunk.load() >= chunks.size();
  };
  // Each worker pipelines on a connection of its own. To an origin that
  // answers fast, two connections carry bursts (more only split the
  // window's tickets into smaller ones); to one that does not, every
  // worker does, one request at a time each (PipelinedOrigin::fast()).
  auto may_pipeline = [&](size_t worker, const Chunk& ch) { return worker < k_fast_connections || !ch.origin->fast(); };
  auto work = [&](size_t worker) {
    for (;;) {
      size_t c = next_chunk.load();
      while (c < chunks.size() && !cancelled() && may_pipeline(worker, chunks[c])) {
        if (next_chunk.compare_exchange_weak(c, c + 1)) {
          {
            std::lock_guard lock(plain_mutex);
            ++running;
          }
          if (run_chunk(chunks[c])) {
            plain_cv.notify_all();
          }
          c = next_chunk.load();
        }
      }
      size_t i = 0;
      {
        std::unique_lock lock(plain_mutex);
        if (plain.empty()) {
          const bool chunks_left = next_chunk.load() < chunks.size() && !cancelled();
          if (!chunks_left && running == 0) {
            return;
          }
          // Fallbacks may come from the chunks running; a chunk this
          // worker may take once its origin turns out slow.
          plain_cv.wait_for(lock, std::chrono::milliseconds(50));
          continue;
        }
        i = plain.front();
        plain.pop_front();
      }
      if (cancelled()) {
        continue; // the batch will not be committed
      }
      fetch_one(i);
    }
  };
  start_rest = [&] {
    // Worker 0 is this thread; the list holds workers 1 onwards.
    for (size_t t = std::max(threads.size() + 1, std::min(n, k_fast_connections)); t < n; ++t) {
      threads.emplace_back(work, t);
    }
  };
  {
    std::lock_guard lock(plain_mutex);
    for (size_t t = 1; t < std::min(n, k_fast_connections); ++t) {
      threads.emplace_back(work, t);
    }
    bool all_fast = true;
    for (const auto& ch : chunks) {
      all_fast = all_fast && ch.origin->fast();
    }
    if (!plain.empty() || !all_fast) {
      start_rest();
    }
  }
  if (n > 0) {
    work(0);
  }
  // Workers may be started until the last chunk is done with: joined one
  // by one, the list read under the lock.
  for (size_t k = 0;; ++k) {
    std::thread* t = nullptr;
    {
      std::lock_guard lock(plain_mutex);
      if (k >= threads.size()) {
        break;
      }
      t = &threads[k];
    }
    t->join();
  }
  stage_sealed(results);
  return results;
}

std::optional<Error> RunContext::disk_full(const std::vector<Result<FetchedContent>>& results) {
  for (const auto& r : results) {
    if (!r && is_disk_full(r.error())) {
      return r.error();
    }
  }
  return std::nullopt;
}

void RunContext::stage_sealed(std::vector<Result<FetchedContent>>& results) {
  std::lock_guard lock(m_uploads_mutex);
  for (auto& r : results) {
    if (r && r->sealed) {
      m_sealed.push_back(std::move(*r->sealed));
      r->sealed.reset();
    }
  }
}

} // namespace tributary::sync

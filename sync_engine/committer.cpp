// Room sync_engine/committer: a run's batches committed in the background
// while the next is fetched: their blobs made durable and named, uploaded
// to the remote tier, then the batch applied to the store (Committer,
// declared in run_context.h).
#include "sync_engine/run_context.h"

#include "common/thread_name.h"
#include "sync_engine/commit_stats.h"

#include <atomic>
#include <chrono>
#include <exception>

namespace tributary::sync {

namespace {

// The process's totals behind commit_stats(), in nanoseconds.
struct StageTotals {
  std::atomic<uint64_t> batches{0};
  std::atomic<uint64_t> publish{0};
  std::atomic<uint64_t> waiting{0};
  std::atomic<uint64_t> apply{0};
};
StageTotals g_stages;

// Adds the time since it began to `total` when it goes.
class StageTimer {
public:
  explicit StageTimer(std::atomic<uint64_t>& total) : m_total(total), m_start(std::chrono::steady_clock::now()) {}
  ~StageTimer() {
    m_total += static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - m_start).count());
  }
  StageTimer(const StageTimer&) = delete;
  StageTimer& operator=(const StageTimer&) = delete;

private:
  std::atomic<uint64_t>& m_total;
  std::chrono::steady_clock::time_point m_start;
};

} // namespace

CommitStats commit_stats() {
  CommitStats s;
  s.batches = g_stages.batches.load();
  s.publish_seconds = static_cast<double>(g_stages.publish.load()) / 1e9;
  s.waiting_seconds = static_cast<double>(g_stages.waiting.load()) / 1e9;
  s.apply_seconds = static_cast<double>(g_stages.apply.load()) / 1e9;
  return s;
}

Result<void> Committer::submit(std::shared_ptr<const store::Batch> batch,
                               std::vector<store::BlobStore::Writer> sealed,
                               std::function<void(const store::RunCounters&)> on_committed) {
  while (m_in_flight.size() >= k_in_flight) {
    wait_oldest();
  }
  if (!m_last) {
    return m_last;
  }
  // The batch before this one: applied before this one is.
  std::shared_future<Result<void>> before =
      m_in_flight.empty() ? std::shared_future<Result<void>>() : m_in_flight.back();
  m_in_flight.push_back(std::async(std::launch::async, [this, batch = std::move(batch), blobs = std::move(sealed),
                                                        done = std::move(on_committed),
                                                        before = std::move(before)]() mutable -> Result<void> {
                          name_thread("committer");
                          auto r = commit(*batch, blobs, done, before);
                          // Everything the task holds is freed here, not when the thread that
                          // collects the result drops it: a batch's records and writers, and
                          // the batch before's state (kept, each state would hold the one
                          // before it, every batch of the run: 500 MB at a million).
                          std::vector<store::BlobStore::Writer>().swap(blobs);
                          batch.reset();
                          done = nullptr;
                          before = {};
                          return r;
                        }).share());
  return {};
}

Result<void> Committer::commit(const store::Batch& b, std::vector<store::BlobStore::Writer>& blobs,
                               const std::function<void(const store::RunCounters&)>& done,
                               const std::shared_future<Result<void>>& before) {
  // The batch's blobs are made durable and named here, while the next
  // batch is fetched: the pack's sync and the index's cost 3.5-4 ms a
  // batch of 1,000, which in the fetch path left both cores idle.
  ++g_stages.batches;
  std::vector<std::string> uploads = b.new_blobs;
  {
    StageTimer timed(g_stages.publish);
    if (auto r = publish(blobs, uploads, b); !r) {
      return r;
    }
    // The remote tier receives the batch's blobs before the database names
    // them, here too (one PUT of about a megabyte per batch, which in the
    // fetch path cost a quarter of the rate against RGW).
    if (auto r = m_blobs.upload(uploads); !r) {
      return r;
    }
    if (auto r = m_blobs.sync_directories(); !r) {
      return r;
    }
  }
  // Applied in order, and not after a batch before it failed.
  if (before.valid()) {
    StageTimer timed(g_stages.waiting);
    try {
      if (const Result<void>& prev = before.get(); !prev) {
        return prev;
      }
    } catch (const std::exception& e) {
      return make_error(ErrorKind::io, std::string("commit failed: ") + e.what());
    }
  }
  auto r = [&] {
    StageTimer timed(g_stages.apply);
    return m_session->apply(b);
  }();
  if (!r) {
    return Result<void>(tl::unexpected(r.error()));
  }
  if (done) {
    done(*r);
  }
  return Result<void>();
}

Result<void> Committer::publish(std::vector<store::BlobStore::Writer>& sealed, std::vector<std::string>& deferred,
                                const store::Batch& batch) {
  if (sealed.empty()) {
    return {};
  }
  std::vector<store::BlobStore::Writer*> writers;
  writers.reserve(sealed.size());
  for (auto& w : sealed) {
    writers.push_back(&w);
  }
  // A blob that cannot be made durable fails the batch: its records name
  // it (our own disk, not the Source's fault; the run stops and is retried).
  auto published = m_blobs.publish(writers, &deferred);
  for (size_t i = 0; i < published.size(); ++i) {
    if (published[i]) {
      continue;
    }
    // Named by a resource of the batch that holds it (the disk that was
    // full is ours, the content one the Source served).
    std::string whose = "the batch's content";
    for (const auto& u : batch.upserts) {
      if (i < sealed.size() && u.blob_sha256 && *u.blob_sha256 == sealed[i].sealed_sha256()) {
        whose = "the content of " + u.uri;
        break;
      }
    }
    return tl::unexpected(published[i].error().with_context("storing " + whose));
  }
  return {};
}

void Committer::wait_oldest() {
  Result<void> r;
  try {
    r = m_in_flight.front().get();
  } catch (const std::exception& e) {
    r = make_error(ErrorKind::io, std::string("commit failed: ") + e.what());
  }
  m_in_flight.pop_front();
  if (m_last) {
    m_last = std::move(r); // the first failure stays
  }
}

Result<void> Committer::wait() {
  while (!m_in_flight.empty()) {
    wait_oldest();
  }
  return m_last;
}

} // namespace tributary::sync

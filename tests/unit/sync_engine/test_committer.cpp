// The commit pipeline (sync_engine/committer.cpp): batches applied in the
// order submitted, each after its own blobs are durable and named, none
// after a failure, with a batch publishing while the one before applies.
#include "store/blob/blob_store.h"
#include "store/memory_store.h"
#include "sync_engine/run_context.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>

using namespace tributary;
namespace fs = std::filesystem;

namespace {

// Records what it is asked to apply (by run_id), and whether each batch's
// blob was already named then; slow, so that batches overlap; fails the
// batch whose run_id is `fail`.
struct RecordingStore : store::MemoryStore {
  std::shared_ptr<store::BlobStore> blobs;
  int64_t fail = -1;
  std::mutex mutex;
  std::vector<int64_t> applied;
  std::vector<bool> blob_named;

  Result<store::RunCounters> apply(const store::Batch& b) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::lock_guard lock(mutex);
    applied.push_back(b.run_id);
    blob_named.push_back(!b.new_blobs.empty() && blobs->contains(b.new_blobs.front()));
    if (b.run_id == fail) {
      return make_error(ErrorKind::io, "batch " + std::to_string(b.run_id) + " refused");
    }
    return store::RunCounters{};
  }
};

struct Pipeline {
  fs::path dir = fs::temp_directory_path() / ("tributary-committer-" + std::to_string(::getpid()));
  std::shared_ptr<store::BlobStore> blobs;
  RecordingStore* store = nullptr;
  std::unique_ptr<sync::Committer> committer;

  Pipeline() {
    fs::remove_all(dir);
    blobs = *store::BlobStore::open(dir);
    auto s = std::make_unique<RecordingStore>();
    s->blobs = blobs;
    store = s.get();
    committer = std::make_unique<sync::Committer>(std::move(s), *blobs);
  }
  ~Pipeline() {
    committer.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }

  // Batch `run`, naming one new blob of its own bytes; `on_committed`
  // runs once it is.
  Result<void> submit(int64_t run, std::function<void(const store::RunCounters&)> on_committed = nullptr) {
    auto w = blobs->begin();
    REQUIRE(w);
    const std::string bytes = "the bytes of batch " + std::to_string(run);
    REQUIRE(w->write(bytes.data(), bytes.size()));
    const store::BlobInfo info = w->seal();
    auto b = std::make_shared<store::Batch>();
    b->run_id = run;
    b->new_blobs = {info.sha256};
    std::vector<store::BlobStore::Writer> sealed;
    sealed.push_back(std::move(*w));
    return committer->submit(b, std::move(sealed), std::move(on_committed));
  }
};

} // namespace

TEST_CASE("Committer: batches are applied in the order submitted, each after its blobs are named") {
  Pipeline p;
  for (int64_t run = 1; run <= 6; ++run) {
    REQUIRE(p.submit(run));
  }
  REQUIRE(p.committer->wait());
  CHECK(p.store->applied == std::vector<int64_t>{1, 2, 3, 4, 5, 6});
  CHECK(p.store->blob_named == std::vector<bool>(6, true));
}

TEST_CASE("Committer: nothing is applied after a batch that failed, and the failure is what wait() and submit() say") {
  Pipeline p;
  p.store->fail = 3;
  bool refused = false;
  for (int64_t run = 1; run <= 6 && !refused; ++run) {
    auto r = p.submit(run);
    if (!r) {
      CHECK(r.error().message == "batch 3 refused");
      refused = true;
    }
  }
  auto w = p.committer->wait();
  REQUIRE_FALSE(w);
  CHECK(w.error().message == "batch 3 refused");
  // Batch 4 may have been handed over (and its blobs published) before 3
  // failed; it is never applied.
  CHECK(p.store->applied == std::vector<int64_t>{1, 2, 3});
  CHECK_FALSE(p.submit(7));
  CHECK(p.committer->wait().error().message == "batch 3 refused");
  CHECK(p.store->applied == std::vector<int64_t>{1, 2, 3});
}

TEST_CASE("Committer: a committed batch leaves nothing held while later ones run") {
  // Each task once kept the one before it (and so every batch of a run)
  // alive until the run ended: 500 MB at a million resources.
  Pipeline p;
  std::vector<std::weak_ptr<int>> held;
  for (int64_t run = 1; run <= 5; ++run) {
    auto token = std::make_shared<int>(static_cast<int>(run));
    held.push_back(token);
    REQUIRE(p.submit(run, [token](const store::RunCounters&) {}));
  }
  // Submitting 5 waited for 3: 1 to 3 are committed and hold nothing.
  CHECK(held[0].expired());
  CHECK(held[1].expired());
  CHECK(held[2].expired());
  REQUIRE(p.committer->wait());
  CHECK(held[4].expired());
}

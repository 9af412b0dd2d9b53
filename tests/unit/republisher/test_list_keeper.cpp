// The Resource List keeper over MemoryStore, while the renderer's views
// change under it.
#include "republisher/list_keeper.h"

#include "../../common/scratch_dir.h"
#include "records.h"

#include "store/memory_store.h"

#include <doctest/doctest.h>

#include <atomic>
#include <thread>

using namespace tributary;
using namespace tributary::pub;

TEST_CASE("List keeper: a pass reads the sets from the renderer's view it holds, while new views replace it") {
  test::ScratchDir dir{"list-keeper-unit"};
  auto st = std::make_shared<store::MemoryStore>();
  const int64_t feed = *st->ensure_feed(*st->ensure_source("up", "http://up.example/"), "http://up.example/caps.xml");
  store::Batch b;
  b.feed_id = feed;
  b.upserts.push_back(test::record("http://up.example/a", "alpha"));
  b.changes.push_back(store::ChangeRecord{rs::Change::created, test::ts("2026-01-01T00:00:00Z"), b.upserts.back()});
  REQUIRE(st->apply(b));
  PublishOptions options;
  options.public_url = "http://us.example/";
  options.document_dir = dir.path;
  const UrlScheme urls(options.public_url);
  Shelf shelf;
  ArchiveKeeper archives(options, nullptr, urls, shelf);
  ListKeeper keeper(options, st, urls, shelf, archives, {});
  // The renderer's part: views of many sets put one after another, each
  // freeing the one before once nobody holds it. A pass that read the sets
  // through a view it did not hold read freed memory (AddressSanitizer:
  // heap-use-after-free; without it, the history bench's crash).
  std::atomic<bool> stop{false};
  std::thread renderer([&] {
    for (int i = 0; !stop; ++i) {
      auto v = std::make_shared<RenderedView>();
      auto feeds = std::make_shared<SetFeeds>();
      for (int s = 0; s < 200; ++s) {
        (*feeds)["set-" + std::to_string(s)] = {feed};
      }
      v->set_feeds = feeds;
      (void)i;
      shelf.put(std::shared_ptr<const RenderedView>(std::move(v)));
    }
  });
  while (shelf.rendered()->set_feeds->empty()) {
    std::this_thread::yield();
  }
  size_t listed = 0;
  for (int pass = 0; pass < 100; ++pass) {
    keeper.pass();
    listed = shelf.lists()->sets.size();
  }
  stop = true;
  renderer.join();
  CHECK(listed == 200); // every set has its Resource List
}

// The republisher's Resource Lists, kept by a thread of their own (the
// lister): they never hold the Change List back, a set shows only with its
// list, and a change is shown within a pass of the store going quiet.
#include "republisher_fixture.h"

#include <atomic>
#include <functional>

using namespace tributary;
using namespace tributary::test;

TEST_CASE("Republisher: a Resource List held up never holds the Change List back, and catches up after") {
  Published p;
  auto gated = std::make_shared<GatedReader>(p.env.store); // what Resource Lists are read through
  Beside b(p, p.env.store, gated, "documents-lists");
  const pub::UrlScheme& urls = b.urls;
  const std::string d_txt = urls.resource("up", p.up.url("/res/d.txt"));
  CHECK(get(urls.resource_list("up")).body.find(d_txt) == std::string::npos);
  auto shows = [&](const std::string& doc, int tries) {
    for (int i = 0; i < tries; ++i) {
      if (get(doc).body.find(d_txt) != std::string::npos) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  };
  const std::string e_txt = urls.resource("up", p.up.url("/res/e.txt"));
  auto shows_e = [&](const std::string& doc) {
    for (int i = 0; i < 50; ++i) {
      if (get(doc).body.find(e_txt) != std::string::npos) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  };
  {
    std::unique_lock hold(gated->gate); // a Resource List update that takes long
    p.change_upstream();
    b.server->refresh_soon();
    CHECK(shows(urls.change_list("up"), 50));
    // Past the refresh that saw the first change (after which a Resource
    // List would be due): a second change shows too.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    p.site.put("/res/e.txt", "echo");
    p.site.publish_change_list(
        "/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt,
        {change_entry(p.up.url("/res/c.txt"), rs::Change::deleted, ts("2026-01-02T00:00:00Z")),
         change_entry(p.up.url("/res/a.txt"), rs::Change::updated, ts("2026-01-03T00:00:00Z"), "alpha v2"),
         change_entry(p.up.url("/res/d.txt"), rs::Change::created, ts("2026-01-03T00:00:01Z"), "delta"),
         change_entry(p.up.url("/res/b.txt"), rs::Change::deleted, ts("2026-01-03T00:00:02Z")),
         change_entry(p.up.url("/res/e.txt"), rs::Change::created, ts("2026-01-04T00:00:00Z"), "echo")});
    REQUIRE(p.env.run(SyncEnv::source(p.up.url("/")), RunMode::incremental).status == RunStatus::succeeded);
    b.server->refresh_soon();
    CHECK(shows_e(urls.change_list("up")));
    CHECK_FALSE(shows(urls.resource_list("up"), 1));
  }
  CHECK(shows(urls.resource_list("up"), 50));
  CHECK(shows_e(urls.resource_list("up")));
}

TEST_CASE("Republisher: a new set is shown only with its Resource List, never as a Capability List naming a 404") {
  Published p;
  auto gated = std::make_shared<GatedReader>(p.env.store); // what Resource Lists are read through
  Beside b(p, p.env.store, gated, "documents-new-set");
  const pub::UrlScheme& urls = b.urls;
  auto shown = [&](int tries) {
    for (int i = 0; i < tries; ++i) {
      if (get(urls.source_description()).body.find(urls.capability_list("second")) != std::string::npos) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  };
  {
    std::unique_lock hold(gated->gate); // the lister cannot render the new set's Resource List yet
    // (partial: the upstream's Resource List still names c.txt, gone)
    REQUIRE(p.env.run(SyncEnv::source(p.up.url("/"), "second"), RunMode::baseline).status != RunStatus::failed);
    b.server->refresh_soon();
    CHECK_FALSE(shown(25)); // 2.5 s: past the refresh that saw the new set
    CHECK(get(urls.capability_list("second")).status == 404);
    CHECK(get(urls.change_list("second")).status == 404);
    CHECK(get(urls.capability_list("up")).status == 200); // the others as they were
  }
  REQUIRE(shown(50));
  CHECK(get(urls.capability_list("second")).status == 200);
  Got rl = get(urls.resource_list("second"));
  CHECK(rl.status == 200);
  CHECK(rl.body.find(urls.resource("second", p.up.url("/res/a.txt"))) != std::string::npos);
}

TEST_CASE("Republisher: the Change List follows every change while a Resource List not yet due keeps its state") {
  Published p(false, 10000, 10000, {}, 1ull << 30, /*resource_list_min_interval=*/std::chrono::hours(1));
  pub::UrlScheme urls(p.base);
  const Got list_before = get(urls.resource_list("up"));
  REQUIRE(list_before.status == 200);
  REQUIRE(list_before.body.find(p.up.url("/res/a.txt")) != std::string::npos); // a list of entries
  p.site.put("/res/d.txt", "delta");
  p.site.publish_change_list(
      "/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt,
      {change_entry(p.up.url("/res/c.txt"), rs::Change::deleted, ts("2026-01-02T00:00:00Z")),
       change_entry(p.up.url("/res/d.txt"), rs::Change::created, ts("2026-01-03T00:00:00Z"), "delta")});
  REQUIRE(p.env.run(SyncEnv::source(p.up.url("/")), RunMode::incremental).status == RunStatus::succeeded);
  const std::string d = p.up.url("/res/d.txt"); // in the via link
  bool followed = false;
  for (int i = 0; i < 100 && !followed; ++i) {
    followed = get(urls.change_list("up")).body.find(d) != std::string::npos; // the open part
    if (!followed) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  CHECK(followed);
  const Got list_after = get(urls.resource_list("up"));
  CHECK(list_after.body == list_before.body); // its `at` says how old it is
  CHECK(list_after.body.find(d) == std::string::npos);
  CHECK(header(list_after, "ETag") == header(list_before, "ETag"));
}

namespace {

// Runs `hook` once, when armed, in the lister's pass, just after it read
// the store's seq: a change that lands then, and its wake.
struct SeqHook : GatedReader {
  std::function<void()> hook;
  std::atomic<bool> armed{false};
  std::atomic<int> reads{0};
  using GatedReader::GatedReader;
  Result<int64_t> last_seq() override {
    auto seq = GatedReader::last_seq();
    ++reads;
    if (armed.exchange(false)) {
      hook();
    }
    return seq;
  }
};

} // namespace

TEST_CASE("Republisher: a change whose wake comes while the lister is in a pass is shown at the next pass, not at "
          "the poll interval") {
  Published p;
  auto hooked = std::make_shared<SeqHook>(p.env.store); // what Resource Lists are read through
  // The daemon's poll interval is 10 s; a minute here, so that waiting for
  // it cannot pass for being woken.
  Beside b(p, p.env.store, hooked, "documents-wake", 10000, "", std::chrono::minutes(1));
  const pub::UrlScheme& urls = b.urls;
  const std::string d_txt = urls.resource("up", p.up.url("/res/d.txt"));
  // Settled: the pass at start and the lister's first saw the same seq; it
  // now waits for the poll interval or a wake.
  for (int i = 0; i < 50 && hooked->reads < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  REQUIRE(hooked->reads >= 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  REQUIRE(get(urls.resource_list("up")).body.find(d_txt) == std::string::npos);
  // The next pass (woken) reads the seq; the upstream's change is applied
  // just after, and its wake comes while that pass is still running, as
  // the daemon's does when a run ends.
  std::atomic<bool> applied{false};
  hooked->hook = [&] {
    p.site.put("/res/d.txt", "delta");
    p.site.publish_change_list(
        "/cl.xml", ts("2026-01-01T00:00:00Z"), std::nullopt,
        {change_entry(p.up.url("/res/c.txt"), rs::Change::deleted, ts("2026-01-02T00:00:00Z")),
         change_entry(p.up.url("/res/d.txt"), rs::Change::created, ts("2026-01-03T00:00:00Z"), "delta")});
    applied = p.env.run(SyncEnv::source(p.up.url("/")), RunMode::incremental).status == RunStatus::succeeded;
    b.server->refresh_soon();
  };
  hooked->armed = true;
  b.server->refresh_soon();
  bool shown = false;
  for (int i = 0; i < 50 && !shown; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    shown = get(urls.resource_list("up")).body.find(d_txt) != std::string::npos;
  }
  CHECK(applied);
  CHECK_FALSE(hooked->armed);
  CHECK(shown); // within 5 s, not the minute
}

// The blob index's filter of names (store/blob/name_filter.h and
// BlobIndex::may_contain): never "absent" for a name the index holds, and
// rarely "maybe" for one it does not.
#include "store/blob/blob_index.h"
#include "store/blob/blob_io.h"
#include "store/blob/name_filter.h"
#include "store/blob/blob_store.h"

#include "resourcesync/hash.h"

#include <doctest/doctest.h>

#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <filesystem>
#include <map>
#include <string>
#include <unistd.h>
#include <vector>

using namespace tributary;
using namespace tributary::store;
using store::blob_detail::BlobIndex;
using store::blob_detail::IndexValue;
using store::blob_detail::NameFilter;
namespace fs = std::filesystem;

namespace {

// The sha-256 of "<prefix><i>", as the store names blobs.
std::string name_of(const std::string& prefix, int i) {
  return rs::hash_hex(rs::HashAlgorithm::sha256, prefix + std::to_string(i));
}

struct IndexDir {
  fs::path path = fs::temp_directory_path() / ("tributary-blob-index-" + std::to_string(::getpid()));
  IndexDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~IndexDir() { fs::remove_all(path); }
};

std::vector<std::pair<std::string, IndexValue>> entries(const std::string& prefix, int from, int to) {
  std::vector<std::pair<std::string, IndexValue>> out;
  for (int i = from; i < to; ++i) {
    out.emplace_back(name_of(prefix, i), IndexValue{1, 0, static_cast<uint64_t>(i) * 100, 100});
  }
  return out;
}

} // namespace

TEST_CASE("NameFilter: every name inserted may be there, and about 1% of the others") {
  NameFilter filter(20000);
  for (int i = 0; i < 20000; ++i) {
    filter.insert(blob_detail::raw_name(name_of("in-", i)));
  }
  int missed = 0;
  for (int i = 0; i < 20000; ++i) {
    missed += filter.may_contain(blob_detail::raw_name(name_of("in-", i))) ? 0 : 1;
  }
  CHECK(missed == 0);
  int maybe = 0;
  for (int i = 0; i < 20000; ++i) {
    maybe += filter.may_contain(blob_detail::raw_name(name_of("out-", i))) ? 1 : 0;
  }
  CHECK(maybe < 20000 * 2 / 100); // 10 bits and 6 probes a name: 0.8% expected
  CHECK(filter.inserted() == 20000);
  CHECK(filter.bytes() == (20000 * 10 + 63) / 64 * 8);
}

TEST_CASE("NameFilter: threads inserting and asking at once lose no name") {
  // A package's extraction threads ask while a committer inserts: the
  // words are shared without a lock, so no bit set may be lost.
  NameFilter filter(4 * 50000);
  std::vector<std::vector<store::BlobName>> names(4);
  for (int t = 0; t < 4; ++t) {
    for (int i = 0; i < 50000; ++i) {
      names[static_cast<size_t>(t)].push_back(blob_detail::raw_name(name_of("t" + std::to_string(t) + "-", i)));
    }
  }
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      while (!go) {
      }
      for (const auto& n : names[static_cast<size_t>(t)]) {
        filter.insert(n);
        (void)filter.may_contain(names[static_cast<size_t>((t + 1) % 4)][0]);
      }
    });
  }
  go = true;
  for (auto& th : threads) {
    th.join();
  }
  int missed = 0;
  for (const auto& list : names) {
    for (const auto& n : list) {
      missed += filter.may_contain(n) ? 0 : 1;
    }
  }
  CHECK(missed == 0);
  CHECK(filter.inserted() == 200000);
}

TEST_CASE("BlobIndex: the filter is built from what the index holds, and kept up by every name added after") {
  IndexDir dir;
  {
    auto index = BlobIndex::open(dir.path);
    REQUIRE(index);
    REQUIRE((*index)->add(entries("before-", 0, 3000)));
  }
  auto index = BlobIndex::open(dir.path); // a new process's index: its filter read from the file
  REQUIRE(index);
  BlobIndex& ix = **index;
  int missed = 0;
  for (int i = 0; i < 3000; ++i) {
    missed += ix.may_contain(name_of("before-", i)) ? 0 : 1;
  }
  CHECK(missed == 0);
  // Added once the filter exists: in it at once, counted once (the count
  // decides when the filter is rebuilt).
  REQUIRE(ix.add(entries("after-", 0, 3000)));
  CHECK(ix.shape()->filtered == 6000);
  for (int i = 0; i < 3000; ++i) {
    missed += ix.may_contain(name_of("after-", i)) ? 0 : 1;
  }
  CHECK(missed == 0);
  int maybe = 0;
  for (int i = 0; i < 3000; ++i) {
    maybe += ix.may_contain(name_of("never-", i)) ? 1 : 0;
  }
  CHECK(maybe < 3000 / 20);
  // A name the filter lets through is still looked up: "maybe" is not "stored".
  auto none = ix.lookup(name_of("never-", 0));
  REQUIRE(none);
  CHECK(!none->has_value());
}

TEST_CASE("BlobStore: locate_many answers as locate() does for each name, in the order asked") {
  IndexDir dir;
  auto opened = BlobStore::open(dir.path / "store");
  REQUIRE(opened);
  BlobStore& store = **opened;
  std::vector<std::string> names;
  for (int i = 0; i < 300; ++i) {
    auto put = store.put("blob " + std::to_string(i));
    REQUIRE(put);
    names.push_back(put->sha256);
  }
  auto big = store.put(std::string(BlobStore::k_pack_max + 1, 'x')); // a file of its own
  REQUIRE(big);
  names.insert(names.begin() + 7, big->sha256);
  names.insert(names.begin() + 3, name_of("never-", 1)); // not stored
  names.insert(names.begin() + 5, "not a name");
  names.push_back(names[10]); // asked twice
  const auto many = store.locate_many(names);
  REQUIRE(many.size() == names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    CAPTURE(i);
    const auto one = store.locate(names[i]);
    REQUIRE(many[i].has_value() == one.has_value());
    if (one) {
      CHECK(many[i]->file == one->file);
      CHECK(many[i]->offset == one->offset);
      CHECK(many[i]->length == one->length);
    } else {
      CHECK(many[i].error().kind == one.error().kind);
    }
  }
  CHECK(many[3].error().kind == ErrorKind::not_found);
  CHECK(many[5].error().kind == ErrorKind::usage);
  CHECK(many[9]->length == BlobStore::k_pack_max + 1);
}

namespace {

// Every name for_each() lists, and how many times.
std::map<std::string, int> listed(const BlobIndex& ix) {
  std::map<std::string, int> out;
  REQUIRE(ix.for_each([&](const store::BlobName& name, const IndexValue&) {
    ++out[blob_detail::hex_of(name.data(), name.size())];
  }));
  return out;
}

// The value lookup() finds, or a pack of 0 for none.
IndexValue found(BlobIndex& ix, const std::string& name) {
  auto r = ix.lookup(name);
  REQUIRE(r);
  return r->value_or(IndexValue{});
}

} // namespace

TEST_CASE("BlobIndex: names go to the log, into the main tree in slices, and are found the same throughout") {
  IndexDir dir;
  constexpr int k_names = 120000; // past 2,048 leaves of the main tree: the last merges take two slices
  constexpr uint64_t k_merge_at = 20000;
  {
    auto index = BlobIndex::open(dir.path, k_merge_at);
    REQUIRE(index);
    BlobIndex& ix = **index;
    ix.may_contain(name_of("n-", 0)); // a writer's first question builds the filter
    uint64_t most_logged = 0;
    uint64_t merged_seen = 0;
    for (int from = 0; from < k_names; from += 2500) {
      REQUIRE(ix.add(entries("n-", from, from + 2500)));
      // A name a batch ago, and one merged long ago, answer as added.
      CHECK(found(ix, name_of("n-", from)).offset == static_cast<uint64_t>(from) * 100);
      CHECK(found(ix, name_of("n-", from / 2)).offset == static_cast<uint64_t>(from / 2) * 100);
      auto shape = ix.shape();
      REQUIRE(shape);
      most_logged = std::max(most_logged, shape->log);
      merged_seen = std::max(merged_seen, shape->main);
    }
    // The log is merged once it holds k_merge_at names, a slice a batch.
    CHECK(most_logged >= k_merge_at);
    CHECK(most_logged < k_merge_at + 10 * 2500);
    CHECK(merged_seen >= 100000);
    // The same name added again keeps its first place and is not logged twice.
    auto again = entries("n-", 0, 10);
    for (auto& [name, value] : again) {
      value.pack = 9;
    }
    REQUIRE(ix.add(again));
    CHECK(found(ix, name_of("n-", 3)).pack == 1);
    const auto names = listed(ix);
    CHECK(names.size() == static_cast<size_t>(k_names));
    CHECK(std::all_of(names.begin(), names.end(), [](const auto& e) { return e.second == 1; }));
  }
  // Another process: what it reads from the file is the same.
  auto index = BlobIndex::open(dir.path, k_merge_at);
  REQUIRE(index);
  int wrong = 0;
  for (int i = 0; i < k_names; i += 7) {
    wrong += found(**index, name_of("n-", i)).offset == static_cast<uint64_t>(i) * 100 ? 0 : 1;
  }
  CHECK(wrong == 0);
  CHECK(found(**index, name_of("never-", 1)).pack == 0);
  CHECK(listed(**index).size() == static_cast<size_t>(k_names));
}

TEST_CASE("BlobIndex: a move and a removal reach a name wherever it is, the log or the main tree") {
  IndexDir dir;
  auto index = BlobIndex::open(dir.path, 3000);
  REQUIRE(index);
  BlobIndex& ix = **index;
  REQUIRE(ix.add(entries("m-", 0, 3000)));    // logged; this add's merge step merges them (one slice)
  REQUIRE(ix.add(entries("m-", 3000, 3500))); // logged
  auto shape = ix.shape();
  REQUIRE(shape);
  CHECK(shape->main == 3000);
  CHECK(shape->log == 500);
  // Moved out of pack 1: in both places.
  std::vector<std::pair<store::BlobName, IndexValue>> moved;
  for (int i : {10, 3010}) {
    moved.emplace_back(blob_detail::raw_name(name_of("m-", i)), IndexValue{7, 0, 42, 100});
  }
  REQUIRE(ix.move(1, moved));
  CHECK(found(ix, name_of("m-", 10)).pack == 7);
  CHECK(found(ix, name_of("m-", 3010)).pack == 7);
  // A second move from pack 1 changes nothing: they are in pack 7 now.
  moved[0].second.offset = 99;
  REQUIRE(ix.move(1, moved));
  CHECK(found(ix, name_of("m-", 10)).offset == 42);
  // Removed from both places.
  std::vector<store::BlobName> gone;
  for (int i : {20, 3020}) {
    gone.push_back(blob_detail::raw_name(name_of("m-", i)));
  }
  auto removed = ix.remove(gone, false, nullptr);
  REQUIRE(removed);
  CHECK(removed->blobs == 2);
  CHECK(removed->bytes == 200);
  CHECK(found(ix, name_of("m-", 20)).pack == 0);
  CHECK(found(ix, name_of("m-", 3020)).pack == 0);
  const auto names = listed(ix);
  CHECK(names.size() == 3498);
  CHECK(names.count(name_of("m-", 3020)) == 0);
  // Added again after its removal: logged anew, found.
  REQUIRE(ix.add(entries("m-", 3020, 3021)));
  CHECK(found(ix, name_of("m-", 3020)).offset == 302000);
}

TEST_CASE("BlobIndex: what another process logs, merges or removes is what this one finds next") {
  IndexDir dir;
  auto index = BlobIndex::open(dir.path, 2000);
  REQUIRE(index);
  BlobIndex& ix = **index;
  REQUIRE(ix.add(entries("mine-", 0, 1500)));
  CHECK(found(ix, name_of("mine-", 5)).offset == 500); // this process's map of the log now holds them
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int code = 0;
    {
      auto other = BlobIndex::open(dir.path, 2000);
      if (!other) {
        ::_exit(2);
      }
      // Logs 1,500 more: 3,000 in the log, merged (one slice) by this add.
      code |= (*other)->add(entries("theirs-", 0, 1500)) ? 0 : 4;
      // Removes one of the parent's, now in the main tree.
      code |= (*other)->remove({blob_detail::raw_name(name_of("mine-", 5))}, false, nullptr) ? 0 : 8;
      // And logs a few more.
      code |= (*other)->add(entries("late-", 0, 10)) ? 0 : 16;
    }
    ::_exit(code);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  auto shape = ix.shape();
  REQUIRE(shape);
  CHECK(shape->main == 2999);
  CHECK(shape->log == 10);
  CHECK(found(ix, name_of("mine-", 5)).pack == 0);     // removed there, though this map named it
  CHECK(found(ix, name_of("mine-", 6)).offset == 600); // merged there
  CHECK(found(ix, name_of("theirs-", 7)).offset == 700);
  CHECK(found(ix, name_of("late-", 3)).offset == 300);
  // Adding what the other process added keeps its entry (found, not logged twice).
  REQUIRE(ix.add(entries("late-", 0, 10)));
  CHECK(ix.shape()->log == 10);
  CHECK(listed(ix).size() == 3009);
}

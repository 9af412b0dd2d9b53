#include "store/blob/blob_store.h"

#include "common/temp_files.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <atomic>
#include <fstream>
#include <future>
#include <thread>
#include <vector>
#include <sys/wait.h>
#include <unistd.h>

using namespace tributary;
using namespace tributary::store;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("tributary-blobs-" + std::to_string(::getpid()));
  TempDir() { fs::remove_all(path); }
  ~TempDir() { fs::remove_all(path); }
};

size_t files_under(const fs::path& p) {
  size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(p)) {
    n += e.is_regular_file() ? 1 : 0;
  }
  return n;
}

} // namespace

uint64_t bytes_under(const fs::path& p) {
  uint64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(p)) {
    n += e.is_regular_file() ? e.file_size() : 0;
  }
  return n;
}

TEST_CASE("BlobStore: a small blob goes to a pack, content-addressed, deduplicated, with the digests asked for") {
  TempDir dir;
  auto store = BlobStore::open(dir.path);
  REQUIRE(store);
  auto a = (*store)->put("abc", {rs::HashAlgorithm::md5});
  REQUIRE(a);
  CHECK(a->sha256 == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(a->length == 3);
  REQUIRE(a->hashes.size() == 2);
  CHECK(a->hashes[1] == rs::HashValue{"md5", "900150983cd24fb0d6963f7d28e17f72"});
  CHECK((*store)->contains(a->sha256));
  CHECK(*(*store)->read(a->sha256) == "abc");
  auto where = (*store)->locate(a->sha256);
  REQUIRE(where);
  CHECK(where->file.parent_path() == dir.path / "packs");
  CHECK(where->offset == 48); // past the record header
  CHECK(where->length == 3);
  CHECK(files_under(dir.path / "blobs") == 0);
  CHECK(files_under(dir.path / "packs") == 1);
  {
    // The record names its blob: the packs alone say what they hold.
    std::ifstream in(where->file, std::ios::binary);
    std::string header(48, '\0');
    in.read(header.data(), 48);
    CHECK(header.substr(0, 4) == "TRB1");
    CHECK(static_cast<unsigned char>(header[16]) == 0xba);
  }
  const uint64_t packed = bytes_under(dir.path / "packs");
  CHECK(packed == 48 + 3);

  auto again = (*store)->put("abc");
  REQUIRE(again);
  CHECK(again->sha256 == a->sha256);
  CHECK(bytes_under(dir.path / "packs") == packed); // stored once
  CHECK(files_under(dir.path / "tmp") == 0);
  CHECK((*store)->sync_directories());

  auto empty = (*store)->put("");
  REQUIRE(empty);
  CHECK(*(*store)->read(empty->sha256) == "");
}

TEST_CASE("BlobStore: lookups through reused read transactions see every blob named since, on any thread") {
  // The index renews a reset read transaction for each lookup (blob_index.cpp,
  // ReadTxn): each must see what was named after the one before it ended.
  TempDir dir;
  auto store = BlobStore::open(dir.path);
  REQUIRE(store);
  std::vector<std::string> names;
  for (int i = 0; i < 40; ++i) {
    auto b = (*store)->put("blob " + std::to_string(i));
    REQUIRE(b);
    names.push_back(b->sha256);
    for (const auto& n : names) {
      REQUIRE((*store)->contains(n));
    }
    auto again = (*store)->put("blob " + std::to_string(i)); // found by a lookup: stored once
    REQUIRE(again);
    CHECK(again->sha256 == b->sha256);
  }
  std::atomic<int> seen{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (const auto& n : names) {
        seen += (*store)->contains(n) ? 1 : 0;
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  CHECK(seen == 4 * 40);
  CHECK_FALSE((*store)->contains(std::string(64, '0')));
}

TEST_CASE("BlobStore: a blob larger than a pack record gets a file of its own") {
  TempDir dir;
  auto store = BlobStore::open(dir.path);
  REQUIRE(store);
  const std::string big(BlobStore::k_pack_max + 1, 'x');
  auto w = (*store)->begin();
  REQUIRE(w);
  // Written in pieces, it moves from memory to a file on the way.
  REQUIRE(w->write(big.data(), 1000));
  REQUIRE(w->write(big.data() + 1000, big.size() - 1000));
  auto info = w->commit();
  REQUIRE(info);
  auto where = (*store)->locate(info->sha256);
  REQUIRE(where);
  CHECK(where->file == dir.path / "blobs" / info->sha256.substr(0, 2) / info->sha256);
  CHECK(where->offset == 0);
  CHECK(where->length == big.size());
  CHECK(*(*store)->read(info->sha256) == big);
  CHECK(files_under(dir.path / "packs") == 0);
}

TEST_CASE("BlobStore: a group is published together, and what was never published is never found") {
  TempDir dir;
  std::vector<std::string> names;
  std::string unpublished;
  {
    auto store = BlobStore::open(dir.path);
    REQUIRE(store);
    std::vector<BlobStore::Writer> writers;
    for (int i = 0; i < 100; ++i) {
      auto w = (*store)->begin();
      REQUIRE(w);
      const std::string body = "blob " + std::to_string(i % 90); // ten repeats inside the group
      REQUIRE(w->write(body.data(), body.size()));
      w->seal();
      writers.push_back(std::move(*w));
    }
    std::vector<BlobStore::Writer*> group;
    for (auto& w : writers) {
      group.push_back(&w);
    }
    auto published = (*store)->publish(group);
    REQUIRE(published.size() == 100);
    for (auto& p : published) {
      REQUIRE(p);
      names.push_back(p->sha256);
    }
    // Sealed (its bytes in the pack) but never published: a crash here.
    auto w = (*store)->begin();
    REQUIRE(w);
    REQUIRE(w->write("lost", 4));
    unpublished = w->seal().sha256;
    CHECK_FALSE((*store)->contains(unpublished));
  }
  // A second process (here: the same one, after closing) finds the group
  // and appends to a pack of its own.
  auto store = BlobStore::open(dir.path);
  REQUIRE(store);
  for (size_t i = 0; i < names.size(); ++i) {
    CHECK(*(*store)->read(names[i]) == "blob " + std::to_string(i % 90));
  }
  CHECK_FALSE((*store)->contains(unpublished));
  auto missing = (*store)->read(unpublished);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().kind == ErrorKind::not_found);
  REQUIRE((*store)->put("later"));
  CHECK(files_under(dir.path / "packs") == 2);
}

TEST_CASE("BlobStore: stores opened twice on one root share one index") {
  TempDir dir;
  auto one = BlobStore::open(dir.path);
  auto two = BlobStore::open(dir.path / "." / "");
  REQUIRE(one);
  REQUIRE(two);
  auto a = (*one)->put("shared");
  REQUIRE(a);
  CHECK((*two)->contains(a->sha256));
  CHECK(*(*two)->read(a->sha256) == "shared");
}

TEST_CASE("BlobStore: an abandoned writer leaves no file, and names outside the store are refused") {
  TempDir dir;
  auto store = BlobStore::open(dir.path);
  REQUIRE(store);
  {
    auto w = (*store)->begin();
    REQUIRE(w);
    REQUIRE(w->write("partial", 7));
    const std::string big(BlobStore::k_pack_max + 10, 'y');
    auto large = (*store)->begin();
    REQUIRE(large);
    REQUIRE(large->write(big.data(), big.size()));
  }
  CHECK(files_under(dir.path / "tmp") == 0);
  CHECK(files_under(dir.path / "blobs") == 0);
  CHECK(files_under(dir.path / "packs") == 0);
  for (const char* bad : {"../../etc/passwd", "", "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD"}) {
    CAPTURE(bad);
    auto r = (*store)->locate(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().kind == ErrorKind::usage);
    CHECK_FALSE((*store)->contains(bad));
  }
  auto missing = (*store)->read(std::string(64, 'a'));
  REQUIRE_FALSE(missing);
  CHECK(missing.error().kind == ErrorKind::not_found);
}

TEST_CASE("BlobStore: leftovers of a crashed process are cleared on open, those of a live one kept") {
  TempDir dir;
  fs::create_directories(dir.path / "tmp");
  const pid_t dead = ::fork();
  if (dead == 0) {
    ::_exit(0);
  }
  REQUIRE(dead > 0);
  ::waitpid(dead, nullptr, 0);
  const std::string crashed = "blob-" + std::to_string(dead) + "-1.part";
  std::ofstream(dir.path / "tmp" / crashed) << "half";
  std::ofstream(dir.path / "tmp" / "blob-1-7.part") << "being written"; // pid 1 lives
  // Not the blob store's: a running daemon's spooled document and dump
  // package (opening the store in another process, as check-blobs does,
  // deleted them and the daemon's audit failed), and anything else.
  std::ofstream(dir.path / "tmp" / "doc-1-3.xml") << "<urlset/>";
  std::ofstream(dir.path / "tmp" / "package-1-Ab12Cd") << "PK";
  std::ofstream(dir.path / "tmp" / ("doc-" + std::to_string(dead) + "-4.xml")) << "a dead run's: the engine's to clear";
  std::ofstream(dir.path / "tmp" / "notes.txt") << "an operator's";
  auto store = BlobStore::open(dir.path);
  REQUIRE(store);
  CHECK_FALSE(fs::exists(dir.path / "tmp" / crashed));
  CHECK(fs::exists(dir.path / "tmp" / "blob-1-7.part"));
  CHECK(fs::exists(dir.path / "tmp" / "doc-1-3.xml"));
  CHECK(fs::exists(dir.path / "tmp" / "package-1-Ab12Cd"));
  CHECK(fs::exists(dir.path / "tmp" / ("doc-" + std::to_string(dead) + "-4.xml")));
  CHECK(fs::exists(dir.path / "tmp" / "notes.txt"));

  // The sync engine clears its own kinds of a dead process, nothing else.
  CHECK(remove_orphaned_temp_files(dir.path / "tmp", {"doc", "package"}) == 1);
  CHECK_FALSE(fs::exists(dir.path / "tmp" / ("doc-" + std::to_string(dead) + "-4.xml")));
  CHECK(fs::exists(dir.path / "tmp" / "doc-1-3.xml"));
  CHECK(fs::exists(dir.path / "tmp" / "blob-1-7.part"));
}

TEST_CASE("BlobStore: check re-hashes everything, finds damage, and rebuilds a lost index from the packs") {
  TempDir dir;
  std::vector<std::string> names;
  fs::path pack;
  {
    auto store = BlobStore::open(dir.path);
    REQUIRE(store);
    for (int i = 0; i < 50; ++i) {
      auto b = (*store)->put("record " + std::to_string(i));
      REQUIRE(b);
      names.push_back(b->sha256);
    }
    REQUIRE((*store)->put(std::string(BlobStore::k_pack_max + 1, 'f')));
    auto w = (*store)->begin();
    REQUIRE(w);
    REQUIRE(w->write("sealed, never published", 23));
    w->seal();
    pack = (*store)->locate(names[0])->file;
    auto clean = (*store)->check(false);
    REQUIRE(clean);
    CHECK(clean->problems.empty());
    CHECK(clean->packs == 1);
    CHECK(clean->records == 50); // the sealed one is written by publish(), never called
    CHECK(clean->indexed == 50);
    CHECK(clean->index_entries == 50);
    CHECK(clean->files == 1);
  }
  // The index is lost (say, a restore without it): every record is intact
  // but unnamed until --reindex.
  fs::remove_all(dir.path / "index");
  {
    auto store = BlobStore::open(dir.path);
    REQUIRE(store);
    CHECK_FALSE((*store)->contains(names[7]));
    auto before = (*store)->check(false);
    REQUIRE(before);
    CHECK(before->indexed == 0);
    CHECK(before->index_entries == 0);
    auto rebuilt = (*store)->check(true);
    REQUIRE(rebuilt);
    CHECK(rebuilt->reindexed == 50);
    CHECK(rebuilt->problems.empty());
    for (size_t i = 0; i < names.size(); ++i) {
      CHECK(*(*store)->read(names[i]) == "record " + std::to_string(i));
    }
  }
  // Damage: a flipped byte in one record, the header of the next wiped,
  // and a torn tail (what a crash leaves: not a problem, nothing names it).
  uint64_t second = 0;
  {
    auto store = BlobStore::open(dir.path);
    REQUIRE(store);
    second = (*store)->locate(names[1])->offset;
  }
  {
    std::fstream f(pack, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(48 + 2);
    f.put('X');
    f.seekp(static_cast<std::streamoff>(second - 48));
    f.write(std::string(48, '\0').data(), 48);
  }
  std::ofstream(pack, std::ios::app | std::ios::binary) << "TRB1torn";
  auto store = BlobStore::open(dir.path);
  REQUIRE(store);
  auto damaged = (*store)->check(false);
  REQUIRE(damaged);
  REQUIRE(damaged->problems.size() == 2);
  CHECK(damaged->problems[0].find("offset 0 does not hash to its name " + names[0] + " (the index serves it)") !=
        std::string::npos);
  CHECK(damaged->problems[1].find("index entry " + names[1] + ": no record of it") != std::string::npos);
  CHECK(damaged->records == 48); // the scan finds the records after the wiped header
  CHECK(damaged->unreadable_bytes >= 48 + 8);
}

TEST_CASE("BlobStore: records left to publish() are written in runs around those written at once, and read back whole") {
  TempDir dir;
  auto store = BlobStore::open(dir.path);
  REQUIRE(store);
  std::vector<BlobStore::Writer> writers;
  std::vector<std::string> bodies;
  for (int i = 0; i < 700; ++i) {
    // Lengths off the 8-byte grid (padding between records); every 100th
    // past 64 KiB, so written by seal() between the deferred ones; more
    // than a pwritev's 1,024 pieces in all.
    std::string body = i % 100 == 99 ? std::string(70000 + i, static_cast<char>('a' + i % 26))
                                     : "body " + std::to_string(i) + std::string(static_cast<size_t>(i % 13), 'x');
    auto w = (*store)->begin();
    REQUIRE(w);
    REQUIRE(w->write(body.data(), body.size()));
    w->seal();
    writers.push_back(std::move(*w));
    bodies.push_back(std::move(body));
  }
  // Published in two groups, the second first.
  std::vector<BlobStore::Writer*> first, second;
  for (size_t i = 0; i < writers.size(); ++i) {
    (i < 350 ? first : second).push_back(&writers[i]);
  }
  std::vector<std::string> names(writers.size());
  for (auto* group : {&second, &first}) {
    auto out = (*store)->publish(*group);
    for (size_t k = 0; k < out.size(); ++k) {
      REQUIRE(out[k]);
      names[static_cast<size_t>((*group)[k] - writers.data())] = out[k]->sha256;
    }
  }
  for (size_t i = 0; i < writers.size(); ++i) {
    CHECK(*(*store)->read(names[i]) == bodies[i]);
  }
  auto checked = (*store)->check(false);
  REQUIRE(checked);
  CHECK(checked->problems.empty());
  CHECK(checked->records == 700);
  CHECK(checked->indexed == 700);
}

TEST_CASE("BlobStore: four threads writing and publishing at once, across many small packs") {
  TempDir dir;
  auto store = BlobStore::open(dir.path, /*pack_bytes=*/4096); // a new pack every few dozen records
  REQUIRE(store);
  constexpr int k_threads = 4;
  constexpr int k_groups = 25;
  constexpr int k_per_group = 8;
  std::vector<std::vector<std::string>> names(k_threads);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < k_threads; ++t) {
    threads.emplace_back([&, t] {
      for (int g = 0; g < k_groups; ++g) {
        std::vector<BlobStore::Writer> writers;
        for (int i = 0; i < k_per_group; ++i) {
          auto w = (*store)->begin();
          // Some content is shared between threads: deduplicated, never torn.
          const std::string body = "thread " + std::to_string(i % 2 ? t : 0) + " group " + std::to_string(g) +
                                   " blob " + std::to_string(i) + std::string(static_cast<size_t>(i * 37), 'x');
          if (!w || !w->write(body.data(), body.size())) {
            ++failures;
            continue;
          }
          w->seal();
          writers.push_back(std::move(*w));
        }
        std::vector<BlobStore::Writer*> group;
        for (auto& w : writers) {
          group.push_back(&w);
        }
        for (auto& r : (*store)->publish(group)) {
          if (!r) {
            ++failures;
          } else {
            names[static_cast<size_t>(t)].push_back(r->sha256);
          }
        }
      }
    });
  }
  for (auto& th : threads) {
    th.join();
  }
  CHECK(failures == 0);
  size_t n = 0;
  for (const auto& list : names) {
    for (const auto& name : list) {
      auto bytes = (*store)->read(name);
      REQUIRE(bytes);
      CHECK(rs::hash_hex(rs::HashAlgorithm::sha256, *bytes) == name);
      ++n;
    }
  }
  CHECK(n == k_threads * k_groups * k_per_group);
  CHECK(files_under(dir.path / "packs") > 10);
  auto checked = (*store)->check(false);
  REQUIRE(checked);
  CHECK(checked->problems.empty());
  CHECK(checked->unreadable_bytes == 0);
  CHECK(checked->indexed == checked->index_entries);
}

TEST_CASE("BlobStore: sync_directories returns only once every directory named before it is durable, and retries a failed flush") {
  TempDir dir;
  auto store = BlobStore::open(dir.path);
  REQUIRE(store);
  // Two large blobs (a file each): their directories wait to be flushed.
  const std::string big1(BlobStore::k_pack_max + 1, 'a');
  const std::string big2(BlobStore::k_pack_max + 1, 'b');
  REQUIRE((*store)->put(big1));
  REQUIRE((*store)->put(big2));

  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> calls{0};
  tributary::store::testing::set_directory_sync([&](const fs::path&) -> Result<void> {
    if (calls++ == 0) {
      released.wait(); // the first flush is slow
    }
    return {};
  });
  auto first = std::async(std::launch::async, [&] { return (*store)->sync_directories(); });
  while (calls.load() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // A second committer whose blobs the first flush took must wait for it:
  // returning now, it would commit rows naming files not yet durable.
  auto second = std::async(std::launch::async, [&] { return (*store)->sync_directories(); });
  CHECK(second.wait_for(std::chrono::milliseconds(200)) == std::future_status::timeout);
  release.set_value();
  CHECK(first.get());
  CHECK(second.get());

  // A flush that fails is not forgotten: the next call flushes it again.
  REQUIRE((*store)->put(std::string(BlobStore::k_pack_max + 1, 'c')));
  std::vector<fs::path> flushed;
  bool fail = true;
  tributary::store::testing::set_directory_sync([&](const fs::path& d) -> Result<void> {
    flushed.push_back(d);
    if (fail) {
      fail = false;
      return make_error(ErrorKind::io, "fsync " + d.string() + ": Input/output error");
    }
    return {};
  });
  CHECK_FALSE((*store)->sync_directories());
  CHECK((*store)->sync_directories());
  tributary::store::testing::set_directory_sync({});
  REQUIRE(flushed.size() == 2);
  CHECK(flushed[0] == flushed[1]);
}

namespace {

BlobName name_of(const std::string& hex) { return *BlobStore::name_of(hex); }

} // namespace

TEST_CASE("BlobStore: a condemned blob goes only while still condemned, and every reuse lifts the mark") {
  TempDir dir;
  auto opened = BlobStore::open(dir.path);
  REQUIRE(opened);
  BlobStore& store = **opened;
  auto a = store.put("reused by a writer that stores the same bytes");
  auto b = store.put("reused by a deduplicated fetch (retain)");
  auto c = store.put("garbage");
  const std::string big(BlobStore::k_pack_max + 10, 'g');
  auto d = store.put(big); // a file of its own
  auto e = store.put(std::string(BlobStore::k_pack_max + 20, 'e')); // a file, stored again later
  REQUIRE((a && b && c && d && e));
  const std::vector<BlobName> all{name_of(a->sha256), name_of(b->sha256), name_of(c->sha256), name_of(d->sha256),
                                  name_of(e->sha256)};
  CHECK(*store.condemn(all, 1000) == 5);
  CHECK(*store.condemn(all, 2000) == 0); // marked once, at the first time
  auto marked = store.condemned();
  REQUIRE(marked);
  REQUIRE(marked->size() == 5);
  CHECK(marked->front().second == 1000);

  // A writer storing bytes already stored reuses them: the mark is lifted.
  REQUIRE(store.put("reused by a writer that stores the same bytes"));
  REQUIRE(store.retain(b->sha256));
  REQUIRE(store.put(std::string(BlobStore::k_pack_max + 20, 'e'))); // a file blob linked again: EEXIST
  CHECK(store.condemned()->size() == 2);

  auto removed = store.remove_condemned(all);
  REQUIRE(removed);
  CHECK(removed->blobs == 2);
  CHECK(removed->bytes == 7 + big.size());
  CHECK(*store.read(a->sha256) == "reused by a writer that stores the same bytes");
  CHECK(store.read(b->sha256));
  CHECK(store.read(e->sha256));
  CHECK(store.locate(c->sha256).error().kind == ErrorKind::not_found);
  CHECK(store.locate(d->sha256).error().kind == ErrorKind::not_found);
  CHECK(store.retain(c->sha256).error().kind == ErrorKind::not_found);
  CHECK(store.condemned()->empty());
  // A second removal finds nothing marked: nothing more goes.
  CHECK(store.remove_condemned(all)->blobs == 0);

  // Collected, then stored again: the bytes are written anew.
  auto c2 = store.put("garbage");
  REQUIRE(c2);
  CHECK(*store.read(c2->sha256) == "garbage");
  auto d2 = store.put(big);
  REQUIRE(d2);
  CHECK(store.read(d2->sha256)->size() == big.size());

  // A pardon lifts marks without removing anything.
  REQUIRE(store.condemn({name_of(c2->sha256)}, 3000));
  CHECK(*store.pardon({name_of(c2->sha256), name_of(a->sha256)}) == 1);
  CHECK(store.remove_condemned({name_of(c2->sha256)})->blobs == 0);

  // The marks live beside the index: check() and for_each_blob() see only blobs.
  REQUIRE(store.condemn({name_of(a->sha256)}, 4000));
  auto checked = store.check(false);
  REQUIRE(checked);
  CHECK(checked->problems.empty());
  CHECK(checked->index_entries == 3); // a, b, garbage
  size_t listed = 0;
  REQUIRE(store.for_each_blob([&](const BlobName&, uint64_t) { ++listed; }));
  CHECK(listed == 5); // and the two files
}

TEST_CASE("BlobStore: repack rewrites mostly dead packs, keeps every live blob readable, and leaves a writer's pack alone") {
  TempDir dir;
  {
    auto opened = BlobStore::open(dir.path, /*pack_bytes=*/4096);
    REQUIRE(opened);
    BlobStore& store = **opened;
    std::vector<std::string> names;
    for (int i = 0; i < 60; ++i) {
      auto info = store.put("blob " + std::to_string(i) + std::string(200, 'x'));
      REQUIRE(info);
      names.push_back(info->sha256);
    }
    // Every third one lives on.
    std::vector<BlobName> dead;
    for (size_t i = 0; i < names.size(); ++i) {
      if (i % 3 != 0) {
        dead.push_back(name_of(names[i]));
      }
    }
    REQUIRE(store.condemn(dead, 1));
    REQUIRE(store.remove_condemned(dead)->blobs == 40);
    const uint64_t before = bytes_under(dir.path / "packs");
    const size_t packs_before = files_under(dir.path / "packs");
    auto r = store.repack(0.5);
    REQUIRE(r);
    CHECK(r->problems.empty());
    // (the pack this store appended to when repack began filled up with the
    // copies and was closed, so it too could be rewritten)
    CHECK(r->packs + r->busy == packs_before);
    CHECK(r->packs >= packs_before - 1);
    CHECK(r->moved >= 18);
    CHECK(r->freed_bytes > 0);
    CHECK(bytes_under(dir.path / "packs") < before * 6 / 10);
    for (size_t i = 0; i < names.size(); i += 3) {
      CHECK(*store.read(names[i]) == "blob " + std::to_string(i) + std::string(200, 'x'));
    }
    auto checked = store.check(false);
    REQUIRE(checked);
    CHECK(checked->problems.empty());
    CHECK(checked->indexed == 20);
    // Nothing dead left: a second repack rewrites nothing.
    CHECK(store.repack(0.5)->packs == 0);
  }
  {
    // The pack a writer appends to is locked: left alone, however dead.
    TempDir other;
    auto opened = BlobStore::open(other.path / "s", /*pack_bytes=*/1 << 20);
    REQUIRE(opened);
    BlobStore& store = **opened;
    auto keep = store.put("kept");
    auto gone = store.put(std::string(2000, 'd'));
    REQUIRE((keep && gone));
    REQUIRE(store.condemn({name_of(gone->sha256)}, 1));
    REQUIRE(store.remove_condemned({name_of(gone->sha256)})->blobs == 1);
    auto r = store.repack(0.5);
    REQUIRE(r);
    CHECK(r->busy == 1);
    CHECK(r->packs == 0);
    CHECK(*store.read(keep->sha256) == "kept");
  }
}

TEST_CASE("BlobStore: the index's pages do not stay counted in resident memory") {
  TempDir dir;
  auto opened = BlobStore::open(dir.path);
  REQUIRE(opened);
  BlobStore& store = **opened;
  std::vector<std::string> names;
  for (int g = 0; g < 100; ++g) {
    std::vector<BlobStore::Writer> writers;
    for (int i = 0; i < 1000; ++i) {
      auto w = store.begin();
      const std::string body = std::to_string(g) + "/" + std::to_string(i);
      REQUIRE(w->write(body.data(), body.size()));
      w->seal();
      writers.push_back(std::move(*w));
    }
    std::vector<BlobStore::Writer*> ptrs;
    for (auto& w : writers) {
      ptrs.push_back(&w);
    }
    for (auto& r : store.publish(ptrs)) {
      REQUIRE(r);
      names.push_back(r->sha256);
    }
  }
  // Resident kB of the index's map, from /proc/self/smaps.
  const std::string index = fs::canonical(dir.path / "index" / "data.mdb").string();
  auto resident = [&] {
    std::ifstream in("/proc/self/smaps");
    std::string line;
    bool in_index = false;
    long kb = 0;
    while (std::getline(in, line)) {
      if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && line.find(' ') < 40 &&
          line.find('-') < line.find(' ')) {
        in_index = line.size() >= index.size() && line.compare(line.size() - index.size(), index.size(), index) == 0;
      } else if (in_index && line.rfind("Rss:", 0) == 0) {
        kb += std::stol(line.substr(4));
      }
    }
    return kb;
  };
  const long file_kb = static_cast<long>(fs::file_size(dir.path / "index" / "data.mdb") / 1024);
  // Right after the writes (puts read their leaves through the map too).
  const long written = resident();
  CHECK(written < file_kb / 2);
  for (const auto& n : names) {
    REQUIRE(store.locate(n)); // touches every page of the index
  }
  // While lookups go on: let go of every 64 (each fault maps 16 pages
  // around it, whatever madvise says: at 1,024 the whole index stayed).
  const long during = resident();
  CHECK(during < file_kb / 2);
  // Let go of 250 ms after the last use, lookups or none.
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  INFO("index file " << file_kb << " kB, resident " << resident() << " kB (" << written << " after the writes, "
                     << during << " after the lookups)");
  CHECK(file_kb > 1000);
  CHECK(resident() < file_kb / 4);
}

// The Resource List as parts in files: what a client reads is every live
// resource once, in order, in valid documents within the limits; a change
// costs the part it falls in, not the list.
#include "republisher/resource_list_files.h"

#include "records.h"
#include "../../common/files.h"
#include "../resourcesync/test_support.h"

#include "resourcesync/reader.h"
#include "store/memory_store.h"

#include <doctest/doctest.h>

#include <cstdio>
#include <set>
#include <zlib.h>
#include <unistd.h>

using namespace tributary;
using namespace tributary::pub;
using store::ChangeRecord;
using store::ResourceRecord;
using test::record;
using test::ts;

namespace {

std::string gunzip(const std::string& gz) {
  auto out = test::gunzip(gz);
  CHECK(out);
  return out.value_or("");
}

std::string body(const CachedDocument& d) { return d.file.empty() ? d.body : test::slurp(d.file); }

struct ListFixture {
  store::MemoryStore st;
  UrlScheme urls{"https://agg.example.org/"};
  std::vector<int64_t> feeds;
  std::filesystem::path dir;
  std::unique_ptr<ResourceListFiles> list;
  rs::Timestamp at = ts("2026-03-01T00:00:00Z");

  // `feed_count` feeds of one source (a named set over them).
  explicit ListFixture(size_t feed_count = 1, uint64_t part_entries = 30, uint64_t max_entries = 40,
                       size_t change_page = 10000) {
    static int n = 0;
    dir = std::filesystem::temp_directory_path() /
          ("tributary-rlf-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    const int64_t src = *st.ensure_source("up", "http://up.example.org/");
    for (size_t f = 0; f < feed_count; ++f) {
      feeds.push_back(*st.ensure_feed(src, "http://up.example.org/caps" + std::to_string(f) + ".xml"));
    }
    ResourceListFiles::Options o;
    o.dir = dir;
    o.part_entries = part_entries;
    o.limits.max_entries = max_entries;
    o.change_page = change_page;
    list = std::make_unique<ResourceListFiles>(urls, PublishedSet{"up", feeds}, o);
  }
  ~ListFixture() {
    list.reset();
    std::filesystem::remove_all(dir);
  }

  static std::string uri(int i) {
    char b[64];
    std::snprintf(b, sizeof b, "http://up.example.org/r/%05d", i);
    return b;
  }
  void put(const std::vector<int>& ids, size_t feed = 0, const std::string& content = "x") {
    store::Batch b;
    b.feed_id = feeds.at(feed);
    for (int i : ids) {
      b.upserts.push_back(record(uri(i), content + std::to_string(i)));
      b.changes.push_back(ChangeRecord{rs::Change::created, ts("2026-01-01T10:00:00Z"), b.upserts.back()});
    }
    REQUIRE(st.apply(b));
  }
  void remove(const std::vector<int>& ids, size_t feed = 0) {
    store::Batch b;
    b.feed_id = feeds.at(feed);
    for (int i : ids) {
      ResourceRecord r = record(uri(i), "x");
      r.state = store::ResourceState::deleted;
      b.upserts.push_back(r);
      b.changes.push_back(ChangeRecord{rs::Change::deleted, ts("2026-01-02T00:00:00Z"), r});
    }
    REQUIRE(st.apply(b));
  }
  ResourceListFiles::Outcome update() {
    at += std::chrono::seconds(1);
    auto r = list->update(st, *st.last_seq(), at);
    REQUIRE(r);
    return *r;
  }

  // What a client reads: resourcelist.xml, and the parts its index names.
  // Every document valid, each part within the limit, linking up and (when
  // there are several) to the index. Returns the original URIs (via), in
  // order.
  std::vector<std::string> read_all(uint64_t max_entries = 40) {
    std::map<std::string, std::shared_ptr<const CachedDocument>> by_path;
    for (const auto& [path, doc] : list->documents()) {
      by_path[path] = doc;
    }
    const std::string top = urls.path_of(urls.resource_list("up"));
    REQUIRE(by_path.count(top));
    auto first = rs::parse_document(body(*by_path[top]));
    REQUIRE(first.summary.valid());
    std::vector<std::string> parts;
    if (first.document.header.root == rs::RootElement::sitemapindex) {
      REQUIRE(first.document.header.md);
      CHECK(first.document.header.md->at);
      CHECK(first.document.header.md->completed);
      for (const auto& e : first.document.entries) {
        parts.push_back(urls.path_of(e.loc));
        CHECK(e.md->at);
      }
    } else {
      parts.push_back(top);
    }
    std::vector<std::string> out;
    for (const auto& p : parts) {
      CAPTURE(p);
      REQUIRE(by_path.count(p));
      const auto& doc = *by_path[p];
      CHECK_FALSE(doc.etag.empty());
      if (!doc.file.empty()) {
        CHECK(std::filesystem::file_size(doc.file) == doc.size);
        CHECK(std::filesystem::file_size(doc.gz_file) == doc.gz_size);
        CHECK(gunzip(test::slurp(doc.gz_file)) == test::slurp(doc.file));
        // The ETag names these bytes: their CRC-32 and length (the same
        // text gets the same one whenever it is rendered again).
        const std::string text = test::slurp(doc.file);
        char etag[64];
        std::snprintf(etag, sizeof etag, "\"%lx-%zx\"",
                      crc32(0L, reinterpret_cast<const Bytef*>(text.data()), static_cast<uInt>(text.size())),
                      text.size());
        CHECK(doc.etag == etag);
      }
      auto d = rs::parse_document(body(doc));
      REQUIRE(d.summary.valid());
      CHECK(d.summary.warnings == 0);
      CHECK(d.document.header.root == rs::RootElement::urlset);
      CHECK(d.document.header.md->capability == "resourcelist");
      CHECK(d.document.header.md->at);
      CHECK(d.document.header.md->completed);
      CHECK(d.document.entries.size() <= max_entries);
      CHECK(d.document.header.find_link("up"));
      CHECK((d.document.header.find_link("index") != nullptr) == (parts.size() > 1));
      for (const auto& e : d.document.entries) {
        for (const auto& l : e.links) {
          if (l.rel == "via") {
            out.push_back(l.href);
          }
        }
      }
    }
    return out;
  }

  static std::vector<std::string> expect(int from, int to, const std::set<int>& except = {}) {
    std::vector<std::string> out;
    for (int i = from; i < to; ++i) {
      if (!except.count(i)) {
        out.push_back(uri(i));
      }
    }
    return out;
  }
};

std::vector<int> range(int from, int to, int step = 1) {
  std::vector<int> out;
  for (int i = from; i < to; i += step) {
    out.push_back(i);
  }
  return out;
}

} // namespace

TEST_CASE("ResourceListFiles: a small set is one document, without an index") {
  ListFixture f;
  f.put(range(0, 25));
  auto o = f.update();
  CHECK(o.full);
  CHECK(f.list->parts() == 1);
  CHECK(f.read_all() == ListFixture::expect(0, 25));
  CHECK(f.list->documents().size() == 1);
}

TEST_CASE("ResourceListFiles: parts of part_entries past the limit, then a change renders only its part") {
  ListFixture f;
  f.put(range(0, 100, 2)); // 50 resources: even numbers
  f.update();
  CHECK(f.list->parts() == 2); // 30 + 20
  CHECK(f.read_all() == ListFixture::expect(0, 100, [] {
          std::set<int> odd;
          for (int i = 1; i < 100; i += 2) {
            odd.insert(i);
          }
          return odd;
        }()));
  const auto before = f.list->documents();
  // An update of one resource in the second part.
  f.put({80}, 0, "changed");
  auto o = f.update();
  CHECK_FALSE(o.full);
  CHECK(o.parts_rendered == 1);
  CHECK(o.entries_rendered == 20);
  const auto after = f.list->documents();
  REQUIRE(after.size() == before.size());
  CHECK(after[1].second == before[1].second); // the first part, untouched
  CHECK(after[2].second != before[2].second);
  CHECK(after[0].second != before[0].second); // the index: a new `at`
  // Nothing changed: nothing rendered.
  CHECK(f.update().parts_rendered == 0);
}

TEST_CASE("ResourceListFiles: a part that outgrows the limit is split, one emptied is dropped, and it comes back to one document") {
  ListFixture f;
  f.put(range(0, 60)); // parts: 0-29, 30-59
  f.update();
  REQUIRE(f.list->parts() == 2);
  // 35 more, all in the last part's range: it holds 65, past the limit of
  // 40, and is cut into even pieces of about 30 (22, 22, 21).
  f.put(range(60, 95));
  auto o = f.update();
  CHECK_FALSE(o.full);
  CHECK(o.parts_rendered == 3);
  CHECK(f.list->parts() == 4);
  CHECK(f.read_all() == ListFixture::expect(0, 95));
  // Every resource of the first part goes: the part goes with them.
  f.remove(range(0, 30));
  f.update();
  CHECK(f.list->parts() == 3);
  CHECK(f.read_all() == ListFixture::expect(30, 95));
  // Down to a handful: one document again, without an index link.
  f.remove(range(30, 90));
  f.update();
  CHECK(f.list->parts() == 1);
  CHECK(f.read_all() == ListFixture::expect(90, 95));
  f.remove(range(90, 95));
  f.update();
  CHECK(f.list->parts() == 1);
  CHECK(f.read_all().empty());
}

TEST_CASE("ResourceListFiles: a small list that suddenly grows is cut at twice part_entries, however few changes were counted") {
  // Parts of 30, the hard limit far away (100), and the change log read 10
  // keys at a time: an update counts only the first page once the single
  // part is known to be touched, so it expects about 15 entries.
  ListFixture f(1, 30, 100, 10);
  f.put(range(0, 5));
  f.update();
  REQUIRE(f.list->parts() == 1);
  f.put(range(5, 205));
  auto o = f.update();
  CHECK_FALSE(o.full);
  CHECK(f.read_all(60) == ListFixture::expect(0, 205));
  CHECK(f.list->parts() >= 4);
}

TEST_CASE("ResourceListFiles: a set over several feeds lists them in order, and a change in the second feed renders its part") {
  ListFixture f(2);
  f.put(range(0, 35), 0);
  f.put(range(0, 35), 1, "second");
  f.update();
  CHECK(f.list->parts() == 3);
  auto all = f.read_all();
  auto want = ListFixture::expect(0, 35);
  auto again = ListFixture::expect(0, 35);
  want.insert(want.end(), again.begin(), again.end());
  CHECK(all == want);
  f.put({34}, 1, "third");
  auto o = f.update();
  CHECK(o.parts_rendered == 1);
  CHECK(f.read_all() == want);
}

TEST_CASE("ResourceListFiles: changes everywhere partition the list again, evenly, and the files of replaced parts go") {
  ListFixture f;
  f.put(range(0, 90));
  f.update();
  REQUIRE(f.list->parts() == 3);
  f.put(range(0, 90, 10), 0, "again"); // each part has changes
  auto o = f.update();
  CHECK(o.full);
  CHECK(f.read_all() == ListFixture::expect(0, 90));
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(f.dir)) {
    files += e.path().extension() == ".xml" ? 1 : 0;
  }
  CHECK(files == 6); // 3 parts now, 3 replaced ones kept a minute for requests under way
  f.list.reset();
  CHECK(std::filesystem::is_empty(f.dir));
}

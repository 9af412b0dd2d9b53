#include "republisher/change_lists.h"
#include "republisher/documents.h"

#include "records.h"
#include "../resourcesync/test_support.h"

#include "resourcesync/hash.h"
#include "resourcesync/reader.h"
#include "store/memory_store.h"

#include <doctest/doctest.h>

#include <set>

using namespace tributary;
using namespace tributary::pub;
using store::ChangeRecord;
using store::ResourceRecord;
using test::record;
using test::ts;

namespace {

struct Fixture {
  store::MemoryStore st;
  UrlScheme urls{"https://agg.example.org/mirror/"};
  PublishedSet set;
  Fixture() {
    const int64_t src = *st.ensure_source("up", "http://up.example.org/");
    const int64_t feed = *st.ensure_feed(src, "http://up.example.org/caps.xml");
    set = default_sets(*st.feeds()).at(0);
    store::Batch b;
    b.feed_id = feed;
    b.upserts = {record("http://up.example.org/a", "alpha"), record("http://up.example.org/b?x=1&y=2", "bravo"),
                 record("http://up.example.org/c", "charlie")};
    // c came through another aggregator, with mirrors and a collection link.
    rs::Link via{.rel = "via", .href = "http://original.example.org/c"};
    via.modified = ts("2025-12-31T00:00:00Z");
    b.upserts[2].links = {rs::Link{.rel = "duplicate", .href = "http://m2.example.org/c", .pri = 5},
                          via,
                          rs::Link{.rel = "collection", .href = "http://up.example.org/agg/1"},
                          rs::Link{.rel = "duplicate", .href = "http://m1.example.org/c", .pri = 2},
                          rs::Link{.rel = "describedby", .href = "http://up.example.org/c.meta"}};
    for (const auto& r : b.upserts) {
      b.changes.push_back(ChangeRecord{rs::Change::created, ts("2026-01-01T10:00:00Z"), r});
    }
    REQUIRE(st.apply(b));
    store::Batch d;
    d.feed_id = feed;
    ResourceRecord gone = b.upserts[0];
    gone.state = store::ResourceState::deleted;
    d.upserts = {gone};
    d.changes = {ChangeRecord{rs::Change::deleted, ts("2026-01-02T00:00:00Z"), gone}};
    REQUIRE(st.apply(d));
  }
};

rs::ParsedDocument parse_valid(const std::string& xml) {
  auto p = rs::parse_document(xml);
  std::string diags;
  for (const auto& d : p.summary.diagnostics) {
    diags += d.message + "\n";
  }
  INFO(xml);
  INFO(diags);
  CHECK(p.summary.valid());
  CHECK(p.summary.warnings == 0);
  return p;
}

} // namespace

TEST_CASE("UrlScheme: our URLs, and resource paths back to (set, original URI)") {
  UrlScheme u("https://agg.example.org/mirror/");
  CHECK(u.source_description() == "https://agg.example.org/mirror/.well-known/resourcesync");
  CHECK(u.capability_list("arxiv") == "https://agg.example.org/mirror/sets/arxiv/capabilitylist.xml");
  CHECK(u.resource_list_part("arxiv", 3) == "https://agg.example.org/mirror/sets/arxiv/resourcelist-3.xml");
  const std::string loc = u.resource("arxiv", "http://up.example.org/a b?x=1&y=/2");
  CHECK(loc == "https://agg.example.org/mirror/sets/arxiv/resources/http%3A%2F%2Fup.example.org%2Fa%20b%3Fx%3D1%26y%3D%2F2");
  auto back = UrlScheme::parse_resource_path(u.path_of(loc));
  REQUIRE(back);
  CHECK(back->first == "arxiv");
  CHECK(back->second == "http://up.example.org/a b?x=1&y=/2");
  for (const char* bad : {"/sets/arxiv/resources/", "/sets//resources/x", "/sets/a/resources/%zz", "/sets/a/b/resources/x",
                          "/sets/a/resources/x/y", "/other"}) {
    CAPTURE(bad);
    CHECK_FALSE(UrlScheme::parse_resource_path(bad));
  }
}

TEST_CASE("Republished documents: Source Description and Capability List validate and link up") {
  Fixture f;
  auto sd = parse_valid(render_source_description(f.urls, {f.set}));
  CHECK(sd.document.header.capability() == rs::Capability::description);
  REQUIRE(sd.document.entries.size() == 1);
  CHECK(sd.document.entries[0].loc == f.urls.capability_list("up"));
  // Our other faces, linked from it.
  CHECK(sd.document.header.find_link("api-catalog")->href == f.urls.api_catalog());
  std::set<std::string> alternates;
  for (const auto& l : sd.document.header.links) {
    if (l.rel == "alternate") {
      alternates.insert(l.href);
    }
  }
  CHECK(alternates == std::set<std::string>{f.urls.oai(), f.urls.activity_collection("")});
  auto caps = parse_valid(render_capability_list(f.urls, f.set));
  CHECK(caps.document.header.find_link("up")->href == f.urls.source_description());
  CHECK(caps.document.entries.size() == 2);
}

TEST_CASE("Republished Resource List: our locs, via the original, duplicates after our copy") {
  Fixture f;
  auto parts = render_resource_list(f.st, f.urls, f.set, ts("2026-01-03T00:00:00Z"));
  REQUIRE(parts);
  REQUIRE(parts->size() == 1);
  CHECK(parts->at(0).url == f.urls.resource_list("up"));
  auto rl = parse_valid(parts->at(0).xml);
  CHECK(rl.document.header.md->at == ts("2026-01-03T00:00:00Z"));
  CHECK(rl.document.header.md->completed.has_value());
  CHECK(rl.document.header.find_link("up")->href == f.urls.capability_list("up"));
  REQUIRE(rl.document.entries.size() == 2); // a was deleted
  const rs::Entry& b = rl.document.entries[0];
  CHECK(b.loc == f.urls.resource("up", "http://up.example.org/b?x=1&y=2"));
  CHECK(b.md->hash.size() == 2);
  const rs::Link* via = b.find_link("via");
  REQUIRE(via);
  CHECK(via->href == "http://up.example.org/b?x=1&y=2");
  CHECK(via->length == 5u);
  auto dups = b.links_by_priority("duplicate");
  REQUIRE(dups.size() == 1);
  CHECK(dups[0]->href == "http://up.example.org/b?x=1&y=2");
  CHECK(dups[0]->hash.empty());

  const rs::Entry& c = rl.document.entries[1];
  REQUIRE(c.find_link("via"));
  CHECK(c.find_link("via")->href == "http://original.example.org/c"); // not the intermediary
  auto cdups = c.links_by_priority("duplicate");
  REQUIRE(cdups.size() == 3);
  CHECK(cdups[0]->href == "http://up.example.org/c");
  CHECK(cdups[1]->href == "http://m1.example.org/c");
  CHECK(cdups[2]->href == "http://m2.example.org/c");
  CHECK_FALSE(c.find_link("collection"));
  CHECK(c.find_link("describedby"));
}

TEST_CASE("Republished Resource List: an index with parts past the limits") {
  Fixture f;
  auto parts = render_resource_list(f.st, f.urls, f.set, ts("2026-01-03T00:00:00Z"), rs::PartitionLimits{.max_entries = 1});
  REQUIRE(parts);
  REQUIRE(parts->size() == 3);
  CHECK(parts->back().is_index);
  auto index = parse_valid(parts->back().xml);
  CHECK(index.document.header.root == rs::RootElement::sitemapindex);
  CHECK(index.document.entries.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    auto part = parse_valid(parts->at(i).xml);
    CHECK(part.document.header.find_link("index")->href == f.urls.resource_list("up"));
  }
}

TEST_CASE("Republished Change List: closed parts, an open last part, our strictly increasing datetimes") {
  Fixture f;
  SUBCASE("parts of 2: two closed parts, an empty open part, the index") {
    auto parts = render_change_list(f.st, f.urls, f.set, 2);
    REQUIRE(parts);
    REQUIRE(parts->size() == 4);
    std::optional<rs::Timestamp> prev;
    std::optional<rs::Timestamp> prev_until;
    for (size_t i = 0; i < 3; ++i) {
      auto part = parse_valid(parts->at(i).xml);
      // Closed parts are numbered; the open one is what the Capability List names.
      CHECK(parts->at(i).url == (i < 2 ? f.urls.change_list_part("up", i + 1) : f.urls.change_list("up")));
      CHECK(part.document.header.find_link("index")->href == f.urls.change_list_index("up"));
      if (prev_until) {
        CHECK(part.document.header.md->from == prev_until);
      }
      CHECK(part.document.header.md->until.has_value() == (i < 2));
      prev_until = part.document.header.md->until;
      for (const auto& e : part.document.entries) {
        REQUIRE(e.md->datetime);
        if (prev) {
          CHECK(*e.md->datetime > *prev);
        }
        prev = e.md->datetime;
      }
    }
    auto index = parse_valid(parts->at(3).xml);
    CHECK(parts->at(3).url == f.urls.change_list_index("up"));
    CHECK(index.document.header.root == rs::RootElement::sitemapindex);
    REQUIRE(index.document.entries.size() == 3);
    CHECK(index.document.entries[2].loc == f.urls.change_list("up"));
    CHECK(index.document.entries[0].md->until.has_value());
    CHECK_FALSE(index.document.entries[2].md->until.has_value());
  }
  SUBCASE("closed parts are rendered once: a second render returns only the open part and the index") {
    ClosedParts closed;
    auto first = render_change_list(f.st, f.urls, f.set, 2, &closed);
    REQUIRE(first);
    REQUIRE(first->size() == 4);
    REQUIRE(closed.parts.size() == 2);
    CHECK(closed.parts[0].url == f.urls.change_list_part("up", 1));
    auto again = render_change_list(f.st, f.urls, f.set, 2, &closed);
    REQUIRE(again);
    REQUIRE(again->size() == 2); // the open part and the index
    CHECK(again->at(0).url == f.urls.change_list("up"));
    CHECK(again->at(0).xml == first->at(2).xml);
    CHECK(again->at(1).xml == first->at(3).xml); // the same index as a full render
    CHECK(closed.parts.size() == 2);
    // Another part size starts over.
    auto other = render_change_list(f.st, f.urls, f.set, 3, &closed);
    REQUIRE(other);
    CHECK(other->size() == 3);
    CHECK(closed.parts.size() == 1);
  }
  SUBCASE("one open part holds everything; a deletion carries no hash") {
    auto parts = render_change_list(f.st, f.urls, f.set, 10000);
    REQUIRE(parts);
    REQUIRE(parts->size() == 2);
    auto cl = parse_valid(parts->at(0).xml);
    REQUIRE(cl.document.entries.size() == 4);
    const rs::Entry& del = cl.document.entries[3];
    CHECK(del.change() == rs::Change::deleted);
    CHECK(del.loc == f.urls.resource("up", "http://up.example.org/a"));
    CHECK(del.md->hash.empty());
    CHECK(del.find_link("via")->href == "http://up.example.org/a");
  }
}

TEST_CASE("Republished Change List: the open part grown from one rendering to the next is, byte for byte, what a "
          "whole rendering gives, with its gzip copy and digest, across parts that close") {
  Fixture f;
  const int64_t feed = f.set.feeds.at(0);
  ClosedParts closed, whole_closed;
  OpenPart open;
  int n = 0;
  // Renderings after 0, 1, 2, ... 7 more changes each: parts of 5 close on
  // the way, at the end of a rendering and in its middle.
  for (int round = 0; round < 12; ++round) {
    store::Batch b;
    b.feed_id = feed;
    for (int i = 0; i < round % 8; ++i, ++n) {
      auto r = record("http://up.example.org/r" + std::to_string(n % 9), "v" + std::to_string(n));
      b.upserts.push_back(r);
      b.changes.push_back(ChangeRecord{n < 9 ? rs::Change::created : rs::Change::updated,
                                       ts("2026-01-03T00:00:00Z") + std::chrono::seconds(n), r});
    }
    if (!b.upserts.empty()) {
      REQUIRE(f.st.apply(b));
    }
    CAPTURE(round);
    std::vector<std::string> sunk, whole_sunk;
    auto grown = render_change_list(f.st, f.urls, f.set, 5, &closed,
                                    [&](rs::WrittenPart&& p) { sunk.push_back(p.xml); }, nullptr, &open);
    auto whole = render_change_list(f.st, f.urls, f.set, 5, &whole_closed,
                                    [&](rs::WrittenPart&& p) { whole_sunk.push_back(p.xml); });
    REQUIRE(grown);
    REQUIRE(whole);
    CHECK(sunk == whole_sunk); // the parts that closed
    REQUIRE(grown->size() == whole->size());
    for (size_t i = 0; i < grown->size(); ++i) {
      CHECK(grown->at(i).url == whole->at(i).url);
      CHECK(grown->at(i).xml == whole->at(i).xml);
      CHECK(grown->at(i).entries == whole->at(i).entries);
    }
    const std::string& xml = grown->front().xml; // the open part
    if (!open.sha256_hex.empty()) {
      CHECK(open.sha256_hex == rs::hash_hex(rs::HashAlgorithm::sha256, xml));
      CHECK(test::gunzip(open.gzipped).value_or("") == xml);
    }
    parse_valid(xml);
  }
  CHECK(closed.parts.size() >= 4);
  CHECK(closed.parts.size() == whole_closed.parts.size());
  // Another part size, or parts forgotten, start it again.
  ClosedParts fresh;
  auto again = render_change_list(f.st, f.urls, f.set, 5, &fresh, {}, nullptr, &open);
  auto whole = render_change_list(f.st, f.urls, f.set, 5);
  REQUIRE(again);
  REQUIRE(whole);
  CHECK(again->at(again->size() - 2).xml == whole->at(whole->size() - 2).xml);
  auto other = render_change_list(f.st, f.urls, f.set, 7, &closed, {}, nullptr, &open);
  auto other_whole = render_change_list(f.st, f.urls, f.set, 7);
  REQUIRE(other);
  CHECK(other->at(other->size() - 2).xml == other_whole->at(other_whole->size() - 2).xml);
}

TEST_CASE("Republished Change List: an open part kept from before any part closed is not grown on under another "
          "part size") {
  // Nothing closed yet, so the open part starts after change 0 under either
  // size: only the size it was made for tells it apart.
  Fixture f;
  store::Batch b;
  b.feed_id = f.set.feeds.at(0);
  for (int n = 0; n < 3; ++n) {
    auto r = record("http://up.example.org/r" + std::to_string(n), "v");
    b.upserts.push_back(r);
    b.changes.push_back(ChangeRecord{rs::Change::created, ts("2026-01-03T00:00:00Z") + std::chrono::seconds(n), r});
  }
  REQUIRE(f.st.apply(b));
  ClosedParts closed;
  OpenPart open;
  REQUIRE(render_change_list(f.st, f.urls, f.set, 10, &closed, {}, nullptr, &open));
  REQUIRE(open.entries > 2); // more than a part of 2 holds
  auto smaller = render_change_list(f.st, f.urls, f.set, 2, &closed, {}, nullptr, &open);
  auto whole = render_change_list(f.st, f.urls, f.set, 2);
  REQUIRE(smaller);
  REQUIRE(whole);
  REQUIRE(smaller->size() == whole->size());
  for (size_t i = 0; i < smaller->size(); ++i) {
    CHECK(smaller->at(i).xml == whole->at(i).xml);
  }
}

TEST_CASE("Published sets: one per upstream set, and named sets merging sources") {
  std::vector<store::FeedInfo> feeds{{1, 10, "arxiv", "http://a/caps1.xml"},
                                     {2, 10, "arxiv", "http://a/caps2.xml"},
                                     {3, 11, "pmc", "http://p/caps.xml"}};
  auto sets = published_sets(feeds, {NamedSet{"all", {"arxiv", "pmc"}}, NamedSet{"pmc", {"arxiv"}}});
  REQUIRE(sets.size() == 4);
  CHECK(sets[0].name == "arxiv");
  CHECK(sets[1].name == "arxiv-2");
  CHECK(sets[2].name == "pmc");
  CHECK(sets[3].name == "all");
  CHECK(sets[3].feeds == std::vector<int64_t>{1, 2, 3});
}

TEST_CASE("Republished entries: describedby/describes point at our copies when we hold both") {
  Fixture f;
  UrlScheme& urls = f.urls;
  ResourceRecord meta = record("http://up.example.org/c.meta", "metadata");
  meta.links = {rs::Link{.rel = "describes", .href = "http://up.example.org/c"}};
  auto feeds = *f.st.feeds();
  store::Batch b;
  b.feed_id = feeds[0].feed_id;
  b.upserts = {meta};
  REQUIRE(f.st.apply(b));
  auto parts = render_resource_list(f.st, urls, f.set, ts("2026-01-03T00:00:00Z"));
  REQUIRE(parts);
  auto rl = parse_valid(parts->at(0).xml);
  bool checked = false;
  for (const auto& e : rl.document.entries) {
    if (e.loc == urls.resource("up", "http://up.example.org/c")) {
      // c.meta is held now: c's describedby points at our copy of it.
      REQUIRE(e.find_link("describedby"));
      CHECK(e.find_link("describedby")->href == urls.resource("up", "http://up.example.org/c.meta"));
      checked = true;
    }
    if (e.loc == urls.resource("up", "http://up.example.org/c.meta")) {
      CHECK(e.find_link("describes")->href == urls.resource("up", "http://up.example.org/c"));
    }
  }
  CHECK(checked);
}

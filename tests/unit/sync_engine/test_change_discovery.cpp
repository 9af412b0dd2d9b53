// IIIF Change Discovery 1.0 pages as streams publish them (#36): links as
// objects ({id, type}) or plain strings, objects of type Manifest and
// Collection, a Move's target, and what goes wrong: an unknown activity
// type, an endTime that does not parse, an activity without an object.
#include "sync_engine/iiif/change_discovery.h"

#include <doctest/doctest.h>

using namespace tributary;
using namespace tributary::sync::iiif;

TEST_CASE("Change Discovery: a collection names its first and last pages, as objects or as strings") {
  auto c = parse_collection(R"({"@context": "http://iiif.io/api/discovery/1/context.json",
    "id": "https://example.org/activity/all-changes", "type": "OrderedCollection", "totalItems": 21456,
    "first": {"id": "https://example.org/activity/page-0", "type": "OrderedCollectionPage"},
    "last": {"id": "https://example.org/activity/page-214", "type": "OrderedCollectionPage"}})");
  REQUIRE(c);
  CHECK(c->first == "https://example.org/activity/page-0");
  CHECK(c->last == "https://example.org/activity/page-214");
  CHECK(c->total_items == 21456u);
  auto plain = parse_collection(R"({"type": "OrderedCollection", "last": "https://e.org/p/9"})");
  REQUIRE(plain);
  CHECK(plain->last == "https://e.org/p/9");
  CHECK_FALSE(parse_collection(R"({"type": "Manifest", "last": "x"})"));
  CHECK_FALSE(parse_collection(R"({"type": "OrderedCollection"})"));
  CHECK_FALSE(parse_collection("<html/>"));
}

TEST_CASE("Change Discovery: a page's activities in stream order, what cannot be used costs that activity alone") {
  auto p = parse_page(R"({"@context": "http://iiif.io/api/discovery/1/context.json",
    "id": "https://example.org/activity/page-1", "type": "OrderedCollectionPage", "startIndex": 20,
    "partOf": {"id": "https://example.org/activity/all-changes", "type": "OrderedCollection"},
    "prev": {"id": "https://example.org/activity/page-0", "type": "OrderedCollectionPage"},
    "next": "https://example.org/activity/page-2",
    "orderedItems": [
      {"id": "https://example.org/activity/1", "type": "Update",
       "object": {"id": "https://example.org/iiif/1/manifest", "type": "Manifest"}, "endTime": "2017-09-20T00:00:00Z"},
      {"type": "Move", "object": {"id": "https://example.org/iiif/2/manifest", "type": "Manifest"},
       "target": {"id": "https://example.org/iiif/3/manifest", "type": "Manifest"}, "endTime": "2017-09-21T00:00:00Z"},
      {"type": "Like", "object": {"id": "https://example.org/iiif/4/manifest"}, "endTime": "2017-09-22T00:00:00Z"},
      {"type": "Delete", "object": {"id": "https://example.org/iiif/5/manifest"}, "endTime": "yesterday"},
      {"type": "Create", "endTime": "2017-09-23T00:00:00Z"},
      {"type": "Refresh", "endTime": "2017-09-24T00:00:00Z"},
      {"type": "Create", "object": {"id": "https://example.org/iiif/coll", "type": "Collection"}}
    ]})");
  REQUIRE(p);
  CHECK(p->prev == "https://example.org/activity/page-0");
  CHECK(p->next == "https://example.org/activity/page-2");
  CHECK(p->start_index == 20u);
  REQUIRE(p->items.size() == 4);
  CHECK(p->items[0].type == "Update");
  CHECK(p->items[0].object == "https://example.org/iiif/1/manifest");
  CHECK(rs::format_w3c_datetime(*p->items[0].end_time) == "2017-09-20T00:00:00Z");
  CHECK(p->items[1].type == "Move");
  CHECK(p->items[1].target == "https://example.org/iiif/3/manifest");
  CHECK(p->items[2].type == "Refresh");
  CHECK(p->items[3].object_type == "Collection");
  CHECK_FALSE(p->items[3].end_time); // Level 0
  REQUIRE(p->warnings.size() == 3);
  CHECK(p->warnings[0].find("'Like'") != std::string::npos);
  CHECK(p->warnings[1].find("'yesterday'") != std::string::npos);
  CHECK(p->warnings[2].find("no object") != std::string::npos);
  CHECK_FALSE(parse_page(R"({"type": "OrderedCollection"})"));
}

#include "republisher/url_scheme.h"

#include <doctest/doctest.h>

#include <vector>

using namespace tributary;
using pub::RouteKind;

namespace {

struct Case {
  std::string url;
  RouteKind kind;
  std::string set;
  std::string part;
};

// Every kind of URL our documents publish, built by UrlScheme itself.
std::vector<Case> every_kind(const pub::UrlScheme& u) {
  return {
      {u.source_description(), RouteKind::source_description, "", ""},
      {u.hub(), RouteKind::hub, "", ""},
      {u.oai(), RouteKind::oai, "", ""},
      {u.api_catalog(), RouteKind::api_catalog, "", ""},
      {u.activity_collection(""), RouteKind::activity_collection, "", ""},
      {u.activity_page("", 41), RouteKind::activity_page, "", "41"},
      {u.activity_collection("arxiv"), RouteKind::activity_collection, "arxiv", ""},
      {u.activity_page("arxiv", 2), RouteKind::activity_page, "arxiv", "2"},
      {u.capability_list("arxiv"), RouteKind::capability_list, "arxiv", ""},
      {u.resource_list("arxiv"), RouteKind::resource_list, "arxiv", ""},
      {u.resource_list_part("arxiv", 3), RouteKind::resource_list_part, "arxiv", "3"},
      {u.change_list("arxiv"), RouteKind::change_list, "arxiv", ""},
      {u.change_list_part("arxiv", 12), RouteKind::change_list_part, "arxiv", "12"},
      {u.change_list_index("arxiv"), RouteKind::change_list_index, "arxiv", ""},
      {u.resource_dump("arxiv-2"), RouteKind::resource_dump, "arxiv-2", ""},
      {u.resource_dump_package("arxiv-2", "20261127T101500Z", 4), RouteKind::resource_dump_package, "arxiv-2",
       "20261127T101500Z/4"},
      {u.change_dump("arxiv"), RouteKind::change_dump, "arxiv", ""},
      {u.change_dump_package("arxiv", 7), RouteKind::change_dump_package, "arxiv", "7"},
      {u.change_dump_manifest("arxiv", 7), RouteKind::change_dump_manifest, "arxiv", "7"},
      {u.change_list_archive("arxiv"), RouteKind::change_list_archive, "arxiv", ""},
      {u.resource_list_archive("arxiv"), RouteKind::resource_list_archive, "arxiv", ""},
      {u.change_dump_archive("arxiv"), RouteKind::change_dump_archive, "arxiv", ""},
      {u.archived_change_dump("arxiv", 2), RouteKind::archived_change_dump, "arxiv", "2"},
      {u.archived_resource_list("arxiv", "s5"), RouteKind::archived_resource_list, "arxiv", "s5"},
      {u.archived_resource_list_part("arxiv", "s5", 9), RouteKind::archived_resource_list_part, "arxiv", "s5/9"},
      {u.change_notification("arxiv"), RouteKind::change_notification, "arxiv", ""},
      {u.framework_notification("arxiv"), RouteKind::framework_notification, "arxiv", ""},
      {u.resource("arxiv", "http://arxiv.org/abs/2401.00001v2?x=1&y=%41"), RouteKind::resource, "arxiv",
       "http://arxiv.org/abs/2401.00001v2?x=1&y=%41"},
      // A resource's URI may hold the words of our other paths.
      {u.resource("arxiv", "http://e.org/sets/x/changedump/1.zip"), RouteKind::resource, "arxiv",
       "http://e.org/sets/x/changedump/1.zip"},
      {u.resource("arxiv", "http://e.org/changelist-3.xml"), RouteKind::resource, "arxiv",
       "http://e.org/changelist-3.xml"},
  };
}

} // namespace

TEST_CASE("UrlScheme::route: every URL kind our documents publish is routed back to its kind, set and part") {
  for (const std::string base : {"http://127.0.0.1:8080", "https://agg.example.org/mirror/"}) {
    const pub::UrlScheme u(base);
    for (const auto& c : every_kind(u)) {
      CAPTURE(c.url);
      const pub::Route r = u.route(u.path_of(c.url));
      CHECK(pub::route_kind_name(r.kind) == pub::route_kind_name(c.kind));
      CHECK(r.set == c.set);
      CHECK(r.part == c.part);
    }
    CHECK(u.route("/robots.txt").kind == RouteKind::robots);
  }
}

TEST_CASE("UrlScheme::route: paths that are not ours") {
  const pub::UrlScheme u("https://agg.example.org/mirror");
  // Outside the base path.
  CHECK(u.route("/sets/arxiv/changelist.xml").kind == RouteKind::unknown);
  CHECK(u.route("/mirror/other/sets/arxiv/resources/x").kind == RouteKind::unknown);
  // Under a set, but no document of ours: the set is still named (a
  // removed set answers 410 for any path under it).
  const auto r = u.route("/mirror/sets/gone/changelist-x.xml");
  CHECK(r.kind == RouteKind::unknown);
  CHECK(r.set == "gone");
  CHECK(u.route("/mirror/sets/arxiv/changedump/7.tar").kind == RouteKind::unknown);
  CHECK(u.route("/mirror/sets/arxiv/resourcedump/4.zip").kind == RouteKind::unknown);
  CHECK(u.route("/mirror/sets/arxiv/archive/s5/other.xml").kind == RouteKind::unknown);
  CHECK(u.route("/mirror/sets/arxiv/resources/").kind == RouteKind::unknown);
  CHECK(u.route("/mirror/sets//changelist.xml").kind == RouteKind::unknown);
  CHECK(u.route("/mirror/sets/arxiv/changelist-.xml").kind == RouteKind::unknown);
  CHECK(u.route("/mirror/sets/a%zz/changelist.xml").kind == RouteKind::malformed);
  // The decoded path is what the document cache is keyed by.
  CHECK(u.route("/mirror/sets/a%2Db/changelist.xml").path == "/mirror/sets/a-b/changelist.xml");
  CHECK(u.route("/mirror/sets/a%2Db/changelist.xml").set == "a-b");
}

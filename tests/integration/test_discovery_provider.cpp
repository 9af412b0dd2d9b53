// Our IIIF Change Discovery face (#52), over real HTTP and PostgreSQL: a
// daemon follows two OAI-PMH repositories (oai_endpoint.h) with Change List
// parts of four changes. Its streams hold the Change Lists' history (same
// changes, same times), closed pages never change, a harvester walking
// `last` back by `prev` as Yale's LUX does stops at the right page and ends
// holding what we hold, and Tributaries following a set's stream and the
// stream of everything (kind iiif-discovery) end with our bytes.
#include "daemon_client.h"
#include "http_get.h"
#include "oai_endpoint.h"

#include "common/percent.h"
#include "resourcesync/datetime.h"

#include <map>
#include <regex>
#include <set>
#include <sstream>

using namespace tributary;
using namespace tributary::test;

namespace {

json get_json(const std::string& url) {
  Got g = http_get(url);
  REQUIRE(g.status == 200);
  const auto type = g.headers.find("Content-Type");
  CHECK((type != g.headers.end() && type->second.rfind("application/ld+json", 0) == 0));
  return json::parse(g.body);
}

rs::Timestamp time_of(const json& activity) {
  auto t = rs::parse_w3c_datetime(activity.at("endTime").get<std::string>());
  REQUIRE(t);
  return *t;
}

// A harvester as LUX runs one: from `last` back by `prev`, newest first,
// the newest activity of each object deciding it, stopping after the first
// page that holds an activity older than `since` (its previous harvest's
// newest endTime). Activities at `since` are read again (applying one again
// is a no-op).
struct Walker {
  std::map<std::string, bool> live; // object id -> live?
  std::optional<rs::Timestamp> since;
  int pages = 0; // read by the last walk

  void walk(const std::string& collection) {
    const json c = get_json(collection);
    CHECK(c.at("type") == "OrderedCollection");
    std::string url = c.at("last").at("id");
    std::set<std::string> decided;
    std::optional<rs::Timestamp> newest;
    pages = 0;
    while (!url.empty()) {
      const json page = get_json(url);
      ++pages;
      CHECK(page.at("type") == "OrderedCollectionPage");
      const json& items = page.at("orderedItems");
      bool older = false;
      for (auto it = items.rbegin(); it != items.rend(); ++it) {
        const rs::Timestamp t = time_of(*it);
        if (since && t < *since) {
          older = true;
          continue;
        }
        newest = newest ? std::max(*newest, t) : t;
        const std::string id = it->at("object").at("id");
        if (decided.insert(id).second) {
          live[id] = it->at("type") != "Delete";
        }
      }
      if (older) {
        break;
      }
      url = page.contains("prev") ? page["prev"]["id"].get<std::string>() : std::string();
    }
    if (newest) {
      since = newest;
    }
  }

  std::set<std::string> live_ids() const {
    std::set<std::string> out;
    for (const auto& [id, on] : live) {
      if (on) {
        out.insert(id);
      }
    }
    return out;
  }
};

// Our copies of what `d` holds live, as URLs.
std::set<std::string> held_live(const TestDaemon& d) {
  const std::string rows =
      scalar(d, "SELECT string_agg(s.name || ' ' || r.uri, E'\\n') FROM resource r JOIN feed f ON f.id = r.feed_id "
                "JOIN source s ON s.id = f.source_id WHERE r.state = 'live'");
  std::set<std::string> out;
  std::istringstream in(rows);
  for (std::string line; std::getline(in, line);) {
    const size_t sp = line.find(' ');
    out.insert(d.base + "/sets/" + line.substr(0, sp) + "/resources/" + percent_encode(line.substr(sp + 1)));
  }
  return out;
}

std::string digests(const TestDaemon& d) {
  return scalar(d, "SELECT string_agg(sha256, ',' ORDER BY sha256) FROM resource WHERE state = 'live'");
}

// The datetimes of a Change List's entries, in order.
std::vector<std::string> change_times(const std::string& url) {
  const std::string body = http_get(url).body;
  static const std::regex md("<rs:md [^>]*datetime=\"([^\"]+)\"");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(body.begin(), body.end(), md); it != std::sregex_iterator(); ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

} // namespace

TEST_CASE("IIIF Change Discovery provider: a set's stream is its Change List's history, closed pages never change, "
          "a walker from last by prev misses nothing, and Tributaries following a set's stream and everything end "
          "with our bytes") {
  OaiEndpoint one, two;
  for (int i = 1; i <= 7; ++i) {
    one.put("oai:one:" + std::to_string(i), "One " + std::to_string(i));
  }
  for (int i = 1; i <= 3; ++i) {
    two.put("oai:two:" + std::to_string(i), "Two " + std::to_string(i));
  }
  TestDaemon a({});
  edit_config(a, [&](json& j) {
    j["change_list_part_size"] = 4;
    j["sources"] = json::array({{{"name", "one"}, {"url", one.base()}, {"kind", "oai-pmh"}, {"interval", "1s"}},
                                {{"name", "two"}, {"url", two.base()}, {"kind", "oai-pmh"}, {"interval", "1s"}}});
  });
  a.start();
  REQUIRE(wait_for(a.base, [](const json& st) { return in_sync(st, "one", 7) && in_sync(st, "two", 3); }, 30));
  const std::string set = a.base + "/sets/one/activity/";
  // Seven creations in parts of four: page 1 closed, page 2 open.
  REQUIRE(eventually([&] { return http_get(a.base + "/sets/one/changelist-1.xml").status == 200; }, 15));
  const json c = get_json(set + "collection.json");
  CHECK(c.at("@context") == "http://iiif.io/api/discovery/1/context.json");
  CHECK(c.at("first").at("id") == set + "page-1.json");
  CHECK(c.at("last").at("id") == set + "page-2.json");
  const json p1 = get_json(set + "page-1.json");
  CHECK(p1.at("orderedItems").size() == 4);
  CHECK(p1.at("next").at("id") == set + "page-2.json");
  CHECK(!p1.contains("prev"));
  const json p2 = get_json(set + "page-2.json");
  CHECK(p2.at("orderedItems").size() == 3);
  CHECK(!p2.contains("next"));
  CHECK(p2.at("prev").at("id") == set + "page-1.json");
  CHECK(http_get(set + "page-3.json").status == 404);
  CHECK(http_get(set + "page-0.json").status == 404);
  CHECK(http_get(a.base + "/sets/none/activity/collection.json").status == 404);
  // The same history as the Change List: each page's endTimes are its
  // part's datetimes.
  std::vector<std::string> times;
  for (const auto& item : p1.at("orderedItems")) {
    CHECK(item.at("type") == "Create");
    CHECK(item.at("object").at("type") == "Document");
    CHECK(item.at("object").at("id").get<std::string>().rfind(a.base + "/sets/one/resources/", 0) == 0);
    times.push_back(item.at("endTime"));
  }
  CHECK(times == change_times(a.base + "/sets/one/changelist-1.xml"));
  const std::string closed_bytes = http_get(set + "page-1.json").body;

  Walker lux;
  lux.walk(set + "collection.json");
  std::set<std::string> want;
  for (const auto& u : held_live(a)) {
    if (u.find("/sets/one/") != std::string::npos) {
      want.insert(u);
    }
  }
  CHECK(lux.live_ids() == want);
  CHECK(lux.pages == 2);

  // Changes: one new, one revised, one deleted; then enough to close
  // page 2 and open page 3.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  one.put("oai:one:8", "One 8");
  one.put("oai:one:2", "One 2, revised");
  one.remove("oai:one:3");
  two.put("oai:two:4", "Two 4");
  REQUIRE(eventually([&] { return scalar(a, "SELECT count(*) FROM change_log") == "14"; }, 30));
  REQUIRE(eventually([&] { return http_get(set + "page-3.json").status == 200; }, 15));
  CHECK(http_get(set + "page-1.json").body == closed_bytes); // closed: never changes
  const json p2_closed = get_json(set + "page-2.json");
  CHECK(p2_closed.at("orderedItems").size() == 4);
  CHECK(p2_closed.at("next").at("id") == set + "page-3.json");
  lux.walk(set + "collection.json");
  CHECK(lux.pages == 2); // page 3, then page 2: it holds what is older than the last walk
  want.clear();
  for (const auto& u : held_live(a)) {
    if (u.find("/sets/one/") != std::string::npos) {
      want.insert(u);
    }
  }
  CHECK(lux.live_ids() == want);
  CHECK(lux.live.size() == 8); // and the deletion was heard
  // The three changes: the last item of page 2, then page 3.
  std::multiset<std::string> kinds{p2_closed.at("orderedItems").back().at("type").get<std::string>()};
  const json p3 = get_json(set + "page-3.json");
  for (const auto& item : p3.at("orderedItems")) {
    kinds.insert(item.at("type").get<std::string>());
  }
  CHECK(kinds == std::multiset<std::string>{"Create", "Delete", "Update"});

  // The stream of everything: both sources, in log order, pages by seq.
  const json all = get_json(a.base + "/activity/collection.json");
  CHECK(all.at("first").at("id") == a.base + "/activity/page-1.json");
  Walker everything;
  everything.walk(a.base + "/activity/collection.json");
  CHECK(everything.live_ids() == held_live(a));
  const json catalog = json::parse(http_get(a.base + "/.well-known/api-catalog").body);
  std::set<std::string> listed;
  for (const auto& item : catalog.at("linkset").at(0).at("item")) {
    listed.insert(item.at("href"));
  }
  CHECK(listed.count(a.base + "/activity/collection.json") == 1);
  CHECK(listed.count(a.base + "/sets/one/activity/collection.json") == 1);

  // B follows the set's stream, C the stream of everything (kind
  // iiif-discovery): each ends with our bytes, through a change.
  TestDaemon b({}), c2({});
  edit_config(b, [&](json& j) {
    j["sources"] = json::array(
        {{{"name", "a"}, {"url", set + "collection.json"}, {"kind", "iiif-discovery"}, {"interval", "1s"}}});
  });
  edit_config(c2, [&](json& j) {
    j["sources"] = json::array({{{"name", "all"},
                                 {"url", a.base + "/activity/collection.json"},
                                 {"kind", "iiif-discovery"},
                                 {"interval", "1s"}}});
  });
  b.start();
  c2.start();
  const auto digests_of_set = [&](const std::string& name) {
    return scalar(a, "SELECT string_agg(r.sha256, ',' ORDER BY r.sha256) FROM resource r JOIN feed f ON f.id = "
                     "r.feed_id JOIN source s ON s.id = f.source_id WHERE r.state = 'live' AND s.name = '" +
                         name + "'");
  };
  CHECK(eventually([&] { return digests(b) == digests_of_set("one"); }, 30));
  CHECK(eventually([&] { return digests(c2) == digests(a); }, 30));
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  one.put("oai:one:9", "One 9");
  one.remove("oai:one:4");
  two.remove("oai:two:1");
  REQUIRE(eventually([&] { return scalar(a, "SELECT count(*) FROM change_log") == "17"; }, 30));
  CHECK(eventually([&] { return digests(b) == digests_of_set("one"); }, 30));
  CHECK(eventually([&] { return digests(c2) == digests(a); }, 30));
  CHECK(scalar(c2, "SELECT count(*) FROM resource WHERE state = 'live'") ==
        scalar(a, "SELECT count(*) FROM resource WHERE state = 'live'"));
}

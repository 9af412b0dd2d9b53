// Issue #36: an IIIF Change Discovery 1.0 stream followed as a Source, over
// real HTTP and PostgreSQL, against a test stream shaped like the
// Rijksmuseum's and the Bodleian's (an OrderedCollection naming its first
// and last pages, OrderedCollectionPages of activities with endTime, prev
// and next, startIndex, objects as {id, type: Manifest}), serving the
// Manifests the activities name. Our republished Resource List ends equal to
// the stream's live objects, and a second Tributary following ours ends
// equal as well.
#include "daemon_client.h"
#include "http_get.h"

#include <mutex>
#include <regex>
#include <set>

using namespace tributary;
using namespace tributary::test;

namespace {

class Stream {
public:
  struct Activity {
    std::string type;
    std::string object; // a name: /manifest/<name>.json
    std::string target; // Move
  };
  size_t page_size = 3;
  bool level0 = false;
  std::function<void()> on_first_page; // called when page 0 is read

  Stream() : m_running(setup()) {}
  std::string base() const { return m_running.base(); }
  std::string url(const std::string& name) const { return base() + "/manifest/" + name + ".json"; }
  void add(Activity a) {
    std::lock_guard lock(m_mutex);
    m_items.push_back(std::move(a));
  }
  // A Manifest's content changes with its version.
  void revise(const std::string& name) {
    std::lock_guard lock(m_mutex);
    ++m_version[name];
  }

private:
  httplib::Server& setup() {
    m_server.Get("/collection.json", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard lock(m_mutex);
      const size_t pages = std::max<size_t>(1, (m_items.size() + page_size - 1) / page_size);
      json c{{"@context", "http://iiif.io/api/discovery/1/context.json"},
             {"id", base() + "/collection.json"},
             {"type", "OrderedCollection"},
             {"totalItems", m_items.size()},
             {"first", {{"id", base() + "/page/0.json"}, {"type", "OrderedCollectionPage"}}},
             {"last", {{"id", base() + "/page/" + std::to_string(pages - 1) + ".json"}, {"type", "OrderedCollectionPage"}}}};
      res.set_content(c.dump(), "application/ld+json");
    });
    m_server.Get(R"(/page/(\d+)\.json)", [this](const httplib::Request& req, httplib::Response& res) {
      const size_t i = std::stoul(req.matches[1]);
      if (i == 0 && on_first_page) {
        on_first_page();
      }
      std::lock_guard lock(m_mutex);
      const size_t pages = std::max<size_t>(1, (m_items.size() + page_size - 1) / page_size);
      if (i >= pages) {
        res.status = 404;
        return;
      }
      json items = json::array();
      for (size_t k = i * page_size; k < std::min(m_items.size(), (i + 1) * page_size); ++k) {
        const Activity& a = m_items[k];
        json item{{"id", base() + "/activity/" + std::to_string(k)}, {"type", a.type}};
        if (!a.object.empty()) {
          item["object"] = {{"id", url(a.object)}, {"type", "Manifest"}};
        }
        if (!a.target.empty()) {
          item["target"] = {{"id", url(a.target)}, {"type", "Manifest"}};
        }
        if (!level0) {
          char t[64];
          std::snprintf(t, sizeof t, "2026-01-01T%02zu:%02zu:%02zuZ", (k / 3600) % 24, k / 60 % 60, k % 60);
          item["endTime"] = t;
        }
        items.push_back(item);
      }
      json p{{"@context", "http://iiif.io/api/discovery/1/context.json"},
             {"id", base() + "/page/" + std::to_string(i) + ".json"},
             {"type", "OrderedCollectionPage"},
             {"startIndex", i * page_size},
             {"partOf", {{"id", base() + "/collection.json"}, {"type", "OrderedCollection"}}},
             {"orderedItems", items}};
      if (i > 0) {
        p["prev"] = {{"id", base() + "/page/" + std::to_string(i - 1) + ".json"}, {"type", "OrderedCollectionPage"}};
      }
      if (i + 1 < pages) {
        p["next"] = {{"id", base() + "/page/" + std::to_string(i + 1) + ".json"}, {"type", "OrderedCollectionPage"}};
      }
      res.set_content(p.dump(), "application/ld+json");
    });
    m_server.Get(R"(/manifest/([a-z0-9]+)\.json)", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(m_mutex);
      const std::string name = req.matches[1];
      json m{{"@context", "http://iiif.io/api/presentation/3/context.json"},
             {"id", url(name)},
             {"type", "Manifest"},
             {"label", {{"en", {"Object " + name + ", version " + std::to_string(m_version[name])}}}},
             {"items", json::array()}};
      res.set_content(m.dump(), "application/ld+json");
    });
    return m_server;
  }

  httplib::Server m_server;
  std::mutex m_mutex;
  std::vector<Activity> m_items;
  std::map<std::string, int> m_version;
  ServerThread m_running;
};

std::set<std::string> vias(const std::string& list_url) {
  const std::string body = http_get(list_url).body;
  static const std::regex via("<rs:ln rel=\"via\" href=\"([^\"]*)\"");
  std::set<std::string> out;
  for (auto it = std::sregex_iterator(body.begin(), body.end(), via); it != std::sregex_iterator(); ++it) {
    out.insert((*it)[1]);
  }
  return out;
}

void follow(TestDaemon& d, const Stream& s) {
  edit_config(d, [&](json& j) {
    j["sources"] = json::array(
        {{{"name", "iiif"}, {"url", s.base() + "/collection.json"}, {"kind", "iiif-discovery"}, {"interval", "1s"}}});
  });
}

} // namespace

TEST_CASE("IIIF Change Discovery source: activities of every type, a stream growing while it is read, a Refresh, "
          "and a second Tributary following ours ends equal") {
  Stream s;
  s.add({"Create", "m1", ""});
  s.add({"Create", "m2", ""});
  s.add({"Create", "m3", ""});
  s.revise("m1");
  s.add({"Update", "m1", ""});
  s.add({"Add", "m4", ""});
  s.add({"Remove", "m2", ""});
  s.add({"Move", "m3", "m5"});
  s.add({"Delete", "m4", ""});
  // While the oldest page is read (last of the walk back), the stream grows.
  bool grown = false;
  s.on_first_page = [&] {
    if (!grown) {
      grown = true;
      s.add({"Create", "m6", ""});
      s.revise("m5");
      s.add({"Update", "m5", ""});
    }
  };
  TestDaemon a({});
  follow(a, s);
  a.start();
  const std::string list = a.base + "/sets/iiif/resourcelist.xml";
  CHECK(eventually([&] { return vias(list) == std::set<std::string>{s.url("m1"), s.url("m5"), s.url("m6")}; }, 30));
  CHECK(scalar(a, "SELECT kind FROM source WHERE name = 'iiif'") == "iiif-discovery");
  // The content is the Manifest as the activity's object serves it now.
  const std::string m1 = scalar(a, "SELECT blob_sha256 FROM resource WHERE uri = '" + s.url("m1") + "'");
  REQUIRE(!m1.empty());
  // Read from the start, objects gone before we read them were never held:
  // nothing to delete, nothing logged.
  CHECK(scalar(a, "SELECT count(*) FROM change_log WHERE uri IN ('" + s.url("m3") + "', '" + s.url("m4") + "')") ==
        "0");
  CHECK(scalar(a, "SELECT count(*) FROM resource WHERE state = 'live'") == "3");

  // A Refresh, then the regenerated listing (m1, m5), then a deletion: m6,
  // not listed since the Refresh and deleted after it, goes.
  s.add({"Refresh", "", ""});
  s.add({"Create", "m1", ""});
  s.add({"Create", "m5", ""});
  s.add({"Delete", "m6", ""});
  CHECK(eventually([&] { return vias(list) == std::set<std::string>{s.url("m1"), s.url("m5")}; }, 30));
  CHECK(eventually([&] { return scalar(a, "SELECT count(*) FROM resource WHERE state = 'live'") == "2"; }, 10));
  CHECK(scalar(a, "SELECT count(*) FROM change_log WHERE uri = '" + s.url("m6") + "' AND change = 'deleted'") == "1");

  TestDaemon b({{"a", a.base + "/.well-known/resourcesync"}});
  b.start();
  REQUIRE(wait_for(b.base, [](const json& st) { return in_sync(st, "a", 2); }, 30));
  // B's own Resource List is written after its run: eventually.
  CHECK(eventually([&] { return vias(b.base + "/sets/a/resourcelist.xml") == vias(list); }, 15));

  // The stream's types go through: kept as a Signposting type link, and
  // our own Change Discovery stream says Manifest again.
  CHECK(scalar(a, "SELECT links::text FROM resource WHERE uri = '" + s.url("m1") + "'")
            .find("http://iiif.io/api/presentation/3#Manifest") != std::string::npos);
  const std::string ours = http_get(a.base + "/sets/iiif/activity/page-1.json").body;
  CHECK(ours.find("\"type\":\"Manifest\"") != std::string::npos);
  CHECK(ours.find("\"type\":\"Document\"") == std::string::npos);
}

TEST_CASE("IIIF Change Discovery source: a Level 0 stream (no endTime) is read as a full listing") {
  Stream s;
  s.level0 = true;
  s.add({"Create", "a1", ""});
  s.add({"Create", "a2", ""});
  s.add({"Create", "a3", ""});
  s.add({"Delete", "a1", ""});
  TestDaemon a({});
  follow(a, s);
  a.start();
  const std::string list = a.base + "/sets/iiif/resourcelist.xml";
  CHECK(eventually([&] { return vias(list) == std::set<std::string>{s.url("a2"), s.url("a3")}; }, 30));
  // The listing changes: what it no longer lists goes.
  s.add({"Delete", "a3", ""});
  s.add({"Create", "a4", ""});
  CHECK(eventually([&] { return vias(list) == std::set<std::string>{s.url("a2"), s.url("a4")}; }, 30));
  CHECK(a.log_text().find("a Level 0 stream") != std::string::npos);
  TestDaemon b({{"a", a.base + "/.well-known/resourcesync"}});
  b.start();
  REQUIRE(wait_for(b.base, [](const json& st) { return in_sync(st, "a", 2); }, 30));
  // B's own Resource List is written after its run: eventually.
  CHECK(eventually([&] { return vias(b.base + "/sets/a/resourcelist.xml") == vias(list); }, 15));
}

TEST_CASE("IIIF Change Discovery source: read from its start, a stream's Refresh stands for everything before it: "
          "older creations are not fetched, only the listing after it") {
  Stream s;
  s.add({"Create", "z1", ""}); // before the Refresh, and not listed after it
  s.add({"Create", "z2", ""});
  s.add({"Refresh", "", ""});
  s.add({"Create", "z2", ""});
  s.add({"Create", "z3", ""});
  TestDaemon a({});
  follow(a, s);
  a.start();
  const std::string list = a.base + "/sets/iiif/resourcelist.xml";
  CHECK(eventually([&] { return vias(list) == std::set<std::string>{s.url("z2"), s.url("z3")}; }, 30));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  CHECK(scalar(a, "SELECT count(*) FROM resource WHERE uri = '" + s.url("z1") + "'") == "0");
  TestDaemon b({{"a", a.base + "/.well-known/resourcesync"}});
  b.start();
  REQUIRE(wait_for(b.base, [](const json& st) { return in_sync(st, "a", 2); }, 30));
  // B's own Resource List is written after its run: eventually.
  CHECK(eventually([&] { return vias(b.base + "/sets/a/resourcelist.xml") == vias(list); }, 15));
}

TEST_CASE("IIIF Change Discovery: tributary explore --kind iiif-discovery shows pages, activities by type and the "
          "time span") {
  Stream s;
  s.add({"Create", "e1", ""});
  s.add({"Create", "e2", ""});
  s.add({"Update", "e1", ""});
  s.add({"Delete", "e2", ""});
  s.add({"Move", "e1", "e3"});
  auto r = run_tributary("explore --kind iiif-discovery --json " + s.base() + "/collection.json");
  INFO(r.out);
  CHECK(r.status == 0);
  const json j = json::parse(r.out);
  CHECK(j["pages_read"] == 2);
  CHECK(j["activities"] == 5);
  CHECK(j["by_type"]["Create"] == 2);
  CHECK(j["by_type"]["Move"] == 1);
  CHECK(j["objects"] == 2);
  CHECK(j["earliest"] == "2026-01-01T00:00:00Z");
  CHECK(j["latest"] == "2026-01-01T00:00:04Z");
  CHECK(j["level0"] == false);
}

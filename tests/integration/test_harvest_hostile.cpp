// Issue #50: OAI-PMH repositories and IIIF streams that misbehave, over real
// HTTP, against a daemon run as a new user would run it: a page of 60 MB,
// resumption tokens that loop, lists that never end, an outage, an
// earliestDatestamp of 0001, a page full of characters XML forbids, and a
// Change Discovery stream of 30 pages of 20,000 activities and one of 30 MB.
// Each bound holds, says why it stopped, and the daemon keeps running.
#include "daemon_client.h"
#include "http_get.h"

#include "../support/hostile.h"

#include "resourcesync/datetime.h"

#include <httplib.h>

#include <atomic>
#include <mutex>
#include <set>

using namespace tributary;
using namespace tributary::test;

namespace {

// A repository whose ListRecords answers are written by each test.
struct HostileOai {
  std::string earliest; // Identify's earliestDatestamp; empty: none
  std::function<std::string(const httplib::Request&)> list;       // ListRecords, by request
  std::function<std::string(const httplib::Request&)> identifiers; // ListIdentifiers; empty: as `list`
  std::atomic<int> unavailable_until_ms{0}; // steady-clock ms before which every answer is 503
  std::atomic<int> list_requests{0};
  std::mutex mutex;
  std::vector<std::pair<std::string, std::string>> windows; // (from, until) of first pages

  httplib::Server server;
  ServerThread running{setup()};

  std::string base() const { return running.base() + "/oai"; }

  static std::string envelope(const std::string& inner) {
    return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
           "<OAI-PMH xmlns=\"http://www.openarchives.org/OAI/2.0/\">"
           "<responseDate>2026-11-27T10:00:00Z</responseDate><request>x</request>" +
           inner + "</OAI-PMH>\n";
  }
  static std::string record(const std::string& id, const std::string& stamp, const std::string& text) {
    return "<record><header><identifier>" + id + "</identifier><datestamp>" + stamp +
           "</datestamp></header><metadata><oai_dc:dc xmlns:oai_dc=\"http://www.openarchives.org/OAI/2.0/oai_dc/\" "
           "xmlns:dc=\"http://purl.org/dc/elements/1.1/\"><dc:title>" +
           id + "</dc:title><dc:description>" + text + "</dc:description></oai_dc:dc></metadata></record>";
  }
  static std::string token(const std::string& t, const std::string& size = "") {
    return "<resumptionToken" + (size.empty() ? std::string() : " completeListSize=\"" + size + "\"") + ">" + t +
           "</resumptionToken>";
  }
  static int now_ms() {
    return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::steady_clock::now().time_since_epoch())
                                .count());
  }

  httplib::Server& setup() {
    server.Get("/oai", [this](const httplib::Request& req, httplib::Response& res) {
      if (now_ms() < unavailable_until_ms.load()) {
        res.status = 503;
        res.set_content("down for maintenance", "text/plain");
        return;
      }
      const std::string verb = req.get_param_value("verb");
      std::string body;
      if (verb == "Identify") {
        body = envelope("<Identify><repositoryName>Hostile</repositoryName><baseURL>" + base() +
                        "</baseURL><protocolVersion>2.0</protocolVersion><adminEmail>a@example.org</adminEmail>" +
                        (earliest.empty() ? "" : "<earliestDatestamp>" + earliest + "</earliestDatestamp>") +
                        "<deletedRecord>persistent</deletedRecord><granularity>YYYY-MM-DDThh:mm:ssZ</granularity>"
                        "</Identify>");
      } else if (verb == "ListMetadataFormats") {
        body = envelope("<ListMetadataFormats><metadataFormat><metadataPrefix>oai_dc</metadataPrefix><schema>"
                        "http://www.openarchives.org/OAI/2.0/oai_dc.xsd</schema><metadataNamespace>"
                        "http://www.openarchives.org/OAI/2.0/oai_dc/</metadataNamespace></metadataFormat>"
                        "</ListMetadataFormats>");
      } else if (verb == "ListRecords" || verb == "ListIdentifiers") {
        if (verb == "ListRecords") {
          ++list_requests;
          if (!req.has_param("resumptionToken")) {
            std::lock_guard lock(mutex);
            windows.emplace_back(req.get_param_value("from"), req.get_param_value("until"));
          }
        }
        body = verb == "ListIdentifiers" && identifiers ? identifiers(req) : list(req);
      } else {
        body = envelope("<error code=\"badVerb\">no</error>");
      }
      res.set_content(body, "text/xml");
    });
    return server;
  }
};

// A daemon following `ep` as the source "oai" (default config otherwise).
void follow(TestDaemon& d, const HostileOai& ep) {
  edit_config(d, [&](json& j) {
    j["sources"] = json::array({{{"name", "oai"}, {"url", ep.base()}, {"kind", "oai-pmh"}, {"interval", "1s"}}});
  });
}

std::string last_failure(const TestDaemon& d) {
  const json st = status_of(d.base);
  const json* s = find_source(st, "oai");
  return s && (*s).contains("last_failure") && (*s)["last_failure"].is_object()
             ? (*s)["last_failure"].value("error", "")
             : "";
}

} // namespace

TEST_CASE("OAI hostile: a 60 MB page is read record by record: the daemon's peak RSS stays under 256 MB") {
  HostileOai ep;
  const std::string text(3000, 'x');
  std::string page;
  page.reserve(62u << 20);
  int n = 0;
  for (; page.size() < (60u << 20); ++n) {
    page += HostileOai::record("oai:big:" + std::to_string(n), "2024-05-01T10:00:00Z", text);
  }
  const std::string answer = HostileOai::envelope("<ListRecords>" + page + "</ListRecords>");
  page.clear();
  page.shrink_to_fit();
  ep.list = [&](const httplib::Request&) { return answer; };
  TestDaemon a({});
  follow(a, ep);
  a.start();
  REQUIRE(wait_for(a.base, [&](const json& st) { return in_sync(st, "oai", static_cast<uint64_t>(n)); }, 120));
  const size_t peak = peak_rss_kib(a.pid);
  MESSAGE("a page of " << answer.size() / (1 << 20) << " MiB, " << n << " records: peak RSS " << peak / 1024
                       << " MiB");
  CHECK(peak > 0);
  CHECK(peak < 256 * 1024);
}

TEST_CASE("OAI hostile: a token cycle, an endless list and a list longer than its completeListSize each end "
          "within a bounded number of requests, saying why") {
  SUBCASE("a resumptionToken cycle A -> B -> A") {
    HostileOai ep;
    ep.list = [](const httplib::Request& req) {
      const std::string t = req.get_param_value("resumptionToken");
      const std::string next = t == "A" ? "B" : "A";
      return HostileOai::envelope("<ListRecords>" +
                                  HostileOai::record("oai:c:" + (t.empty() ? std::string("0") : t),
                                                     "2024-05-01T10:00:00Z", "c") +
                                  HostileOai::token(next) + "</ListRecords>");
    };
    TestDaemon a({});
    follow(a, ep);
    a.start();
    REQUIRE(eventually([&] { return last_failure(a).find("came back") != std::string::npos; }, 30));
    CHECK(last_failure(a).find("'A'") != std::string::npos);
    const int after_first = ep.list_requests.load();
    MESSAGE("the cycle was stopped after " << after_first << " ListRecords requests: " << last_failure(a));
    CHECK(after_first < 50);
  }
  SUBCASE("an endless list of the same records under ever new tokens") {
    HostileOai ep;
    std::atomic<int> issued{0};
    ep.list = [&](const httplib::Request&) {
      return HostileOai::envelope("<ListRecords>" + HostileOai::record("oai:e:1", "2024-05-01T10:00:00Z", "e") +
                                  HostileOai::token("t" + std::to_string(++issued)) + "</ListRecords>");
    };
    TestDaemon a({});
    follow(a, ep);
    a.start();
    REQUIRE(eventually([&] { return last_failure(a).find("does not move on") != std::string::npos; }, 60));
    MESSAGE("stopped after " << issued.load() << " pages: " << last_failure(a));
    CHECK(issued.load() < 1000);
    CHECK(kill(a.pid, 0) == 0);
  }
  SUBCASE("a list that runs far past its completeListSize, a new record a page") {
    HostileOai ep;
    std::atomic<int> issued{0};
    ep.list = [&](const httplib::Request&) {
      const int i = ++issued;
      return HostileOai::envelope("<ListRecords>" +
                                  HostileOai::record("oai:s:" + std::to_string(i), "2024-05-01T10:00:00Z", "s") +
                                  HostileOai::token("t" + std::to_string(i), "10") + "</ListRecords>");
    };
    TestDaemon a({});
    follow(a, ep);
    a.start();
    REQUIRE(eventually([&] { return last_failure(a).find("completeListSize said 10") != std::string::npos; }, 30));
    MESSAGE("stopped: " << last_failure(a));
    CHECK(issued.load() < 100);
  }
}

TEST_CASE("OAI hostile: after a 30 s outage no window is shorter than an hour, and an earliestDatestamp of 0001 "
          "costs a few windows, not two thousand") {
  HostileOai ep;
  ep.earliest = "0001-01-01T00:00:00Z";
  // Records from 2024 on; each window's first page lists those in it.
  std::vector<std::pair<std::string, std::string>> records;
  for (int i = 0; i < 12; ++i) {
    records.emplace_back("oai:w:" + std::to_string(i),
                         "202" + std::to_string(4 + i / 6) + "-0" + std::to_string(1 + i % 6) + "-15T12:00:00Z");
  }
  std::mutex records_mutex;
  auto in_window = [&](const httplib::Request& req) {
    std::lock_guard lock(records_mutex);
    const auto from = rs::parse_w3c_datetime(req.get_param_value("from"));
    const auto until = rs::parse_w3c_datetime(req.get_param_value("until"));
    std::string out;
    for (const auto& [id, stamp] : records) {
      const auto t = rs::parse_w3c_datetime(stamp);
      if ((!req.has_param("from") || (from && *t >= *from)) && (!req.has_param("until") || (until && *t <= *until))) {
        out += HostileOai::record(id, stamp, "w");
      }
    }
    return HostileOai::envelope(out.empty() ? "<error code=\"noRecordsMatch\">none</error>"
                                            : "<ListRecords>" + out + "</ListRecords>");
  };
  ep.list = in_window;
  ep.identifiers = [&](const httplib::Request& req) {
    std::string s = in_window(req);
    return s; // headers inside records are read the same way
  };
  TestDaemon a({});
  follow(a, ep);
  a.start();
  REQUIRE(wait_for(a.base, [&](const json& st) { return in_sync(st, "oai", records.size()); }, 60));
  const int baseline_requests = ep.list_requests.load();
  MESSAGE("the baseline took " << baseline_requests << " ListRecords requests (earliestDatestamp 0001)");
  CHECK(baseline_requests < 20);

  // A 30 s outage, while incrementals run every second.
  ep.unavailable_until_ms = HostileOai::now_ms() + 30000;
  std::this_thread::sleep_for(std::chrono::seconds(31));
  std::unique_lock held(records_mutex);
  records.emplace_back("oai:w:new", rs::format_w3c_datetime(std::chrono::time_point_cast<std::chrono::seconds>(
                                        std::chrono::system_clock::now())));
  held.unlock();
  REQUIRE(wait_for(a.base, [&](const json& st) { return in_sync(st, "oai", records.size()); }, 60));
  std::lock_guard lock(ep.mutex);
  size_t shortest = SIZE_MAX;
  for (const auto& [from, until] : ep.windows) {
    if (!from.empty() && !until.empty()) {
      const auto span = std::chrono::duration_cast<std::chrono::seconds>(*rs::parse_w3c_datetime(until) -
                                                                         *rs::parse_w3c_datetime(from));
      shortest = std::min(shortest, static_cast<size_t>(span.count()));
    }
  }
  MESSAGE(ep.windows.size() << " windows asked for; the shortest " << shortest << " s");
  CHECK(shortest >= 3600);
}

TEST_CASE("OAI hostile: a page with a MiB of a character XML forbids is read in one pass, its good records kept") {
  HostileOai ep;
  const std::string junk(1 << 20, '\x01');
  const std::string answer = HostileOai::envelope(
      "<ListRecords>" + HostileOai::record("oai:j:1", "2024-05-01T10:00:00Z", "fine") + junk +
      HostileOai::record("oai:j:2", "2024-05-01T10:00:00Z", "fine too") +
      HostileOai::record("oai:j:3", "2024-05-01T10:00:00Z", "bad\x02" + junk.substr(0, 1000)) + "</ListRecords>");
  ep.list = [&](const httplib::Request&) { return answer; };
  TestDaemon a({});
  follow(a, ep);
  a.start();
  // A hang detector, not a timing: the one-pass scan takes milliseconds;
  // the scan it replaced took minutes on this page.
  REQUIRE(wait_for(a.base, [&](const json& st) { return in_sync(st, "oai", 2); }, 30));
  // Said, naming the record that was cut, and the stray bytes counted.
  CHECK(scalar(a, "SELECT count(*) FROM sync_error WHERE reason LIKE '%record oai:j:3:%the record is skipped%'") ==
        "1");
  CHECK(scalar(a, "SELECT count(*) FROM sync_error WHERE reason LIKE '%1048556 more characters XML forbids outside "
                  "any record%'") == "1");
}

TEST_CASE("IIIF hostile: 30 pages of 20,000 activities and a last page of 30 MB are decided page by page: the "
          "daemon's peak RSS stays under 256 MB") {
  httplib::Server server;
  std::string base;
  constexpr int k_pages = 30, k_per_page = 20000, k_objects = 2000;
  std::string last_page; // made once: 30 MB
  auto activity = [&](int k) {
    char t[32];
    std::snprintf(t, sizeof t, "2026-01-01T%02d:%02d:%02dZ", (k / 3600) % 24, (k / 60) % 60, k % 60);
    return std::string("{\"id\":\"") + base + "/activity/" + std::to_string(k) +
           "\",\"type\":\"Update\",\"object\":{\"id\":\"" + base + "/m/" + std::to_string(k % k_objects) +
           "\",\"type\":\"Manifest\"},\"endTime\":\"" + t + "\"}";
  };
  auto page = [&](int i, int first, int count) {
    std::string out = "{\"@context\":\"http://iiif.io/api/discovery/1/context.json\",\"id\":\"" + base + "/page/" +
                      std::to_string(i) + "\",\"type\":\"OrderedCollectionPage\"";
    if (i > 0) {
      out += ",\"prev\":{\"id\":\"" + base + "/page/" + std::to_string(i - 1) + "\",\"type\":\"OrderedCollectionPage\"}";
    }
    out += ",\"orderedItems\":[";
    for (int k = first; k < first + count; ++k) {
      out += (k == first ? "" : ",") + activity(k);
    }
    return out + "]}";
  };
  server.Get("/collection.json", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"id\":\"" + base + "/collection.json\",\"type\":\"OrderedCollection\",\"last\":{\"id\":\"" +
                        base + "/page/" + std::to_string(k_pages) + "\",\"type\":\"OrderedCollectionPage\"}}",
                    "application/ld+json");
  });
  server.Get(R"(/page/(\d+))", [&](const httplib::Request& req, httplib::Response& res) {
    const int i = std::stoi(req.matches[1]);
    res.set_content(i == k_pages ? last_page : page(i, i * k_per_page, k_per_page), "application/ld+json");
  });
  server.Get(R"(/m/(\d+))", [&](const httplib::Request& req, httplib::Response& res) {
    res.set_content("{\"id\":\"" + base + "/m/" + req.matches[1].str() + "\",\"type\":\"Manifest\"}",
                    "application/ld+json");
  });
  ServerThread running(server);
  base = running.base();
  // The last page: activities enough for 30 MB.
  last_page = page(k_pages, k_pages * k_per_page, 30 * 1024 * 1024 / static_cast<int>(activity(0).size() + 1));
  TestDaemon a({});
  edit_config(a, [&](json& j) {
    j["sources"] = json::array(
        {{{"name", "iiif"}, {"url", base + "/collection.json"}, {"kind", "iiif-discovery"}, {"interval", "1s"}}});
  });
  a.start();
  REQUIRE(wait_for(a.base, [&](const json& st) { return in_sync(st, "iiif", k_objects); }, 180));
  const size_t peak = peak_rss_kib(a.pid);
  MESSAGE(k_pages << " pages of " << k_per_page << " activities and a last page of " << last_page.size() / (1 << 20)
                  << " MiB: peak RSS " << peak / 1024 << " MiB");
  CHECK(peak > 0);
  CHECK(peak < 256 * 1024);
}

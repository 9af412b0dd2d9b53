// Issue #36: an OAI-PMH repository followed as a Source, over real HTTP and
// PostgreSQL, against a test endpoint answering as DSpace does
// (oai_endpoint.h). In each case our republished Resource List ends equal to
// the endpoint's records, and a second Tributary following ours ends equal.
#include "daemon_client.h"
#include "http_get.h"
#include "oai_endpoint.h"

#include "common/percent.h"

#include <csignal>
#include <fstream>
#include <regex>
#include <set>

using namespace tributary;
using namespace tributary::test;

namespace {

// A daemon following `ep` as a source "oai" of kind oai-pmh.
void follow_oai(TestDaemon& d, const OaiEndpoint& ep, const std::function<void(json&)>& more = {}) {
  edit_config(d, [&](json& j) {
    j["sources"] = json::array({{{"name", "oai"}, {"url", ep.base()}, {"kind", "oai-pmh"}, {"interval", "1s"}}});
    if (more) {
      more(j["sources"][0]);
    }
  });
}

// The origins a republished Resource List names: each entry's rel="via".
std::set<std::string> locs_of(const std::string& url) {
  const std::string body = http_get(url).body;
  static const std::regex loc("<rs:ln rel=\"via\" href=\"([^\"]*)\"");
  std::set<std::string> out;
  for (auto it = std::sregex_iterator(body.begin(), body.end(), loc); it != std::sregex_iterator(); ++it) {
    std::string s = (*it)[1];
    for (size_t p = s.find("&amp;"); p != std::string::npos; p = s.find("&amp;", p + 1)) {
      s.replace(p, 5, "&");
    }
    out.insert(s);
  }
  return out;
}

// What the endpoint holds live, as record URLs.
std::set<std::string> live_records(OaiEndpoint& ep, const std::set<std::string>& except = {}) {
  std::set<std::string> out;
  for (const auto& [id, r] : ep.records()) {
    if (!r.deleted && !except.count(id)) {
      out.insert(ep.record_url(id));
    }
  }
  return out;
}

bool lists_equal(const TestDaemon& d, const std::string& set, const std::set<std::string>& want, double seconds = 20) {
  return eventually([&] { return locs_of(d.base + "/sets/" + set + "/resourcelist.xml") == want; }, seconds);
}

} // namespace

TEST_CASE("OAI-PMH source: a DSpace-shaped repository is harvested page by page, changes and deletions follow by "
          "from, a 503 with Retry-After is waited out, a record with a forbidden character costs that record, and a "
          "second Tributary following ours ends equal") {
  OaiEndpoint ep;
  for (int i = 1; i <= 7; ++i) {
    ep.put("oai:repo.example.edu:123456789/" + std::to_string(i), "Item " + std::to_string(i),
           {"com_123456789_1", i % 2 ? "col_123456789_7" : "col_123456789_8"});
  }
  TestDaemon a({});
  follow_oai(a, ep);
  a.start();
  REQUIRE(wait_for(a.base, [](const json& st) { return in_sync(st, "oai", 7); }, 30));
  CHECK(lists_equal(a, "oai", live_records(ep)));
  // The content is the record's metadata, as a document of its own; the
  // sets are its collections.
  const std::string first = ep.record_url("oai:repo.example.edu:123456789/1");
  const std::string list = http_get(a.base + "/sets/oai/resourcelist.xml").body;
  // Our copy is the only location: the record's URI answers with an
  // OAI-PMH envelope, not these bytes, so it is named as origin, no mirror.
  CHECK(list.find("rel=\"duplicate\"") == std::string::npos);
  CHECK(scalar(a, "SELECT links::text FROM resource WHERE uri = '" + first + "'").find("set=col_123456789_7") !=
        std::string::npos);
  const std::string held = scalar(a, "SELECT blob_sha256 FROM resource WHERE uri = '" + first + "'");
  REQUIRE(!held.empty());
  {
    const std::string content = http_get(a.base + "/sets/oai/resources/" + percent_encode(first)).body;
    CHECK(content.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<oai_dc:dc", 0) == 0);
    CHECK(content.find("<dc:title>Item 1</dc:title>") != std::string::npos);
  }
  {
    // Our own OAI-PMH face serves the record as harvested, valid against
    // OAI-PMH 2.0 and oai_dc.
    const std::string record = http_get(a.base + "/oai?verb=GetRecord&metadataPrefix=oai_dc&identifier=" +
                                        percent_encode(a.base + "/sets/oai/resources/" + percent_encode(first)))
                                   .body;
    CHECK(record.find("<metadata><oai_dc:dc") != std::string::npos);
    CHECK(record.find("<dc:title>Item 1</dc:title>") != std::string::npos);
    const std::string file = "/tmp/tributary-oai-through-" + std::to_string(::getpid()) + ".xml";
    std::ofstream(file) << record;
    CHECK(std::system(("xmllint --noout --schema " + std::string(TRIBUTARY_SOURCE_DIR) +
                       "/tests/data/oai-schemas/all.xsd " + file + " 2>/dev/null")
                          .c_str()) == 0);
    std::remove(file.c_str());
  }
  CHECK(scalar(a, "SELECT kind FROM source WHERE name = 'oai'") == "oai-pmh");

  // Changes: one new, one changed, one deleted (persistent), behind two 503s.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100)); // a new second: datestamps after the harvest
  ep.unavailable = 2;
  ep.put("oai:repo.example.edu:123456789/8", "Item 8");
  ep.put("oai:repo.example.edu:123456789/2", "Item 2, revised");
  ep.remove("oai:repo.example.edu:123456789/3");
  REQUIRE(wait_for(a.base, [](const json& st) { return in_sync(st, "oai", 7); }, 30));
  CHECK(lists_equal(a, "oai", live_records(ep)));
  CHECK(scalar(a, "SELECT count(*) FROM change_log WHERE change = 'deleted'") == "1");
  CHECK(scalar(a, "SELECT count(*) FROM change_log WHERE change = 'updated'") == "1");
  CHECK(ep.unavailable.load() == 0);

  // A record holding a character XML forbids: it alone is skipped, named in
  // the run's errors; the others on its page are applied.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  ep.put("oai:repo.example.edu:123456789/9", std::string("Broken \x0b title"));
  ep.put("oai:repo.example.edu:123456789/10", "Item 10");
  REQUIRE(wait_for(a.base, [](const json& st) { return in_sync(st, "oai", 8); }, 30));
  CHECK(lists_equal(a, "oai", live_records(ep, {"oai:repo.example.edu:123456789/9"})));
  CHECK(eventually([&] {
    return scalar(a, "SELECT count(*) FROM sync_error WHERE reason LIKE '%record oai:repo.example.edu:123456789/9:%"
                     "forbids%'") != "0";
  }, 10));

  // B follows A as a ResourceSync Source and ends equal.
  TestDaemon b({{"a", a.base + "/.well-known/resourcesync"}});
  b.start();
  REQUIRE(wait_for(b.base, [](const json& st) { return in_sync(st, "a", 8); }, 30));
  CHECK(eventually([&] {
    return locs_of(b.base + "/sets/a/resourcelist.xml") == locs_of(a.base + "/sets/oai/resourcelist.xml");
  }, 15));

  // C follows A's OAI-PMH face as an OAI-PMH source and ends equal: A's
  // live records, with A's bytes, through a change made meanwhile.
  TestDaemon c({});
  edit_config(c, [&](json& j) {
    j["sources"] = json::array({{{"name", "aoai"}, {"url", a.base + "/oai"}, {"kind", "oai-pmh"}, {"interval", "1s"}}});
  });
  c.start();
  REQUIRE(wait_for(c.base, [](const json& st) { return in_sync(st, "aoai", 8); }, 30));
  auto digests = [](const TestDaemon& d) {
    return scalar(d, "SELECT string_agg(sha256, ',' ORDER BY sha256) FROM resource WHERE state = 'live'");
  };
  CHECK(eventually([&] { return digests(c) == digests(a); }, 15));
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  ep.put("oai:repo.example.edu:123456789/11", "Item 11");
  ep.remove("oai:repo.example.edu:123456789/4");
  REQUIRE(wait_for(a.base, [](const json& st) { return in_sync(st, "oai", 8); }, 30));
  CHECK(eventually([&] { return digests(c) == digests(a) && scalar(c, "SELECT count(*) FROM resource WHERE "
                                                                      "state = 'live'") == "8"; }, 30));
}

TEST_CASE("OAI-PMH source: a harvest killed mid-list resumes at the page after the last one applied, and a token "
          "that expired meanwhile restarts the window, not the harvest") {
  OaiEndpoint ep;
  ep.page_size = 2;
  for (int i = 1; i <= 40; ++i) {
    ep.put("oai:r:" + std::to_string(1000 + i), "Item " + std::to_string(i));
  }
  ep.delay_ms = 150; // 20 pages: about 3 s
  TestDaemon a({});
  // Each start runs the source at once; the next run comes 30 s later, after
  // the requests below are counted (at 1 s, a loaded machine let the next
  // incremental's pages into the count: CI counted 39 for 17).
  follow_oai(a, ep, [](json& s) { s["interval"] = "30s"; });
  a.start();
  // Killed once about 8 pages are in.
  REQUIRE(eventually([&] { return ep.requests.load() >= 9; }, 20));
  kill(a.pid, SIGKILL);
  waitpid(a.pid, nullptr, 0);
  a.pid = 0;
  const int before = ep.requests.load();
  const std::string resume = scalar(a, "SELECT resume FROM watermark");
  INFO(resume);
  CHECK(resume.find("\"next\":\"" + ep.base() + "?verb=ListRecords&resumptionToken=") != std::string::npos);
  const int held_at_kill = std::stoi(scalar(a, "SELECT count(*) FROM resource WHERE state = 'live'"));
  CHECK(held_at_kill >= 8);
  CHECK(held_at_kill < 40);
  a.start();
  REQUIRE(wait_for(a.base, [](const json& st) { return in_sync(st, "oai", 40); }, 40));
  // Identify, then only the pages not applied: 20 pages in all, so the
  // second run asked for at most the 20 - (held / 2) left, plus Identify
  // and the page under way at the kill.
  const int after = ep.requests.load() - before;
  MESSAGE("held at the kill: " << held_at_kill << "; requests after the restart: " << after);
  CHECK(after <= 20 - held_at_kill / 2 + 3);
  CHECK(a.log_text().find("harvest resumed at the page after the last one applied") != std::string::npos);
  CHECK(lists_equal(a, "oai", live_records(ep)));

  // A baseline killed mid-list, whose token the repository forgets before
  // the restart: the window is harvested again, and nothing is lost.
  kill(a.pid, SIGKILL);
  waitpid(a.pid, nullptr, 0);
  a.pid = 0;
  {
    pqxx::connection c(a.db.conninfo());
    pqxx::work tx(c);
    tx.exec("UPDATE watermark SET resume = NULL, baseline_at = NULL, last_time = NULL");
    tx.exec("DELETE FROM resource");
    tx.exec("DELETE FROM change_log"); // never synced, its log too (else what it logs again is no news)
    tx.commit();
  }
  a.start();
  REQUIRE(eventually([&] { return scalar(a, "SELECT resume FROM watermark").find("resumptionToken") !=
                                  std::string::npos; }, 20));
  kill(a.pid, SIGKILL);
  waitpid(a.pid, nullptr, 0);
  a.pid = 0;
  ep.expire_tokens();
  a.start();
  REQUIRE(wait_for(a.base, [](const json& st) { return in_sync(st, "oai", 40); }, 40));
  CHECK(ep.bad_tokens.load() >= 1);
  CHECK(a.log_text().find("no longer honours the resumption token") != std::string::npos);
  CHECK(lists_equal(a, "oai", live_records(ep)));

  TestDaemon b({{"a", a.base + "/.well-known/resourcesync"}});
  b.start();
  REQUIRE(wait_for(b.base, [](const json& st) { return in_sync(st, "a", 40); }, 30));
  CHECK(eventually([&] { return locs_of(b.base + "/sets/a/resourcelist.xml") == live_records(ep); }, 15));
}

TEST_CASE("OAI-PMH source: day granularity, a window refused as too large is halved, deletedRecord 'no' is found "
          "by the ListIdentifiers audit, and 'transient' deletions are applied while they are reported") {
  OaiEndpoint ep;
  ep.second_granularity = false;
  ep.deleted_record = "no";
  ep.max_window_days = 2000; // the whole history (since 2001) is refused
  ep.earliest = "2001-01-01";
  for (int i = 1; i <= 5; ++i) {
    ep.put("oai:eprints.example.ac.uk:" + std::to_string(i), "Paper " + std::to_string(i));
  }
  TestDaemon a({});
  follow_oai(a, ep);
  a.start();
  REQUIRE(wait_for(a.base, [](const json& st) { return in_sync(st, "oai", 5); }, 30));
  CHECK(ep.refused_windows.load() >= 1);
  CHECK(lists_equal(a, "oai", live_records(ep)));
  // Incremental harvests ask by day: from= a date.
  ep.put("oai:eprints.example.ac.uk:6", "Paper 6");
  REQUIRE(wait_for(a.base, [](const json& st) { return in_sync(st, "oai", 6); }, 30));

  // A repository that keeps no deletions: the record vanishes, and only an
  // audit (ListIdentifiers) finds it gone.
  ep.remove("oai:eprints.example.ac.uk:2");
  std::this_thread::sleep_for(std::chrono::seconds(2));
  CHECK(scalar(a, "SELECT count(*) FROM resource WHERE state = 'live'") == "6");
  httplib::Client c(a.base);
  auto r = c.Post("/api/v1/sources/oai/sync", httplib::Headers{{"Authorization", "Bearer token"}},
                  R"({"mode": "audit"})", "application/json");
  REQUIRE(r);
  CHECK(r->status / 100 == 2);
  REQUIRE(wait_for(a.base, [](const json& st) { return in_sync(st, "oai", 5); }, 30));
  CHECK(lists_equal(a, "oai", live_records(ep)));

  // "transient": a deletion reported for a while is applied by the next
  // incremental harvest.
  ep.deleted_record = "transient";
  ep.remove("oai:eprints.example.ac.uk:4");
  REQUIRE(wait_for(a.base, [](const json& st) { return in_sync(st, "oai", 4); }, 30));
  ep.forget("oai:eprints.example.ac.uk:4");
  CHECK(lists_equal(a, "oai", live_records(ep)));

  TestDaemon b({{"a", a.base + "/.well-known/resourcesync"}});
  b.start();
  REQUIRE(wait_for(b.base, [](const json& st) { return in_sync(st, "a", 4); }, 30));
  CHECK(eventually([&] {
    return locs_of(b.base + "/sets/a/resourcelist.xml") == locs_of(a.base + "/sets/oai/resourcelist.xml");
  }, 15));
}

TEST_CASE("OAI-PMH: tributary explore --kind oai-pmh shows Identify, formats, sets and record counts") {
  OaiEndpoint ep;
  ep.page_size = 4;
  for (int i = 1; i <= 9; ++i) {
    ep.put("oai:r:" + std::to_string(i), "Item " + std::to_string(i), {i % 3 ? "col_a" : "col_b"});
  }
  auto text = run_tributary("explore --kind oai-pmh " + ep.base());
  INFO(text.out);
  CHECK(text.status == 0);
  CHECK(text.out.find("OAI-PMH 2.0 repository \"Test repository\" at " + ep.base()) != std::string::npos);
  CHECK(text.out.find("granularity YYYY-MM-DDThh:mm:ssZ, deletedRecord persistent") != std::string::npos);
  CHECK(text.out.find("records (oai_dc): 9") != std::string::npos);
  auto j = run_tributary("explore --kind oai-pmh --json " + ep.base());
  const json parsed = json::parse(j.out);
  CHECK(parsed["records"]["records"] == 9);
  CHECK(parsed["records"]["exact"] == true);
  CHECK(parsed["deleted_record"] == "persistent");
  // Not an OAI-PMH endpoint: exit 2, saying why.
  auto bad = run_tributary("explore --kind oai-pmh " + ep.base() + "/nothing");
  CHECK(bad.status == 2);
}

TEST_CASE("OAI-PMH source: a metadataPrefix or a set the repository does not offer fails the run, saying so, and a "
          "set it offers is harvested alone") {
  OaiEndpoint ep;
  ep.put("oai:r:1", "In a", {"col_a"});
  ep.put("oai:r:2", "In b", {"col_b"});
  {
    TestDaemon a({});
    follow_oai(a, ep, [](json& s) { s["oai"] = {{"metadata_prefixes", {"marc21"}}}; });
    a.start();
    CHECK(eventually([&] {
      return a.log_text().find("the repository offers no metadataPrefix 'marc21' (it offers oai_dc, dim, marc)") !=
             std::string::npos;
    }, 20));
    // The configured prefix replaced the default: nothing was harvested as oai_dc.
    CHECK(scalar(a, "SELECT count(*) FROM feed WHERE capability_list_url LIKE '%metadataPrefix=oai_dc%'") == "0");
  }
  {
    TestDaemon a({});
    follow_oai(a, ep, [](json& s) { s["oai"] = {{"sets", {"col_b", "col_z"}}}; });
    a.start();
    CHECK(eventually([&] { return a.log_text().find("the repository lists no set 'col_z'") != std::string::npos; },
                     20));
  }
  TestDaemon a({});
  follow_oai(a, ep, [](json& s) { s["oai"] = {{"sets", {"col_b"}}}; });
  a.start();
  CHECK(lists_equal(a, "oai", {ep.record_url("oai:r:2")}));
}

TEST_CASE("OAI-PMH provider over harvested records: a format held natively (MARC21 as DSpace's marc) is offered and "
          "served as harvested, upstream sets are sets of ours, and each record says where it came from") {
  OaiEndpoint ep;
  ep.put("oai:repo.example.edu:1", "Item 1", {"col_1"});
  ep.put("oai:repo.example.edu:2", "Item 2", {"col_1", "col_2"});
  ep.put("oai:repo.example.edu:3", "Item 3", {"col_2"});
  TestDaemon a({});
  follow_oai(a, ep, [](json& s) { s["oai"] = {{"metadata_prefixes", {"oai_dc", "marc"}}}; });
  a.start();
  REQUIRE(wait_for(a.base, [](const json& st) { return in_sync(st, "oai", 6); }, 30));
  const std::string oai = a.base + "/oai";
  const std::string schema = std::string(TRIBUTARY_SOURCE_DIR) + "/tests/data/oai-schemas/all.xsd";
  auto valid = [&](const std::string& xml) {
    const std::string file = "/tmp/tributary-oai-native-" + std::to_string(::getpid()) + ".xml";
    std::ofstream(file) << xml;
    const int st = std::system(("xmllint --noout --schema " + schema + " " + file + " 2>/dev/null").c_str());
    std::remove(file.c_str());
    return st == 0;
  };
  auto count = [](const std::string& text, const std::string& needle) {
    size_t n = 0;
    for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) {
      ++n;
    }
    return n;
  };

  // The formats: oai_dc for every record, marc as the repository gave it.
  const std::string formats = http_get(oai + "?verb=ListMetadataFormats").body;
  CHECK(valid(formats));
  CHECK(formats.find("<metadataPrefix>marc</metadataPrefix><schema>http://www.loc.gov/standards/marcxml/schema/"
                     "MARC21slim.xsd</schema><metadataNamespace>http://www.loc.gov/MARC21/slim</metadataNamespace>") !=
        std::string::npos);

  // marc: the three records as harvested, each with its provenance.
  const std::string marc = http_get(oai + "?verb=ListRecords&metadataPrefix=marc").body;
  CHECK(count(marc, "<record xmlns=\"http://www.loc.gov/MARC21/slim\"") == 3);
  CHECK(count(marc, "<originDescription ") == 3);
  CHECK(marc.find("altered=\"false\"><baseURL>" + ep.base() + "</baseURL><identifier>oai:repo.example.edu:2"
                  "</identifier>") != std::string::npos);
  CHECK(count(marc, "<metadataNamespace>http://www.loc.gov/MARC21/slim</metadataNamespace>") == 3);

  // oai_dc: six records (each upstream record in two formats is two
  // resources): three as harvested (not altered), three derived from the
  // MARC records (altered, their namespace named); valid with provenance.
  const std::string dc = http_get(oai + "?verb=ListRecords&metadataPrefix=oai_dc").body;
  CHECK(valid(dc));
  CHECK(count(dc, "<record>") == 6);
  CHECK(count(dc, "altered=\"false\"") == 3);
  CHECK(count(dc, "altered=\"true\"") == 3);
  CHECK(count(dc, "<dc:title>Item 2</dc:title>") == 1);

  // Upstream sets: listed, in every header, and harvestable by.
  const std::string sets = http_get(oai + "?verb=ListSets").body;
  CHECK(valid(sets));
  CHECK(sets.find("<setSpec>source:oai:col_1</setSpec>") != std::string::npos);
  CHECK(sets.find("<setSpec>source:oai:col_2</setSpec>") != std::string::npos);
  // The marc feed is a set of its own ("oai-2": a source followed through
  // two lists gets a set per list), its upstream sets under it.
  CHECK(sets.find("<setSpec>source:oai-2:col_2</setSpec>") != std::string::npos);
  const std::string col2 = http_get(oai + "?verb=ListIdentifiers&metadataPrefix=marc&set=source:oai-2:col_2").body;
  CHECK(valid(col2));
  CHECK(count(col2, "<header>") == 2);
  CHECK(col2.find(percent_encode(percent_encode("oai:repo.example.edu:2"))) != std::string::npos);
  CHECK(col2.find(percent_encode(percent_encode("oai:repo.example.edu:1"))) == std::string::npos);
  CHECK(count(col2, "<setSpec>source:oai-2:col_2</setSpec>") == 2);
  const std::string col1 = http_get(oai + "?verb=ListIdentifiers&metadataPrefix=oai_dc&set=source:oai:col_1").body;
  CHECK(count(col1, "<header>") == 2);
  CHECK(http_get(oai + "?verb=ListIdentifiers&metadataPrefix=oai_dc&set=source:oai:col_9").body.find(
            "noRecordsMatch") != std::string::npos);

  // A format a record is not held in; a format nothing is held in.
  const std::string one_dc = a.base + "/sets/oai/resources/" + percent_encode(ep.record_url("oai:repo.example.edu:1"));
  CHECK(http_get(oai + "?verb=GetRecord&metadataPrefix=marc&identifier=" + percent_encode(one_dc))
            .body.find("cannotDisseminateFormat") != std::string::npos);
  CHECK(http_get(oai + "?verb=ListRecords&metadataPrefix=mods").body.find("cannotDisseminateFormat") !=
        std::string::npos);
}

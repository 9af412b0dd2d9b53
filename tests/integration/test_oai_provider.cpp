// Our OAI-PMH face (#52): every answer valid against the OAI-PMH 2.0 and
// oai_dc schemas (vendored, tests/data/oai-schemas), a harvest through
// resumption tokens and then from its responseDate ending equal to the
// store, every error of the protocol, and harvesters we did not write
// (HTTP::OAI's oai_pmh, Catmandu's OAI importer) reading it whole.
#include "republisher_fixture.h"

#include "common/percent.h"

#include <cstdio>
#include <fstream>
#include <regex>
#include <set>

using namespace tributary;
using namespace tributary::test;

namespace {

Run shell(const std::string& cmd) {
  Run r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p);
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) {
    r.out.append(buf.data(), n);
  }
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// xmllint's verdict on `xml` against OAI-PMH 2.0 with oai_dc ("" when valid).
std::string schema_problems(const std::string& xml, const ScratchDir& dir) {
  const auto file = dir / "answer.xml";
  std::ofstream(file) << xml;
  Run r = shell("xmllint --noout --schema " + std::string(TRIBUTARY_SOURCE_DIR) + "/tests/data/oai-schemas/all.xsd " +
                file.string());
  return r.status == 0 ? std::string() : r.out;
}

std::vector<std::string> all(const std::string& text, const std::string& pattern) {
  std::vector<std::string> out;
  const std::regex re(pattern);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) {
    out.push_back((*it)[1].str());
  }
  return out;
}

std::string first(const std::string& text, const std::string& pattern) {
  auto v = all(text, pattern);
  return v.empty() ? std::string() : v.front();
}

// A ListIdentifiers harvest through every token: identifier -> deleted?,
// the responseDate of its first page, and the pages it took.
struct Harvest {
  std::map<std::string, bool> records;
  std::map<std::string, std::string> datestamps;
  std::string response_date;
  int pages = 0;
};

Harvest harvest(const std::string& base, const std::string& args, const ScratchDir& dir) {
  Harvest h;
  std::string url = base + "/oai?verb=ListIdentifiers&" + args;
  for (;;) {
    Got g = get(url);
    REQUIRE(g.status == 200);
    CHECK(schema_problems(g.body, dir) == "");
    ++h.pages;
    if (h.response_date.empty()) {
      h.response_date = first(g.body, "<responseDate>([^<]+)</responseDate>");
    }
    if (g.body.find("noRecordsMatch") != std::string::npos) {
      break;
    }
    const std::regex header(
        "<header( status=\"deleted\")?><identifier>([^<]+)</identifier><datestamp>([^<]+)</datestamp>");
    for (auto it = std::sregex_iterator(g.body.begin(), g.body.end(), header); it != std::sregex_iterator(); ++it) {
      h.records[(*it)[2].str()] = (*it)[1].matched;
      h.datestamps[(*it)[2].str()] = (*it)[3].str();
    }
    const std::string token = first(g.body, "<resumptionToken[^>]*>([^<]*)</resumptionToken>");
    if (token.empty()) {
      break;
    }
    url = base + "/oai?verb=ListIdentifiers&resumptionToken=" + token;
  }
  return h;
}

// What the store holds, as our OAI-PMH face names it.
std::map<std::string, bool> held(Published& p) {
  std::map<std::string, bool> out;
  pub::UrlScheme urls(p.base);
  for (const char* name : {"a.txt", "b.txt", "c.txt", "d.txt"}) {
    const std::string uri = p.up.url(std::string("/res/") + name);
    auto feeds = p.env.store->feeds();
    REQUIRE(feeds);
    for (const auto& f : *feeds) {
      auto r = p.env.store->resource(f.feed_id, uri);
      REQUIRE(r);
      if (*r) {
        out[urls.resource("up", uri)] = (*r)->state == store::ResourceState::deleted;
      }
    }
  }
  return out;
}

} // namespace

TEST_CASE("OAI-PMH provider: every verb answers, valid against the OAI-PMH 2.0 and oai_dc schemas") {
  Published p;
  ScratchDir dir("oai-provider");
  const std::string a = pub::UrlScheme(p.base).resource("up", p.up.url("/res/a.txt"));
  const std::string c = pub::UrlScheme(p.base).resource("up", p.up.url("/res/c.txt"));
  for (const std::string& q : std::vector<std::string>{"verb=Identify", "verb=ListSets", "verb=ListMetadataFormats",
                              "verb=ListMetadataFormats&identifier=" + percent_encode(a),
                              "verb=ListRecords&metadataPrefix=oai_dc", "verb=ListIdentifiers&metadataPrefix=oai_dc",
                              "verb=ListRecords&metadataPrefix=oai_dc&set=source:up",
                              "verb=GetRecord&metadataPrefix=oai_dc&identifier=" + percent_encode(a),
                              "verb=GetRecord&metadataPrefix=oai_dc&identifier=" + percent_encode(c)}) {
    Got g = get(p.base + "/oai?" + q);
    CAPTURE(q);
    CHECK(g.status == 200);
    CHECK(header(g, "Content-Type") == "text/xml; charset=utf-8");
    CHECK(g.body.find("<error") == std::string::npos);
    CHECK(schema_problems(g.body, dir) == "");
  }
  Got identify = get(p.base + "/oai?verb=Identify");
  CHECK(first(identify.body, "<baseURL>([^<]+)</baseURL>") == p.base + "/oai");
  CHECK(first(identify.body, "<deletedRecord>([^<]+)</deletedRecord>") == "transient");
  // A record of a live resource carries oai_dc; a deleted one its status alone.
  Got live = get(p.base + "/oai?verb=GetRecord&metadataPrefix=oai_dc&identifier=" + percent_encode(a));
  CHECK(live.body.find("<dc:identifier>" + p.up.url("/res/a.txt") + "</dc:identifier>") != std::string::npos);
  CHECK(live.body.find("<setSpec>source:up</setSpec>") != std::string::npos);
  Got gone = get(p.base + "/oai?verb=GetRecord&metadataPrefix=oai_dc&identifier=" + percent_encode(c));
  CHECK(gone.body.find("<header status=\"deleted\">") != std::string::npos);
  CHECK(gone.body.find("<metadata>") == std::string::npos);
  // The API catalog (RFC 9727) names the Source Description and this face.
  Got catalog = get(p.base + "/.well-known/api-catalog");
  CHECK(catalog.status == 200);
  CHECK(header(catalog, "Content-Type") == "application/linkset+json");
  CHECK(catalog.body.find("\"anchor\":\"" + p.base + "/.well-known/api-catalog\"") != std::string::npos);
  CHECK(catalog.body.find("\"href\":\"" + p.base + "/.well-known/resourcesync\"") != std::string::npos);
  CHECK(catalog.body.find("\"href\":\"" + p.base + "/oai\"") != std::string::npos);
  // A POST is a GET with its arguments in the body.
  auto post = httplib::Client("127.0.0.1", std::stoi(p.base.substr(p.base.rfind(':') + 1)))
                  .Post("/oai", "verb=Identify", "application/x-www-form-urlencoded");
  REQUIRE(post);
  CHECK(post->status == 200);
  CHECK(post->body.find("<Identify>") != std::string::npos);
}

TEST_CASE("OAI-PMH provider: every protocol error, each valid against the schema") {
  Published p;
  ScratchDir dir("oai-provider");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "badVerb"},
      {"verb=Frobnicate", "badVerb"},
      {"verb=Identify&metadataPrefix=oai_dc", "badArgument"},
      {"verb=ListRecords", "badArgument"},
      {"verb=ListRecords&metadataPrefix=oai_dc&metadataPrefix=oai_dc", "badArgument"},
      {"verb=ListRecords&metadataPrefix=oai_dc&from=yesterday", "badArgument"},
      {"verb=ListRecords&metadataPrefix=oai_dc&from=2026-01-01&until=2026-01-01T00:00:00Z", "badArgument"},
      {"verb=ListRecords&metadataPrefix=oai_dc&from=2026-02-01&until=2026-01-01", "badArgument"},
      {"verb=ListRecords&metadataPrefix=marcxml", "cannotDisseminateFormat"},
      {"verb=GetRecord&metadataPrefix=oai_dc&identifier=http%3A%2F%2Felsewhere.example%2Fx", "idDoesNotExist"},
      {"verb=ListMetadataFormats&identifier=oai%3Aelsewhere%3A1", "idDoesNotExist"},
      {"verb=ListRecords&resumptionToken=bm90IG91cnM", "badResumptionToken"},
      {"verb=ListSets&resumptionToken=x", "badResumptionToken"},
      {"verb=ListRecords&metadataPrefix=oai_dc&from=2999-01-01", "noRecordsMatch"},
      {"verb=ListRecords&metadataPrefix=oai_dc&set=source:nobody", "noRecordsMatch"},
  };
  for (const auto& [q, code] : cases) {
    CAPTURE(q);
    Got g = get(p.base + "/oai?" + q);
    CHECK(g.status == 200);
    CHECK(first(g.body, "<error code=\"([^\"]+)\"") == code);
    CHECK(schema_problems(g.body, dir) == "");
    if (code == "badVerb" || code == "badArgument") {
      CHECK(g.body.find("<request>") != std::string::npos); // no arguments echoed
    }
  }
  // A token for ListIdentifiers does not resume ListRecords.
  Published small(false, 10000, 10000, {}, 1ull << 30, std::chrono::milliseconds(0), false, 1);
  Got page = get(small.base + "/oai?verb=ListIdentifiers&metadataPrefix=oai_dc");
  const std::string token = first(page.body, "<resumptionToken[^>]*>([^<]+)</resumptionToken>");
  REQUIRE(!token.empty());
  CHECK(first(get(small.base + "/oai?verb=ListRecords&resumptionToken=" + token).body, "<error code=\"([^\"]+)\"") ==
        "badResumptionToken");
}

TEST_CASE("OAI-PMH provider: a harvest through tokens, then from its responseDate, ends equal to the store") {
  // One record a page: every page after the first is resumed.
  Published p(false, 10000, 10000, {}, 1ull << 30, std::chrono::milliseconds(0), false, 1);
  ScratchDir dir("oai-provider");
  // A harvest from a responseDate lists again what was stored in that same
  // second (datestamps are to the second): wait one out, so that what
  // comes back below is what changed.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  Harvest first_pass = harvest(p.base, "metadataPrefix=oai_dc", dir);
  CHECK(first_pass.records == held(p));
  CHECK(first_pass.pages == 3); // a, b, and c (deleted): the last page's token is empty
  // A retried token gives the same page.
  Got one = get(p.base + "/oai?verb=ListIdentifiers&metadataPrefix=oai_dc");
  const std::string token = first(one.body, "<resumptionToken[^>]*>([^<]+)</resumptionToken>");
  REQUIRE(!token.empty());
  const std::string again = get(p.base + "/oai?verb=ListIdentifiers&resumptionToken=" + token).body;
  CHECK(first(again, "<identifier>([^<]+)</identifier>") ==
        first(get(p.base + "/oai?verb=ListIdentifiers&resumptionToken=" + token).body,
              "<identifier>([^<]+)</identifier>"));
  // Upstream updates a, creates d, deletes b; an incremental harvest from
  // the first pass's responseDate brings exactly those, and the merge
  // equals the store.
  p.change_upstream();
  Harvest incremental = harvest(p.base, "metadataPrefix=oai_dc&from=" + first_pass.response_date, dir);
  std::map<std::string, bool> merged = first_pass.records;
  for (const auto& [id, deleted] : incremental.records) {
    merged[id] = deleted;
  }
  CHECK(merged == held(p));
  pub::UrlScheme urls(p.base);
  CHECK(incremental.records.count(urls.resource("up", p.up.url("/res/d.txt"))) == 1);
  CHECK(incremental.records.count(urls.resource("up", p.up.url("/res/c.txt"))) == 0); // unchanged since
  CHECK(incremental.records.at(urls.resource("up", p.up.url("/res/b.txt"))) == true);
  // By set, and with an until before anything: nothing.
  CHECK(harvest(p.base, "metadataPrefix=oai_dc&set=source:up", dir).records == held(p));
  CHECK(harvest(p.base, "metadataPrefix=oai_dc&until=2000-01-01", dir).records.empty());
}

TEST_CASE("OAI-PMH provider: retention compacting the change log leaves every record listed, with its datestamp") {
  // A Change List part a change: every part but the open one can be compacted.
  Published p(false, 10000, 1, {}, 1ull << 30, std::chrono::milliseconds(0), true, 100);
  ScratchDir dir("oai-provider");
  p.change_upstream();
  const Harvest before = harvest(p.base, "metadataPrefix=oai_dc", dir);
  REQUIRE(before.records == held(p));
  const auto now = std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
  const auto plan = p.server->compactable(now);
  REQUIRE(plan.compact.size() == 1);
  REQUIRE(p.server->archive(plan.compact));
  auto removed = p.env.store->compact_change_log(plan.compact, plan.published);
  REQUIRE(removed);
  CHECK(*removed > 0);
  const Harvest after = harvest(p.base, "metadataPrefix=oai_dc", dir);
  CHECK(after.records == before.records);
  CHECK(after.datestamps == before.datestamps);
}

TEST_CASE("OAI-PMH provider: harvesters we did not write read it whole (HTTP::OAI, Catmandu)") {
  Published p(false, 10000, 10000, {}, 1ull << 30, std::chrono::milliseconds(0), false, 2);
  const size_t expected = held(p).size();
  // HTTP::OAI's command-line harvester walks the tokens and prints each
  // header's identifier and status.
  Run perl = shell("timeout 60 oai_pmh --metadataPrefix oai_dc -X ListIdentifiers " + p.base + "/oai");
  CAPTURE(perl.out);
  REQUIRE(perl.status == 0);
  CHECK(all(perl.out, "identifier: (\\S+)").size() == expected);
  CHECK(all(perl.out, "status: (deleted)").size() == 1);
  // Catmandu's OAI importer, records with their oai_dc.
  Run cat = shell("timeout 60 catmandu convert OAI --url " + p.base +
                  "/oai --metadataPrefix oai_dc --handler raw to JSON --line_delimited 1");
  CAPTURE(cat.out);
  REQUIRE(cat.status == 0);
  CHECK(all(cat.out, "\"_id\":\"([^\"]+)\"").size() == expected);
  CHECK(all(cat.out, "(\"_status\":\"deleted\")").size() == 1);
}

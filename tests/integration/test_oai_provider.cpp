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
#include <sstream>

#include <nlohmann/json.hpp>

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

TEST_CASE("OAI-PMH provider: a token chain goes on at a provider started afresh (a restart, or another node)") {
  Published p(false, 10000, 10000, {}, 1ull << 30, std::chrono::milliseconds(0), false, 1);
  ScratchDir dir("oai-provider");
  const Harvest whole = harvest(p.base, "metadataPrefix=oai_dc", dir);
  REQUIRE(whole.pages == 3);
  // The first page here; the rest from a republisher that never saw the
  // token, under the same public URL (identifiers are our URLs).
  const std::string page1 = get(p.base + "/oai?verb=ListIdentifiers&metadataPrefix=oai_dc").body;
  const std::string token = first(page1, "<resumptionToken[^>]*>([^<]+)</resumptionToken>");
  REQUIRE(!token.empty());
  Beside fresh(p, p.env.store, nullptr, "fresh", 10000, p.base + "/");
  std::map<std::string, bool> heard;
  const std::regex header("<header( status=\"deleted\")?><identifier>([^<]+)</identifier>");
  for (const std::string* body : {&page1}) {
    for (auto it = std::sregex_iterator(body->begin(), body->end(), header); it != std::sregex_iterator(); ++it) {
      heard[(*it)[2].str()] = (*it)[1].matched;
    }
  }
  const std::string rest = get(fresh.base + "/oai?verb=ListIdentifiers&resumptionToken=" + token).body;
  CHECK(schema_problems(rest, dir) == "");
  for (auto it = std::sregex_iterator(rest.begin(), rest.end(), header); it != std::sregex_iterator(); ++it) {
    heard[(*it)[2].str()] = (*it)[1].matched;
  }
  CHECK(heard == whole.records);
  CHECK(heard == held(p));
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

// What one of the harvesters printed: identifier -> deleted?
using Heard = std::map<std::string, bool>;

// HTTP::OAI's command-line harvester: a block per header.
Heard heard_http_oai(const std::string& out) {
  Heard h;
  const std::regex block("identifier: (\\S+)\ndatestamp: \\S+\nstatus: (deleted)?");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), block); it != std::sregex_iterator(); ++it) {
    h[(*it)[1].str()] = (*it)[2].matched;
  }
  return h;
}

// Catmandu's importer and npm's oai-pmh: a JSON object a line.
Heard heard_json_lines(const std::string& out) {
  Heard h;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.front() != '{') {
      continue;
    }
    const nlohmann::json j = nlohmann::json::parse(line);
    std::string id;
    if (j.contains("_id")) {
      id = j["_id"];
    } else if (j.contains("identifier")) {
      id = j["identifier"];
    } else if (j.contains("header")) {
      id = j["header"]["identifier"];
    }
    h[id] = line.find("\"_status\":\"deleted\"") != std::string::npos ||
            line.find("\"status\":\"deleted\"") != std::string::npos;
  }
  return h;
}

struct Harvester {
  std::string name;
  std::function<std::string(const std::string& oai, const std::string& from)> command;
  Heard (*read)(const std::string&);
};

// Each of `harvesters` harvests the whole aggregate (a, b, c deleted),
// then, after upstream updated a, created d and deleted b, harvests from a
// responseDate taken before, merges, and must end holding what we hold.
void whole_then_from(size_t page_size, const std::vector<Harvester>& harvesters) {
  Published p(false, 10000, 10000, {}, 1ull << 30, std::chrono::milliseconds(0), false, page_size);
  const std::string oai = p.base + "/oai";
  // A new second: what is stored before `from` is not listed again.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  const std::string from = first(get(oai + "?verb=ListIdentifiers&metadataPrefix=oai_dc").body,
                                 "<responseDate>([^<]+)</responseDate>");
  REQUIRE(!from.empty());
  std::vector<Heard> heard;
  for (const auto& h : harvesters) {
    Run r = shell(h.command(oai, ""));
    CAPTURE(h.name);
    CAPTURE(r.out);
    REQUIRE(r.status == 0);
    heard.push_back(h.read(r.out));
    CHECK(heard.back() == held(p));
  }
  p.change_upstream();
  for (size_t i = 0; i < harvesters.size(); ++i) {
    Run r = shell(harvesters[i].command(oai, from));
    CAPTURE(harvesters[i].name);
    CAPTURE(r.out);
    REQUIRE(r.status == 0);
    const Heard since = harvesters[i].read(r.out);
    CHECK(since.size() == 3); // a, b, d: what changed, and no more
    for (const auto& [id, deleted] : since) {
      heard[i][id] = deleted;
    }
    CHECK(heard[i] == held(p));
    CHECK(std::count_if(heard[i].begin(), heard[i].end(), [](const auto& e) { return e.second; }) == 2);
  }
}

TEST_CASE("OAI-PMH provider: three harvesters we did not write (HTTP::OAI, Catmandu, npm oai-pmh) harvest it whole, "
          "then from a responseDate after changes, and end holding our records") {
  // Two records a page: the harvests go through resumption tokens.
  whole_then_from(2, {{"HTTP::OAI",
                       [](const std::string& oai, const std::string& from) {
                         return "timeout 60 oai_pmh --metadataPrefix oai_dc -X ListIdentifiers" +
                                (from.empty() ? "" : " --from " + from) + " " + oai;
                       },
                       heard_http_oai},
                      {"Catmandu",
                       [](const std::string& oai, const std::string& from) {
                         return "timeout 60 catmandu convert OAI --url " + oai + " --metadataPrefix oai_dc" +
                                (from.empty() ? "" : " --from " + from) +
                                " --handler raw to JSON --line_delimited 1";
                       },
                       heard_json_lines}});
  // npm's oai-pmh 2.0.3 fails on a page of exactly one record (its XML
  // reader makes that record an object, not a list: "result[field] is not
  // iterable"), whoever serves it; three a page keeps it off that bug.
  const char* npm = std::getenv("TRIBUTARY_NPM_OAI_PMH"); // deploy/install-npm-tools.sh, from deploy/test.sh
  REQUIRE_MESSAGE(npm != nullptr, "TRIBUTARY_NPM_OAI_PMH is not set: run the tests through deploy/test.sh");
  const std::string bin = npm;
  whole_then_from(3, {{"npm oai-pmh",
                       [bin](const std::string& oai, const std::string& from) {
                         return "timeout 60 " + bin + " list-records -p oai_dc" +
                                (from.empty() ? "" : " -f " + from) + " " + oai;
                       },
                       heard_json_lines}});
}

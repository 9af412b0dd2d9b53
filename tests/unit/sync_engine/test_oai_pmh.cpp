// OAI-PMH answers as real repositories write them (#36): DSpace's
// (oai_dc, com_/col_ sets, "oai_dc////100"-style tokens with cursor and
// completeListSize), EPrints' (day granularity, tokens with an
// expirationDate, records in a prefixed namespace), InvenioRDM's (second
// granularity, deleted records without metadata), and what goes wrong in
// the field: a character XML forbids inside one record, a datestamp that
// does not parse, an error answer.
#include "sync_engine/oai/oai_pmh.h"

#include <doctest/doctest.h>

using namespace tributary;
using namespace tributary::sync::oai;

namespace {

const char* k_dspace_page = R"(<?xml version="1.0" encoding="UTF-8"?>
<?xml-stylesheet type="text/xsl" href="static/style.xsl"?>
<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="http://www.openarchives.org/OAI/2.0/ http://www.openarchives.org/OAI/2.0/OAI-PMH.xsd">
<responseDate>2026-11-20T10:00:00Z</responseDate>
<request verb="ListRecords" metadataPrefix="oai_dc">https://repo.example.edu/server/oai/request</request>
<ListRecords>
<record>
<header>
<identifier>oai:repo.example.edu:123456789/101</identifier>
<datestamp>2024-03-05T09:12:44Z</datestamp>
<setSpec>com_123456789_1</setSpec>
<setSpec>col_123456789_7</setSpec>
</header>
<metadata>
<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="http://www.openarchives.org/OAI/2.0/oai_dc/ http://www.openarchives.org/OAI/2.0/oai_dc.xsd">
<dc:title>Sediment transport in braided rivers</dc:title>
<dc:creator>Doe, Jane</dc:creator>
<dc:identifier>http://hdl.handle.net/123456789/101</dc:identifier>
</oai_dc:dc>
</metadata>
</record>
<record>
<header status="deleted">
<identifier>oai:repo.example.edu:123456789/102</identifier>
<datestamp>2024-03-06T00:00:01Z</datestamp>
<setSpec>col_123456789_7</setSpec>
</header>
</record>
<resumptionToken completeListSize="2471" cursor="0">oai_dc////100</resumptionToken>
</ListRecords>
</OAI-PMH>
)";

} // namespace

TEST_CASE("OAI-PMH: a DSpace ListRecords page gives its records, a deletion, their sets and the token") {
  auto page = parse_list(k_dspace_page);
  REQUIRE(page);
  CHECK(page->warnings.empty());
  REQUIRE(page->records.size() == 2);
  const Record& r = page->records[0];
  CHECK(r.identifier == "oai:repo.example.edu:123456789/101");
  CHECK(rs::format_w3c_datetime(r.datestamp) == "2024-03-05T09:12:44Z");
  CHECK_FALSE(r.deleted);
  CHECK(r.sets == std::vector<std::string>{"com_123456789_1", "col_123456789_7"});
  // The metadata stands on its own: its namespaces declared on it.
  CHECK(r.metadata.rfind("<oai_dc:dc xmlns:oai_dc=\"http://www.openarchives.org/OAI/2.0/oai_dc/\"", 0) == 0);
  CHECK(r.metadata.find("<dc:title>Sediment transport in braided rivers</dc:title>") != std::string::npos);
  CHECK(r.metadata.find("</oai_dc:dc>") != std::string::npos);
  CHECK(page->records[1].deleted);
  CHECK(page->records[1].metadata.empty());
  CHECK(page->resumption.token == "oai_dc////100");
  CHECK(page->resumption.cursor == 0u);
  CHECK(page->resumption.complete_list_size == 2471u);
  CHECK_FALSE(page->last());
  CHECK(rs::format_w3c_datetime(*page->response_date) == "2026-11-20T10:00:00Z");
}

TEST_CASE("OAI-PMH: an EPrints page, day granularity, a prefixed OAI namespace and a token that expires, and the last "
          "page's empty token ends the list") {
  const char* eprints = R"(<?xml version='1.0' encoding='utf-8'?>
<oai:OAI-PMH xmlns:oai="http://www.openarchives.org/OAI/2.0/">
<oai:responseDate>2026-11-20T10:00:00Z</oai:responseDate>
<oai:request verb="ListRecords">https://eprints.example.ac.uk/cgi/oai2</oai:request>
<oai:ListRecords>
<oai:record><oai:header><oai:identifier>oai:eprints.example.ac.uk:4711</oai:identifier><oai:datestamp>2023-07-01</oai:datestamp><oai:setSpec>7374617475733D707562</oai:setSpec></oai:header><oai:metadata><oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>On rivers</dc:title></oai_dc:dc></oai:metadata></oai:record>
<oai:resumptionToken expirationDate="2026-11-21T10:00:00Z">metadataPrefix%3Doai_dc%26offset%3D100</oai:resumptionToken>
</oai:ListRecords>
</oai:OAI-PMH>)";
  auto page = parse_list(eprints);
  REQUIRE(page);
  REQUIRE(page->records.size() == 1);
  CHECK(rs::format_w3c_datetime(page->records[0].datestamp) == "2023-07-01T00:00:00Z");
  CHECK(page->resumption.token == "metadataPrefix%3Doai_dc%26offset%3D100");
  CHECK(rs::format_w3c_datetime(*page->resumption.expires) == "2026-11-21T10:00:00Z");
  CHECK_FALSE(page->resumption.cursor);

  const char* last = R"(<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><responseDate>2026-11-20T10:00:00Z</responseDate>
<ListIdentifiers><header><identifier>oai:x:1</identifier><datestamp>2023-07-02</datestamp></header>
<resumptionToken completeListSize="101" cursor="100"/></ListIdentifiers></OAI-PMH>)";
  auto tail = parse_list(last);
  REQUIRE(tail);
  REQUIRE(tail->records.size() == 1);
  CHECK(tail->records[0].metadata.empty());
  CHECK(tail->last());
  CHECK(tail->resumption.cursor == 100u);
}

TEST_CASE("OAI-PMH: a character XML forbids costs its record alone, with a warning naming it") {
  std::string page_text = k_dspace_page;
  // A stray control character in the first record's title (DSpace's
  // endpoint failed at page 200 on one), and U+FFFE in the second's.
  page_text.replace(page_text.find("braided"), 0, "\x0b");
  const size_t second = page_text.find("123456789/102</identifier>");
  page_text.replace(second, 0, "\xef\xbf\xbe");
  auto page = parse_list(page_text);
  REQUIRE(page);
  CHECK(page->records.empty());
  REQUIRE(page->warnings.size() == 2);
  CHECK(page->warnings[0].identifier == "oai:repo.example.edu:123456789/101");
  CHECK(page->warnings[0].line == 16); // the title's line
  CHECK(page->warnings[0].reason.find("0x0b") != std::string::npos);
  CHECK(page->warnings[1].identifier.find("123456789/") != std::string::npos);
  // The page is kept: its token still leads on.
  CHECK(page->resumption.token == "oai_dc////100");

  // One bad record among good ones: the others stay.
  std::string mixed = k_dspace_page;
  mixed.replace(mixed.find("braided"), 0, "\x01");
  auto kept = parse_list(mixed);
  REQUIRE(kept);
  REQUIRE(kept->records.size() == 1);
  CHECK(kept->records[0].identifier == "oai:repo.example.edu:123456789/102");
}

TEST_CASE("OAI-PMH: a datestamp that does not parse, or a record with no identifier, costs that record") {
  std::string text = k_dspace_page;
  text.replace(text.find("2024-03-05T09:12:44Z"), 20, "last Tuesday");
  auto page = parse_list(text);
  REQUIRE(page);
  REQUIRE(page->records.size() == 1);
  REQUIRE(page->warnings.size() == 1);
  CHECK(page->warnings[0].identifier == "oai:repo.example.edu:123456789/101");
  CHECK(page->warnings[0].reason.find("last Tuesday") != std::string::npos);
}

TEST_CASE("OAI-PMH: error answers (badResumptionToken, noRecordsMatch) are pages with errors, not failures") {
  auto bad = parse_list(R"(<?xml version="1.0" encoding="UTF-8"?>
<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><responseDate>2026-11-20T10:00:00Z</responseDate>
<request verb="ListRecords">http://export.arxiv.org/oai2</request>
<error code="badResumptionToken">Invalid or expired resumptionToken</error></OAI-PMH>)");
  REQUIRE(bad);
  CHECK(bad->has_error("badResumptionToken"));
  CHECK(bad->records.empty());
  CHECK(bad->last());
  auto none = parse_list(R"(<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><error code="noRecordsMatch"/></OAI-PMH>)");
  REQUIRE(none);
  CHECK(none->has_error("noRecordsMatch"));
  // Not OAI-PMH at all: a failure.
  CHECK_FALSE(parse_list("<html><body>Service Unavailable</body></html>"));
  CHECK_FALSE(parse_list("<OAI-PMH><ListRecords/></OAI-PMH>")); // no namespace
  CHECK_FALSE(parse_list("not xml"));
}

TEST_CASE("OAI-PMH: Identify gives granularity, deletedRecord and the earliest datestamp, ListMetadataFormats and "
          "ListSets their entries") {
  auto id = parse_identify(R"(<?xml version="1.0" encoding="UTF-8"?>
<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><responseDate>2026-11-20T10:00:00Z</responseDate>
<request verb="Identify">https://zenodo.example.org/oai2d</request>
<Identify><repositoryName>Example InvenioRDM</repositoryName><baseURL>https://zenodo.example.org/oai2d</baseURL>
<protocolVersion>2.0</protocolVersion><adminEmail>info@example.org</adminEmail>
<earliestDatestamp>2014-02-27T00:00:00Z</earliestDatestamp><deletedRecord>persistent</deletedRecord>
<granularity>YYYY-MM-DDThh:mm:ssZ</granularity></Identify></OAI-PMH>)");
  REQUIRE(id);
  CHECK(id->repository_name == "Example InvenioRDM");
  CHECK(id->granularity == Granularity::second);
  CHECK(id->deleted_record == "persistent");
  CHECK(rs::format_w3c_datetime(*id->earliest_datestamp) == "2014-02-27T00:00:00Z");

  auto formats = parse_metadata_formats(R"(<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><ListMetadataFormats>
<metadataFormat><metadataPrefix>oai_dc</metadataPrefix><schema>http://www.openarchives.org/OAI/2.0/oai_dc.xsd</schema>
<metadataNamespace>http://www.openarchives.org/OAI/2.0/oai_dc/</metadataNamespace></metadataFormat>
<metadataFormat><metadataPrefix>datacite</metadataPrefix><schema>x</schema><metadataNamespace>y</metadataNamespace></metadataFormat>
</ListMetadataFormats></OAI-PMH>)");
  REQUIRE(formats);
  REQUIRE(formats->size() == 2);
  CHECK((*formats)[1].prefix == "datacite");

  Resumption more;
  auto sets = parse_sets(R"(<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><ListSets>
<set><setSpec>com_123456789_1</setSpec><setName>Faculty of Science</setName></set>
<resumptionToken cursor="0">sets-2</resumptionToken></ListSets></OAI-PMH>)", &more);
  REQUIRE(sets);
  REQUIRE(sets->size() == 1);
  CHECK((*sets)[0].name == "Faculty of Science");
  CHECK(more.token == "sets-2");
}

TEST_CASE("OAI-PMH: request URLs at the repository's granularity, from rounded down and until up, a token alone") {
  ListRequest r;
  r.from = *rs::parse_w3c_datetime("2024-03-05T09:12:44.5Z");
  r.until = *rs::parse_w3c_datetime("2024-03-06T10:00:00.2Z");
  r.set = "col_123456789_7";
  CHECK(list_url("https://repo.example.edu/oai/request", r) ==
        "https://repo.example.edu/oai/request?verb=ListRecords&metadataPrefix=oai_dc&from=2024-03-05&until=2024-03-07"
        "&set=col_123456789_7");
  r.granularity = Granularity::second;
  CHECK(list_url("https://repo.example.edu/oai/request", r) ==
        "https://repo.example.edu/oai/request?verb=ListRecords&metadataPrefix=oai_dc&from=2024-03-05T09%3A12%3A44Z"
        "&until=2024-03-06T10%3A00%3A01Z&set=col_123456789_7");
  r.resumption_token = "metadataPrefix%3Doai_dc%26offset%3D100";
  CHECK(list_url("https://eprints.example.ac.uk/cgi/oai2", r) ==
        "https://eprints.example.ac.uk/cgi/oai2?verb=ListRecords&resumptionToken=metadataPrefix%253Doai_dc%2526offset%253D100");
  CHECK(get_record_url("https://r.example/oai", "oai:r.example:1/2", "oai_dc") ==
        "https://r.example/oai?verb=GetRecord&identifier=oai%3Ar.example%3A1%2F2&metadataPrefix=oai_dc");
  CHECK(identify_url("https://r.example/oai?x=1") == "https://r.example/oai?x=1&verb=Identify");
}

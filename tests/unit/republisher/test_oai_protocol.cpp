// The OAI-PMH protocol of our data provider: arguments checked against the
// verb, datestamps, and resumption tokens that survive a round trip and
// refuse what we did not write.
#include "republisher/oai_protocol.h"

#include <doctest/doctest.h>

using namespace tributary;
using namespace tributary::pub::oai;

namespace {

std::string error_of(std::string_view form) {
  auto r = parse_arguments(form);
  auto* e = std::get_if<ProtocolError>(&r);
  return e ? e->code : std::string("ok");
}

} // namespace

TEST_CASE("OAI-PMH arguments: every verb's required, optional and exclusive arguments") {
  CHECK(error_of("verb=Identify") == "ok");
  CHECK(error_of("") == "badVerb");
  CHECK(error_of("verb=identify") == "badVerb"); // verbs are case-sensitive
  CHECK(error_of("verb=Identify&verb=Identify") == "badVerb");
  CHECK(error_of("verb=Identify&set=a") == "badArgument");
  CHECK(error_of("verb=ListRecords") == "badArgument");
  CHECK(error_of("verb=ListRecords&metadataPrefix=oai_dc") == "ok");
  CHECK(error_of("verb=ListRecords&metadataPrefix=oai_dc&metadataPrefix=oai_dc") == "badArgument");
  CHECK(error_of("verb=ListRecords&metadataPrefix=oai_dc&from=2026-01-01&until=2026-02-01&set=source") == "ok");
  CHECK(error_of("verb=ListRecords&resumptionToken=abc") == "ok");
  CHECK(error_of("verb=ListRecords&resumptionToken=abc&metadataPrefix=oai_dc") == "badArgument");
  CHECK(error_of("verb=ListSets&resumptionToken=abc") == "ok");
  CHECK(error_of("verb=GetRecord&identifier=x") == "badArgument");
  CHECK(error_of("verb=GetRecord&identifier=x&metadataPrefix=oai_dc") == "ok");
  CHECK(error_of("verb=GetRecord&identifier=x&metadataPrefix=oai_dc&from=2026-01-01") == "badArgument");
  CHECK(error_of("verb=ListMetadataFormats&identifier=x") == "ok");
  CHECK(error_of("verb=ListIdentifiers&metadataPrefix=oai_dc&bogus=1") == "badArgument");
  CHECK(error_of("verb=Identify&x=%zz") == "badArgument");
  // A form's '+' is a space; its escapes decode.
  auto r = parse_arguments("verb=GetRecord&identifier=http%3A%2F%2Fa+b&metadataPrefix=oai_dc");
  REQUIRE(std::holds_alternative<Arguments>(r));
  CHECK(*std::get<Arguments>(r).identifier == "http://a b");
}

TEST_CASE("OAI-PMH datestamps: day and second granularity, nothing else") {
  auto day = parse_datestamp("2026-02-28");
  REQUIRE(day);
  CHECK(day->day);
  CHECK(format_datestamp(day->at) == "2026-02-28T00:00:00Z");
  CHECK(format_datestamp(day->end()) == "2026-03-01T00:00:00Z");
  auto sec = parse_datestamp("2026-02-28T23:59:59Z");
  REQUIRE(sec);
  CHECK_FALSE(sec->day);
  CHECK(format_datestamp(sec->end()) == "2026-03-01T00:00:00Z");
  for (const char* bad : {"2026-02-29", "2026-13-01", "2026-02-28T24:00:00Z", "2026-02-28T12:00:00",
                          "2026-02-28T12:00Z", "2026-02-28T12:00:00.5Z", "2026-2-28", "26-02-28", ""}) {
    CHECK_MESSAGE(!parse_datestamp(bad), bad);
  }
  // Cut, not rounded: a record is never shown as later than it was stored.
  const rs::Timestamp t = sec->at + std::chrono::microseconds(999999);
  CHECK(format_datestamp(t) == "2026-02-28T23:59:59Z");
}

TEST_CASE("OAI-PMH resumption tokens: a round trip keeps every field, a token cut or edited is refused") {
  Token t;
  t.records = false;
  t.metadata_prefix = "oai_dc";
  t.set = "source:a|b";
  t.from = rs::Timestamp(std::chrono::microseconds(1700000000123456));
  t.until_end = rs::Timestamp(std::chrono::microseconds(1800000000000000));
  t.key_datestamp = rs::Timestamp(std::chrono::microseconds(1750000000654321));
  t.key_feed = 42;
  t.key_uri = "http://example.org/a|b?c=d&e=f";
  t.cursor = 300;
  const std::string s = encode_token(t);
  for (char c : s) {
    CHECK((std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_')); // safe in a URL and in XML
  }
  auto back = decode_token(s);
  REQUIRE(back);
  CHECK(back->records == t.records);
  CHECK(back->metadata_prefix == t.metadata_prefix);
  CHECK(back->set == t.set);
  CHECK(back->from == t.from);
  CHECK(back->until_end == t.until_end);
  CHECK(back->key_datestamp == t.key_datestamp);
  CHECK(back->key_feed == t.key_feed);
  CHECK(back->key_uri == t.key_uri);
  CHECK(back->cursor == t.cursor);
  CHECK_FALSE(decode_token(s.substr(0, s.size() - 3)));
  std::string edited = s;
  edited[10] = edited[10] == 'A' ? 'B' : 'A';
  CHECK_FALSE(decode_token(edited));
  CHECK_FALSE(decode_token("not a token"));
  CHECK_FALSE(decode_token(""));
}

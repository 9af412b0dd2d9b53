// A retry's entry as a record (store/pg/entry_json.h): what a Source
// published comes back whole, including what the XML form lost.
#include "store/pg/entry_json.h"

#include "resourcesync/reader.h"

#include <doctest/doctest.h>

using namespace tributary;

namespace {

// An entry as a field Source writes one: base64 and unknown-algorithm
// hashes (read without loss), a mirror with pri, an extension attribute,
// an extension element with children, and a change of 1.1.
constexpr const char* k_list = R"(<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"
        xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:x="http://example.org/x">
  <rs:md capability="changelist" from="2026-11-01T00:00:00Z"/>
  <url>
    <loc>http://example.org/res/1</loc>
    <lastmod>2026-11-02T10:00:00.123456Z</lastmod>
    <changefreq>daily</changefreq>
    <rs:md change="updated" datetime="2026-11-02T10:00:00.5Z" hash="md5:1e0PFZ3WFsZ8ZDBVhvT+2w== blake3:abcd"
           length="8876" type="text/html" encoding="gzip" x:note="kept"/>
    <rs:ln rel="duplicate" href="http://mirror.example.org/res/1" pri="1" modified="2026-11-02T10:00:00Z"
           hash="sha-256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" length="8876" x:zone="eu"/>
    <rs:ln rel="describedby" href="http://example.org/res/1.meta" type="application/xml"/>
    <dc:creator lang="en">A. Author<dc:role>editor</dc:role></dc:creator>
  </url>
</urlset>)";

rs::Entry field_entry() {
  auto parsed = rs::parse_document(k_list);
  REQUIRE(parsed.document.entries.size() == 1);
  return parsed.document.entries[0];
}

} // namespace

TEST_CASE("Entry record: an entry as a field Source writes it comes back equal, extensions and links included") {
  rs::Entry e = field_entry();
  REQUIRE(e.md);
  REQUIRE_FALSE(e.extensions.empty());
  REQUIRE(e.links.size() == 2);
  const rs::Entry back = store::entry_from_json(store::entry_to_json(e), e.loc);
  CHECK(back == e);
  CHECK(back.md->hash == e.md->hash);
  CHECK(back.links[0].extensions == e.links[0].extensions);
  CHECK(back.extensions[0].children.size() == 1);
  CHECK(back.lastmod == e.lastmod); // to the microsecond
}

TEST_CASE("Entry record: a date-only lastmod and an inferred change time come back as they were") {
  rs::Entry e;
  e.loc = "http://example.org/sitemap-item";
  e.lastmod = *rs::parse_w3c_datetime("2026-11-02");
  e.lastmod_date_only = true;
  e.time_inferred = true;
  const rs::Entry back = store::entry_from_json(store::entry_to_json(e), e.loc);
  CHECK(back.lastmod_date_only);
  CHECK(back.time_inferred);
  CHECK(back == e);
}

TEST_CASE("Entry record: a record that is not an entry for its URI reads as the URI alone") {
  for (const std::string text : {"", "{", "[]", R"({"loc":"http://other.example/"})", R"({"loc":1})"}) {
    const rs::Entry back = store::entry_from_json(text, "http://example.org/a");
    CHECK(back.loc == "http://example.org/a");
    CHECK_FALSE(back.md);
    CHECK(back.links.empty());
  }
}

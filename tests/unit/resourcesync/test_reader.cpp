#include "resourcesync/reader.h"

#include "test_support.h"

#include <doctest/doctest.h>

using namespace tributary;
using namespace tributary::rs;
using test::has_diagnostic;

namespace {

std::string changelist(const std::string& entries, const std::string& md = "from=\"2013-01-03T00:00:00Z\"") {
  return std::string(test::k_head) +
         "<rs:ln rel=\"up\" href=\"http://example.com/capabilitylist.xml\"/>\n"
         "<rs:md capability=\"changelist\" " + md + "/>\n" + entries + "</urlset>\n";
}

class Counter : public DocumentHandler {
public:
  void on_header(const DocumentHeader&) override { ++headers; }
  void on_entry(Entry&&, uint64_t) override { ++entries; }
  int headers = 0;
  uint64_t entries = 0;
};

} // namespace

TEST_CASE("Reader: namespaces are matched by URI, not by prefix") {
  const std::string doc =
      "<sm:urlset xmlns:sm=\"http://www.sitemaps.org/schemas/sitemap/0.9\" "
      "xmlns=\"http://www.openarchives.org/rs/terms/\">"
      "<md capability=\"resourcelist\" at=\"2013-01-03T09:00:00Z\"/>"
      "<ln rel=\"up\" href=\"http://example.com/caps.xml\"/>"
      "<sm:url><sm:loc>http://example.com/res1</sm:loc><md length=\"12\"/></sm:url>"
      "</sm:urlset>";
  auto p = parse_document(doc);
  INFO(test::all_diagnostics(p.summary));
  CHECK(p.summary.valid());
  CHECK(p.document.header.capability() == Capability::resourcelist);
  REQUIRE(p.document.entries.size() == 1);
  CHECK(p.document.entries[0].md->length == 12u);

  SUBCASE("a look-alike namespace is not ResourceSync") {
    auto q = parse_document(
        "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" "
        "xmlns:rs=\"http://www.openarchives.org/rs/terms\"><rs:md capability=\"resourcelist\"/></urlset>");
    // Its <rs:md> is not ResourceSync's: a plain sitemap, read as one.
    CHECK(q.document.header.plain_sitemap);
    CHECK(has_diagnostic(q.summary, Severity::warning, "a plain Sitemap (no <rs:md>)"));
    CHECK(q.document.header.extensions.size() == 1);
  }
}

TEST_CASE("Reader: root element must be a Sitemap urlset or sitemapindex") {
  auto p = parse_document("<feed xmlns=\"http://www.w3.org/2005/Atom\"><entry/></feed>");
  CHECK(p.summary.stopped);
  CHECK(has_diagnostic(p.summary, Severity::error, "root element <feed> in namespace 'http://www.w3.org/2005/Atom' is not a Sitemap"));
  auto e = parse_document("");
  CHECK(has_diagnostic(e.summary, Severity::error, "document is empty"));
}

TEST_CASE("Reader: 1.0 change lists use lastmod, 1.1 use datetime") {
  auto p = parse_document(changelist(
      "<url><loc>http://example.com/a</loc><lastmod>2013-01-03T11:00:00Z</lastmod><rs:md change=\"created\"/></url>\n"
      "<url><loc>http://example.com/b</loc><lastmod>2000-01-01T00:00:00Z</lastmod>"
      "<rs:md change=\"updated\" datetime=\"2013-01-03T12:00:00Z\"/></url>\n"
      "<url><loc>http://example.com/c</loc><rs:md change=\"deleted\" datetime=\"2013-01-03T13:00:00Z\"/></url>\n"));
  INFO(test::all_diagnostics(p.summary));
  CHECK(p.summary.valid());
  REQUIRE(p.document.entries.size() == 3);
  CHECK(format_w3c_datetime(*p.document.entries[0].change_time()) == "2013-01-03T11:00:00Z");
  CHECK(format_w3c_datetime(*p.document.entries[1].change_time()) == "2013-01-03T12:00:00Z");
  CHECK(format_w3c_datetime(*p.document.entries[2].change_time()) == "2013-01-03T13:00:00Z");
  CHECK(p.document.entries[2].change() == Change::deleted);
}

TEST_CASE("Reader: gzip input, a UTF-8 BOM, and any chunking give the same document") {
  const std::string doc = changelist(
      "<url><loc>http://example.com/a?x=1&amp;y=2</loc><lastmod>2013-01-03T11:00:00Z</lastmod>"
      "<rs:md change=\"created\" hash=\"md5:1e0d5cb8ef6ba40c99b14c0237be735e\"/>"
      "<rs:ln rel=\"duplicate\" href=\"http://mirror.example.com/a?x=1&amp;y=2\" pri=\"1\"/></url>\n");
  auto plain = parse_document(doc);
  REQUIRE(plain.summary.valid());
  CHECK(plain.document.entries[0].loc == "http://example.com/a?x=1&y=2");
  CHECK(plain.document.entries[0].links[0].href == "http://mirror.example.com/a?x=1&y=2");

  SUBCASE("gzip, detected by magic bytes") {
    auto z = parse_document(test::gzip(doc));
    CHECK(z.summary.gzip);
    CHECK(z.summary.valid());
    CHECK(z.document == plain.document);
  }
  SUBCASE("BOM") {
    auto b = parse_document("\xEF\xBB\xBF" + doc);
    CHECK(b.summary.valid());
    CHECK(b.document == plain.document);
  }
  SUBCASE("one byte at a time, plain and gzip") {
    for (const std::string& input : {doc, test::gzip(doc)}) {
      Document d;
      struct H : DocumentHandler {
        Document& d;
        explicit H(Document& doc_) : d(doc_) {}
        void on_header(const DocumentHeader& h) override { d.header = h; }
        void on_entry(Entry&& e, uint64_t) override { d.entries.push_back(std::move(e)); }
      } h(d);
      Reader r(h);
      for (char c : input) {
        r.feed(&c, 1);
      }
      auto s = r.finish();
      CHECK(s.valid());
      CHECK(d == plain.document);
    }
  }
}

TEST_CASE("Reader: DOCTYPE and entity declarations are refused, nothing is expanded") {
  const std::string laughs =
      "<?xml version=\"1.0\"?>\n<!DOCTYPE lolz [<!ENTITY lol \"lol\">"
      "<!ENTITY lol2 \"&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;\">"
      "<!ENTITY lol3 \"&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;\">]>\n"
      "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\"><url><loc>&lol3;</loc></url></urlset>";
  Counter c;
  auto s = read_document(laughs, c);
  CHECK(s.stopped);
  CHECK(c.entries == 0);
  CHECK(has_diagnostic(s, Severity::error, "DOCTYPE declaration <!DOCTYPE lolz> is not allowed"));

  const std::string xxe =
      "<?xml version=\"1.0\"?>\n<!DOCTYPE u SYSTEM \"file:///etc/passwd\">\n"
      "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\"/>";
  auto x = read_document(xxe, c);
  CHECK(x.stopped);
  CHECK(has_diagnostic(x, Severity::error, "is not allowed"));
}

TEST_CASE("Reader: truncated and malformed XML give an error with a line") {
  const std::string doc = changelist(
      "<url><loc>http://example.com/a</loc><lastmod>2013-01-03T11:00:00Z</lastmod><rs:md change=\"created\"/></url>\n"
      "<url><loc>http://example.com/b</loc><lastmod>2013-01-03T12:00:00Z</lastmod><rs:md change=\"created\"/></url>\n");
  for (size_t cut : {size_t(10), doc.size() / 2, doc.size() - 3}) {
    CAPTURE(cut);
    Counter c;
    auto s = read_document(doc.substr(0, cut), c);
    CHECK_FALSE(s.valid());
    CHECK(has_diagnostic(s, Severity::error, "not well-formed XML"));
  }
  auto bad = parse_document(std::string(test::k_head) + "<url><loc>x</lo></url></urlset>");
  CHECK(bad.summary.stopped);
  bool seen = false;
  for (const auto& d : bad.summary.diagnostics) {
    if (d.message.find("not well-formed XML: Opening and ending tag mismatch") != std::string::npos) {
      CHECK(d.line == 3);
      seen = true;
    }
  }
  CHECK(seen);

  SUBCASE("truncated gzip") {
    std::string z = test::gzip(doc);
    auto t = parse_document(z.substr(0, z.size() - 8));
    CHECK_FALSE(t.summary.valid());
  }
}

TEST_CASE("Reader: 60,000 entries are read one by one and reported over the limit") {
  std::string entries;
  entries.reserve(60000 * 120);
  for (int i = 0; i < 60000; ++i) {
    entries += "<url><loc>http://example.com/r" + std::to_string(i) +
               "</loc><lastmod>2013-01-03T11:00:00Z</lastmod><rs:md change=\"updated\"/></url>\n";
  }
  Counter c;
  auto s = read_document(changelist(entries), c);
  CHECK(c.headers == 1);
  CHECK(c.entries == 60000);
  CHECK(s.entries == 60000);
  // Read on, with a warning: every entry reached the handler.
  CHECK(has_diagnostic(s, Severity::warning, "more than 50000 entries"));
  CHECK_FALSE(has_diagnostic(s, Severity::error, "more than 50000 entries"));
}

TEST_CASE("Reader: an attribute of 10 MB is refused, not swallowed") {
  std::string huge(10 * 1024 * 1024, 'a');
  Counter c;
  auto s = read_document(changelist("<url><loc>http://example.com/a</loc><rs:md change=\"created\" type=\"" + huge +
                                    "\"/></url>"),
                         c);
  CHECK_FALSE(s.valid());
  CHECK(s.stopped);
  CHECK(c.entries == 0);
}

namespace {

// gzip of `prefix` + `blocks` MiB of `fill` + `suffix`, compressed as a
// stream so the test never holds the expanded gigabyte.
std::string gzip_bomb(const std::string& prefix, char fill, int blocks, const std::string& suffix) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out;
  const std::string block(1 << 20, fill);
  auto pump = [&](const std::string& in, int flush) {
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    zs.avail_in = static_cast<uInt>(in.size());
    char buf[1 << 16];
    do {
      zs.next_out = reinterpret_cast<Bytef*>(buf);
      zs.avail_out = sizeof buf;
      deflate(&zs, flush);
      out.append(buf, sizeof buf - zs.avail_out);
    } while (zs.avail_out == 0);
  };
  pump(prefix, Z_NO_FLUSH);
  for (int i = 0; i < blocks; ++i) {
    pump(block, Z_NO_FLUSH);
  }
  pump(suffix, Z_FINISH);
  deflateEnd(&zs);
  return out;
}

} // namespace

TEST_CASE("Reader: gzip of 1 GB stops at the size limit") {
  SUBCASE("1 GiB of whitespace inside a valid opening: stopped at the limit, not inflated") {
    std::string bomb = gzip_bomb(test::k_head, ' ', 1024, "</urlset>");
    CHECK(bomb.size() < 8 * 1024 * 1024);
    Counter c;
    ReaderOptions o;
    auto s = read_document(bomb, c, o);
    CHECK(s.stopped);
    CHECK(s.bytes <= o.max_bytes + (1 << 16));
    CHECK(has_diagnostic(s, Severity::error, "document is larger than the limit of 134217728 bytes"));
  }
  SUBCASE("1 GiB of zeros: refused at the first bytes") {
    std::string bomb = gzip_bomb("", '\0', 1024, "");
    Counter c;
    auto s = read_document(bomb, c);
    CHECK(s.stopped);
    CHECK_FALSE(s.valid());
    CHECK(s.bytes < 16 * 1024 * 1024);
  }
}

TEST_CASE("Reader: unknown elements and attributes are kept as extensions") {
  auto p = parse_document(
      std::string(test::k_head) +
      "<rs:md capability=\"resourcelist\" at=\"2013-01-03T09:00:00Z\" xmlns:x=\"urn:x\" x:flag=\"1\"/>"
      "<rs:ln rel=\"up\" href=\"http://example.com/caps.xml\"/>"
      "<url><loc>http://example.com/a</loc><rs:size>794</rs:size>"
      "<x:info xmlns:x=\"urn:x\" x:k=\"v\">text<x:child/></x:info>"
      "<rs:md length=\"3\" bogus=\"1\"/></url></urlset>");
  INFO(test::all_diagnostics(p.summary));
  CHECK(p.summary.valid());
  CHECK(has_diagnostic(p.summary, Severity::warning, "unknown attribute 'bogus' on <rs:md>"));
  REQUIRE(p.document.header.md->extensions.size() == 1);
  CHECK(p.document.header.md->extensions[0].ns == "urn:x");
  const Entry& e = p.document.entries.at(0);
  REQUIRE(e.extensions.size() == 2);
  CHECK(e.extensions[0].ns == k_rs_ns);
  CHECK(e.extensions[0].name == "size");
  CHECK(e.extensions[0].text == "794");
  CHECK(e.extensions[1].name == "info");
  CHECK(e.extensions[1].attributes.at(0).value == "v");
  CHECK(e.extensions[1].children.at(0).name == "child");
  CHECK(e.md->extensions.at(0).name == "bogus");
}

TEST_CASE("Reader: bad values are reported with their line and left out of the model, and the entry is kept") {
  auto p = parse_document(changelist(
      "<url><loc>http://example.com/a</loc>\n<lastmod>yesterday</lastmod>\n"
      "<rs:md change=\"moved\" length=\"-1\" hash=\"md5:xyz sha-1:a9993e364706816aba3e25717850c26c9cd0d89d\"/>\n"
      "<rs:ln rel=\"duplicate\" href=\"http://m.example.com/a\" pri=\"0\"/></url>\n"));
  INFO(test::all_diagnostics(p.summary));
  CHECK_FALSE(p.summary.valid());
  CHECK(has_diagnostic(p.summary, Severity::error, "<lastmod>: 'yesterday' is not a W3C datetime"));
  CHECK(has_diagnostic(p.summary, Severity::error, "'change': 'moved' is not one of created, updated, deleted"));
  CHECK(has_diagnostic(p.summary, Severity::error, "'length': '-1' is not a non-negative integer"));
  CHECK(has_diagnostic(p.summary, Severity::error, "hash value 'md5:xyz': md5 needs 32 hex digits"));
  CHECK(has_diagnostic(p.summary, Severity::error, "'pri': '0' is outside 1..999999 (dropped)"));
  // Each bad value costs itself: the entry and the document are kept.
  CHECK(p.summary.usable());
  CHECK(p.summary.rejected_entries == 0);
  REQUIRE(p.document.entries.size() == 1);
  const Entry& e = p.document.entries[0];
  CHECK(e.loc == "http://example.com/a");
  CHECK_FALSE(e.lastmod);
  CHECK_FALSE(e.md->change);
  CHECK_FALSE(e.md->length);
  REQUIRE(e.md->hash.size() == 1); // the good hash stays
  CHECK(e.md->hash[0].algorithm == "sha-1");
  REQUIRE(e.links.size() == 1);
  CHECK_FALSE(e.links[0].pri);
  CHECK(e.links[0].href == "http://m.example.com/a");
  CHECK(e.time_inferred); // no usable time: it takes the document's from
  bool line_seen = false;
  for (const auto& d : p.summary.diagnostics) {
    if (d.message.find("yesterday") != std::string::npos) {
      CHECK(d.line == 6);
      line_seen = true;
    }
  }
  CHECK(line_seen);
}

TEST_CASE("Reader: an exception in the handler stops reading and reaches the caller") {
  struct Thrower : DocumentHandler {
    void on_entry(Entry&&, uint64_t) override { throw std::runtime_error("disk full"); }
  } t;
  CHECK_THROWS_WITH(read_document(changelist("<url><loc>http://example.com/a</loc>"
                                             "<lastmod>2013-01-03T11:00:00Z</lastmod><rs:md change=\"created\"/></url>"),
                                  t),
                    "disk full");
}

TEST_CASE("Reader: a hostile value costs that value, an unusable loc its entry, and the rest is usable") {
  const std::string long_loc = "http://example.com/" + std::string(300 * 1024, 'a');
  auto p = parse_document(changelist(
      "<url><loc>http://example.com/big</loc><lastmod>2013-01-03T01:00:00Z</lastmod>"
      "<rs:md change=\"updated\" length=\"9223372036854775808\"/></url>\n"
      "<url><loc>http://example.com/zero</loc><lastmod>0000-01-01T00:00:00Z</lastmod>"
      "<rs:md change=\"updated\"/></url>\n"
      "<url><loc>http://example.com/split</loc><lastmod>2013-01-03T02:00:00Z</lastmod>"
      "<rs:md change=\"updated\" type=\"text/plain&#13;&#10;Set-Cookie: injected=1\"/></url>\n"
      "<url><loc>" + long_loc + "</loc><lastmod>2013-01-03T03:00:00Z</lastmod><rs:md change=\"created\"/></url>\n"
      "<url><loc>http://example.com/fine</loc><lastmod>2013-01-03T04:00:00Z</lastmod>"
      "<rs:md change=\"created\" length=\"9223372036854775807\" type=\"text/html; charset=&quot;utf-8&quot;\"/></url>\n"));
  INFO(test::all_diagnostics(p.summary));
  CHECK(p.summary.usable());
  CHECK_FALSE(p.summary.valid());
  CHECK(p.summary.rejected_entries == 1);
  REQUIRE(p.document.entries.size() == 4);
  CHECK(p.document.entries[0].loc == "http://example.com/big");
  CHECK_FALSE(p.document.entries[0].md->length); // the bad value is not kept
  CHECK(p.document.entries[1].loc == "http://example.com/zero");
  CHECK_FALSE(p.document.entries[1].lastmod);
  CHECK(p.document.entries[2].loc == "http://example.com/split");
  CHECK_FALSE(p.document.entries[2].md->type); // never reaches a header
  CHECK(p.document.entries[3].loc == "http://example.com/fine");
  CHECK(p.document.entries[3].md->length == 9223372036854775807ull);
  CHECK(has_diagnostic(p.summary, Severity::error, "over the largest length accepted"));
  CHECK(has_diagnostic(p.summary, Severity::error, "outside the years 0001 to 9999"));
  CHECK(has_diagnostic(p.summary, Severity::error, "<rs:md> attribute 'type': not a media type"));
  CHECK(has_diagnostic(p.summary, Severity::error, "bytes, over the limit of 8192"));
  REQUIRE(p.rejected.size() == 1);
  CHECK(p.rejected[0].loc.empty()); // the oversized loc is not kept
}

TEST_CASE("Reader: values real writers publish off the letter of the spec are read, each with a warning") {
  ReaderOptions o;
  o.base_url = "http://example.com/dir/resourcelist.xml";
  auto p = parse_document(
      "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" xmlns:rs=\"http://www.openarchives.org/rs/terms/\">"
      "<rs:md capability=\"resourcelist\" at=\"2013-01-03T09:00:00Z\"/>\n"
      "<url><loc>res/3</loc><rs:md hash=\"md5:kAFQmDzST7DWlj99KOF/cg==\"/>"
      "<rs:ln rel=\"duplicate\" href=\"../mirror/3\"/></url>\n"
      "<url><loc>http://example.com/b</loc><lastmod>2013-01-03 10:00:00</lastmod>"
      "<rs:md hash=\"SHA-256:ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0 sha-512:abcd\"/></url>\n"
      "<url><loc>http://example.com/c</loc><lastmod>2013-01-03</lastmod></url>\n"
      "</urlset>",
      o);
  INFO(test::all_diagnostics(p.summary));
  CHECK(p.summary.valid()); // every deviation was read without loss
  REQUIRE(p.document.entries.size() == 3);
  const Entry& a = p.document.entries[0];
  CHECK(a.loc == "http://example.com/dir/res/3");
  CHECK(a.links.at(0).href == "http://example.com/mirror/3");
  CHECK(a.md->hash.at(0).hex == "900150983cd24fb0d6963f7d28e17f72");
  const Entry& b = p.document.entries[1];
  CHECK(rs::format_w3c_datetime(*b.lastmod) == "2013-01-03T10:00:00Z");
  REQUIRE(b.md->hash.size() == 1);
  CHECK(b.md->hash[0].algorithm == "sha-256");
  CHECK(p.document.entries[2].lastmod_date_only);
  CHECK_FALSE(b.lastmod_date_only);
  CHECK(has_diagnostic(p.summary, Severity::warning, "<loc> 'res/3' is relative: read as 'http://example.com/dir/res/3'"));
  CHECK(has_diagnostic(p.summary, Severity::warning, "is base64, not hex"));
  CHECK(has_diagnostic(p.summary, Severity::warning, "unknown hash algorithm 'sha-512' (ignored"));
  CHECK(has_diagnostic(p.summary, Severity::warning, "UTC for a time without a zone"));
  // Without the document's URL a relative loc cannot be used: it costs its entry only.
  auto alone = parse_document("<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" "
                              "xmlns:rs=\"http://www.openarchives.org/rs/terms/\"><rs:md capability=\"resourcelist\"/>"
                              "<url><loc>res/3</loc></url><url><loc>http://example.com/x</loc></url></urlset>");
  CHECK(alone.summary.usable());
  CHECK(alone.document.entries.size() == 1);
  CHECK(alone.summary.rejected_entries == 1);
}

TEST_CASE("Reader: a plain sitemap reads as a Resource List, a sitemapindex as its index, with a warning") {
  auto p = parse_document("<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">"
                          "<url><loc>http://example.com/a</loc><lastmod>2024-05-01</lastmod></url></urlset>");
  INFO(test::all_diagnostics(p.summary));
  CHECK(p.summary.usable());
  CHECK(p.document.header.plain_sitemap);
  CHECK(p.document.header.capability() == Capability::resourcelist);
  CHECK(has_diagnostic(p.summary, Severity::warning, "a plain Sitemap (no <rs:md>): read as a Resource List"));
  REQUIRE(p.document.entries.size() == 1);
  auto idx = parse_document("<sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">"
                            "<sitemap><loc>http://example.com/s1.xml</loc></sitemap></sitemapindex>");
  CHECK(idx.summary.usable());
  CHECK(idx.document.header.capability() == Capability::resourcelist);
  CHECK(idx.document.header.root == RootElement::sitemapindex);
  CHECK(has_diagnostic(idx.summary, Severity::warning, "read as a Resource List Index"));
}

TEST_CASE("Reader: a change without a time takes the change before it, else the document's from or until") {
  auto p = parse_document(
      "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" xmlns:rs=\"http://www.openarchives.org/rs/terms/\">"
      "<rs:md capability=\"changelist\" from=\"2013-01-03T00:00:00Z\" until=\"2013-01-04T00:00:00Z\"/>"
      "<url><loc>http://example.com/first</loc><rs:md change=\"deleted\"/></url>"
      "<url><loc>http://example.com/a</loc><lastmod>2013-01-03T11:00:00Z</lastmod><rs:md change=\"created\"/></url>"
      "<url><loc>http://example.com/b</loc><rs:md change=\"updated\"/></url>"
      "<url><loc>http://example.com/c</loc><lastmod>2013-01-03T12:00:00Z</lastmod><rs:md change=\"created\"/></url>"
      "</urlset>");
  INFO(test::all_diagnostics(p.summary));
  CHECK(p.summary.valid());
  REQUIRE(p.document.entries.size() == 4);
  CHECK(rs::format_w3c_datetime(*p.document.entries[0].change_time()) == "2013-01-03T00:00:00Z");
  CHECK(p.document.entries[0].time_inferred);
  CHECK(rs::format_w3c_datetime(*p.document.entries[2].change_time()) == "2013-01-03T11:00:00Z");
  CHECK(p.document.entries[2].time_inferred);
  CHECK_FALSE(p.document.entries[3].time_inferred);
  CHECK(has_diagnostic(p.summary, Severity::warning, "has neither <lastmod> nor a datetime attribute"));
}

TEST_CASE("Media types: what RFC 9110 writes passes, anything that could split a header does not") {
  for (const char* ok : {"text/plain", "application/xml", "text/html; charset=utf-8", "text/html;charset=\"utf-8\"",
                         "application/vnd.ms-excel", "image/svg+xml", "text/plain;"}) {
    CAPTURE(ok);
    CHECK(is_media_type(ok));
  }
  for (const char* bad : {"", "text", "text/", "/plain", "text/plain\r\nSet-Cookie: x=1", "text/plain\n",
                          "text/pl ain", "text/plain; a", "text/plain; a=\"unterminated", "t\xc3\xa9xt/plain",
                          "text/plain; a=\"b\rc\""}) {
    CAPTURE(bad);
    std::string why;
    CHECK_FALSE(is_media_type(bad, &why));
    CHECK_FALSE(why.empty());
  }
  CHECK_FALSE(is_media_type(std::string("text/plain\0x", 12)));
  CHECK_FALSE(is_media_type("text/" + std::string(300, 'a')));
}

TEST_CASE("Reader: bytes that do not decode in the declared encoding stop the reading, in pieces as whole") {
  // Found by fuzzing (tests/fuzz/regressions/reader/): fed in pieces, the
  // parser halted on the conversion error without reporting it, and the
  // document read as well-formed with no entries; a baseline would have
  // taken it for an empty list.
  const std::string doc = "<?xml version=\"1.0\" encoding=\"UTF-7\"?>\n<urlset "
                          "xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n<url><loc>http://e.org/a</loc></url>\n"
                          "<x" + std::string(1, '\0') + "pab/>\n<url><loc>http://e.org/b</loc></url></urlset>\n";
  struct Count : DocumentHandler {
    int n = 0;
    void on_entry(Entry&&, uint64_t) override { ++n; }
  };
  for (size_t piece : {size_t{7}, size_t{64}, doc.size()}) {
    CAPTURE(piece);
    Count h;
    Reader r(h);
    for (size_t at = 0; at < doc.size(); at += piece) {
      if (!r.feed(std::string_view(doc).substr(at, piece))) {
        break;
      }
    }
    const ReadSummary s = r.finish();
    CHECK(s.stopped);
    CHECK_FALSE(s.valid());
    CHECK_FALSE(s.usable());
    CHECK(s.errors >= 1);
  }
}

TEST_CASE("Reader: documents are read as UTF-8 whatever they declare, and bytes that are not UTF-8 make one unusable alike in pieces and whole") {
  // Found by fuzzing (tests/fuzz/regressions/reader/): with an unknown
  // declared encoding, or a stray byte, libxml2 read the same bytes
  // differently whole and in pieces.
  struct Count : DocumentHandler {
    std::vector<std::string> locs;
    void on_entry(Entry&& e, uint64_t) override { locs.push_back(e.loc); }
    void on_rejected_entry(Entry&& e, uint64_t, const std::string&) override { locs.push_back(e.loc); }
  };
  auto read = [](const std::string& doc, size_t piece, Count& h) {
    Reader r(h);
    for (size_t at = 0; at < doc.size(); at += piece) {
      if (!r.feed(std::string_view(doc).substr(at, piece))) {
        break;
      }
    }
    return r.finish();
  };
  const std::string head = "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" "
                           "xmlns:rs=\"http://www.openarchives.org/rs/terms/\"><rs:md capability=\"resourcelist\" "
                           "at=\"2026-01-01T00:00:00Z\"/>\n<url><loc>http://e.org/caf\xc3\xa9</loc></url>\n";
  for (const char* declared : {"UTF-8", "ISO-8859-1", "UTF8-", "nonesuch"}) {
    CAPTURE(declared);
    const std::string doc =
        std::string("<?xml version=\"1.0\" encoding=\"") + declared + "\"?>\n" + head + "</urlset>\n";
    for (size_t piece : {size_t{1}, size_t{7}, doc.size()}) {
      CAPTURE(piece);
      Count h;
      const ReadSummary s = read(doc, piece, h);
      CHECK(s.valid());
      REQUIRE(h.locs.size() == 1);
      CHECK(h.locs[0] == "http://e.org/caf\xc3\xa9"); // not read as Latin-1
    }
  }
  // A lone continuation byte, an overlong form, a surrogate, a lead byte
  // without its continuation, one cut by the end of the document.
  for (const std::string& bad : {std::string("\x80"), std::string("\xc0\xaf"), std::string("\xed\xa0\x80"),
                                 std::string("\xc8l"), std::string("\xff")}) {
    const std::string doc = head + "<url><loc>http://e.org/" + bad + "</loc></url></urlset>\n";
    std::optional<uint64_t> errors;
    for (size_t piece : {size_t{1}, size_t{2}, size_t{7}, doc.size()}) {
      CAPTURE(piece);
      Count h;
      const ReadSummary s = read(doc, piece, h);
      CHECK_FALSE(s.usable()); // never applied
      CHECK(h.locs.size() == 2);
      REQUIRE_FALSE(s.diagnostics.empty());
      CHECK(s.diagnostics.back().message.rfind("not UTF-8: ", 0) == 0);
      CHECK(s.diagnostics.back().message.find("the first at byte " + std::to_string(head.size() + 23)) !=
            std::string::npos);
      if (errors) {
        CHECK(s.errors == *errors); // the same, however it was cut
      }
      errors = s.errors;
    }
  }
  Count h;
  const ReadSummary cut = read(head + "</urlset>\n\xe2\x82", 3, h); // a sequence cut by the end
  CHECK_FALSE(cut.usable());
}

TEST_CASE("Reader: a datetime written again is read as before, and one that was repaired or dropped is said again each time") {
  // The reader keeps the datetime it read last without a word (an entry's
  // <lastmod> and datetime are most often one): what it returns for the same
  // text must be what reading it gives, and a repair or an error must not
  // be kept and lose its message.
  auto p = parse_document(changelist(
      "<url><loc>http://example.com/a</loc><lastmod>2013-01-03T10:00:00Z</lastmod>"
      "<rs:md change=\"updated\" datetime=\"2013-01-03T10:00:00Z\"/></url>\n"
      "<url><loc>http://example.com/b</loc><lastmod>2013-01-03 10:00:00</lastmod>"
      "<rs:md change=\"updated\" datetime=\"2013-01-03 10:00:00\"/></url>\n"
      "<url><loc>http://example.com/c</loc><lastmod>2013-13-03T10:00:00Z</lastmod>"
      "<rs:md change=\"updated\" datetime=\"2013-13-03T10:00:00Z\"/></url>\n"
      "<url><loc>http://example.com/d</loc><lastmod>2013-01-03T10:00:01Z</lastmod>"
      "<rs:md change=\"updated\" datetime=\"2013-01-03T10:00:00Z\"/></url>\n"));
  REQUIRE(p.document.entries.size() == 4);
  const auto& e = p.document.entries;
  CHECK(rs::format_w3c_datetime(*e[0].lastmod) == "2013-01-03T10:00:00Z");
  CHECK(rs::format_w3c_datetime(*e[0].md->datetime) == "2013-01-03T10:00:00Z");
  CHECK(rs::format_w3c_datetime(*e[1].md->datetime) == "2013-01-03T10:00:00Z");
  CHECK_FALSE(e[2].lastmod.has_value()); // (its datetime is the change's before it, as the reader infers)
  CHECK(rs::format_w3c_datetime(*e[3].lastmod) == "2013-01-03T10:00:01Z");
  CHECK(rs::format_w3c_datetime(*e[3].md->datetime) == "2013-01-03T10:00:00Z");
  size_t repaired = 0;
  size_t dropped = 0;
  for (const auto& d : p.summary.diagnostics) {
    repaired += d.message.find("'2013-01-03 10:00:00' is not a W3C datetime; read as") != std::string::npos;
    dropped += d.message.find("'2013-13-03T10:00:00Z' is not a W3C datetime (") != std::string::npos;
  }
  CHECK(repaired == 2);
  CHECK(dropped == 2);
}

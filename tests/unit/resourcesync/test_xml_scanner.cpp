// The XML scanner (resourcesync/xml_scanner.h): what it reports for the
// XML Sitemaps are written in, and what it refuses. Its agreement with
// libxml2 on arbitrary bytes is the fuzz target xml_scanner's
// (tests/fuzz/xml_oracle.cpp), whose saved inputs the fuzz-inputs test runs.
#include "resourcesync/xml_scanner.h"

#include "resourcesync/xml_chars.h"
#include "resourcesync/xml_start_tag.h"

#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

using namespace tributary::rs::xml;

namespace {

struct Recorder : ScannerHandler {
  std::string events;
  std::vector<std::string> errors;
  std::vector<uint64_t> error_lines;
  std::vector<uint64_t> start_lines;
  bool fatal = false;
  std::string doctype_name;
  Scanner* scanner = nullptr;

  void start_element(std::string_view name, std::string_view prefix, std::string_view ns,
                     std::span<const Namespace> declared, std::span<const Attribute> attrs) override {
    events += "<" + std::string(prefix.empty() ? "" : std::string(prefix) + ":") + std::string(name) + "{" +
              std::string(ns) + "}";
    for (const auto& d : declared) {
      events += " ns(" + std::string(d.prefix) + "=" + std::string(d.uri) + ")";
    }
    for (const auto& a : attrs) {
      events += " " + std::string(a.name) + "{" + std::string(a.ns) + "}=[" + std::string(a.value) + "]";
    }
    events += ">";
    start_lines.push_back(scanner ? scanner->line() : 0);
  }
  void end_element() override { events += "</>"; }
  void characters(std::string_view text) override { events += std::string(text); }
  void doctype(std::string_view name) override {
    doctype_name = std::string(name);
    scanner->stop();
  }
  void xml_error(uint64_t line, std::string message, bool is_fatal) override {
    errors.push_back(std::move(message));
    error_lines.push_back(line);
    fatal = fatal || is_fatal;
  }
};

// Reads `doc` in pieces of `piece` bytes (0: whole).
Recorder scan(const std::string& doc, size_t piece = 0) {
  Recorder r;
  Scanner s(r, 1 << 20);
  r.scanner = &s;
  const size_t step = piece == 0 ? doc.size() + 1 : piece;
  for (size_t at = 0; at < doc.size(); at += step) {
    s.feed(std::string_view(doc).substr(at, step));
  }
  s.finish();
  return r;
}

bool has_error(const Recorder& r, const std::string& part) {
  for (const auto& e : r.errors) {
    if (e.find(part) != std::string::npos) {
      return true;
    }
  }
  return false;
}

} // namespace

TEST_CASE("XML scanner: a Sitemap's elements, namespaces, attributes and text, whole and in every piece size") {
  const std::string doc =
      "\xEF\xBB\xBF<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<!-- written by hand -->\n"
      "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" xmlns:rs=\"http://www.openarchives.org/rs/terms/\">\n"
      "<rs:md capability='changelist' from=\"2013-01-03T00:00:00Z\"/>\n"
      "<url><loc>http://example.com/a?x=1&amp;y=&#x32;&#51;&lt;&gt;&quot;&apos;</loc>"
      "<rs:md change=\"updated\" hash=\"md5:1e0d\"/></url>\n"
      "</urlset>\n";
  const std::string expected =
      "<urlset{http://www.sitemaps.org/schemas/sitemap/0.9} ns(=http://www.sitemaps.org/schemas/sitemap/0.9) "
      "ns(rs=http://www.openarchives.org/rs/terms/)>\n"
      "<rs:md{http://www.openarchives.org/rs/terms/} capability{}=[changelist] from{}=[2013-01-03T00:00:00Z]></>\n"
      "<url{http://www.sitemaps.org/schemas/sitemap/0.9}><loc{http://www.sitemaps.org/schemas/sitemap/0.9}>"
      "http://example.com/a?x=1&y=23<>\"'</><rs:md{http://www.openarchives.org/rs/terms/} change{}=[updated] "
      "hash{}=[md5:1e0d]></></>\n</>";
  for (size_t piece : {size_t(0), size_t(1), size_t(2), size_t(3), size_t(7), size_t(64)}) {
    CAPTURE(piece);
    Recorder r = scan(doc, piece);
    CHECK(r.errors.empty());
    // Character data may come in pieces; concatenated it is the same.
    CHECK(r.events == expected);
  }
  Recorder whole = scan(doc);
  REQUIRE(whole.start_lines.size() == 5);
  CHECK(whole.start_lines[0] == 3); // <urlset>
  CHECK(whole.start_lines[2] == 5); // <url>
}

TEST_CASE("XML scanner: line ends and whitespace are normalized as XML says") {
  // Text: \r\n and \r become \n, in CDATA too. Attribute values: each
  // literal tab, line feed and carriage return (a \r\n once) becomes a
  // space; a character reference stays what it is.
  Recorder r = scan("<a x=\"1\t2\r\n3\n4&#10;5\">l1\r\nl2\rl3<![CDATA[c1\r\nc2 <not a tag> ]]></a>");
  CHECK(r.errors.empty());
  CHECK(r.events == "<a{} x{}=[1 2 3 4\n5]>l1\nl2\nl3c1\nc2 <not a tag> </>");
  // A \r\n cut between two pieces is still one line end.
  CHECK(scan("<a>x\r\ny</a>", 2).events == "<a{}>x\ny</>");
}

TEST_CASE("XML scanner: namespaces are scoped to their element, and an unbound prefix is an error") {
  Recorder r = scan("<a xmlns=\"urn:d\" xmlns:p=\"urn:p\"><p:b p:x=\"1\" y=\"2\"><c xmlns=\"\"/></p:b><d/></a>");
  CHECK(r.errors.empty());
  CHECK(r.events == "<a{urn:d} ns(=urn:d) ns(p=urn:p)><p:b{urn:p} x{urn:p}=[1] y{}=[2]><c{} ns(=)></></><d{urn:d}></></>");
  Recorder unbound = scan("<a><q:b/></a>");
  CHECK_FALSE(unbound.fatal);
  CHECK(has_error(unbound, "Namespace prefix q on b is not defined"));
  Recorder out_of_scope = scan("<a><b xmlns:q=\"urn:q\"/><q:c/></a>");
  CHECK(has_error(out_of_scope, "Namespace prefix q on c is not defined"));
  // Prefixes beyond ASCII (read by the slow path of names) resolve alike.
  Recorder wide = scan("<a xmlns:\xC3\xA9=\"urn:e\"><\xC3\xA9:b \xC3\xA9:x=\"1\" y\xC3\xA9=\"2\"/></a>");
  CHECK(wide.errors.empty());
  CHECK(wide.events == "<a{} ns(\xC3\xA9=urn:e)><\xC3\xA9:b{urn:e} x{urn:e}=[1] y\xC3\xA9{}=[2]></></>");
  // The same attribute twice, by name or by namespace and local name.
  CHECK(scan("<a x=\"1\" x=\"2\"/>").fatal);
  CHECK(has_error(scan("<a xmlns:p=\"urn:1\" xmlns:q=\"urn:1\" p:k=\"1\" q:k=\"2\"/>"), "redefined"));
}

TEST_CASE("XML scanner: what is not well-formed stops it, with the line") {
  struct Case {
    const char* doc;
    const char* error;
  };
  const Case cases[] = {
      {"<a><b></a>", "Opening and ending tag mismatch: b line 1 and a"},
      // The open element's name, then not '>': another name, or more of it.
      {"<ab><abc></abcd></ab>", "Opening and ending tag mismatch: abc line 1 and abcd"},
      {"<ab><abc></ab></ab>", "Opening and ending tag mismatch: abc line 1 and ab"},
      {"<ab><abc></abc x></ab>", "expected '>'"},
      {"<a>\n<b>", "Premature end of data in tag b line 2"},
      {"<a/><b/>", "Extra content at the end of the document"},
      {"<a/>text", "Extra content at the end of the document"},
      {"text<a/>", "Start tag expected"},
      {"", "Document is empty"},
      {"<a>&nbsp;</a>", "Entity 'nbsp' not defined"},
      {"<a>&amp</a>", "EntityRef: expecting ';'"},
      {"<a>&#0;</a>", "invalid xmlChar value 0"},
      {"<a>&#xD800;</a>", "invalid xmlChar value 55296"},
      {"<a>\x01</a>", "PCDATA: invalid xmlChar value 1"},
      {"<a>\xEF\xBF\xBF</a>", "invalid xmlChar value 65535"},
      {"<a>]]></a>", "Sequence ']]>' not allowed in content"},
      {"<a x=\"<\"/>", "Unescaped '<' not allowed in attributes values"},
      {"<a x/>", "Specification mandates value for attribute x"},
      {"<a x=\"1\"y=\"2\"/>", "attributes construct error"},
      {"<a><!-- a -- b --></a>", "Double hyphen within comment"},
      {" <?xml version=\"1.0\"?><a/>", "XML declaration allowed only at the start of the document"},
      {"<?xml version=\"2.0\"?><a/>", "Unsupported version '2.0'"},
      {"<?xml encoding=\"UTF-8\"?><a/>", "Malformed declaration expecting version"},
      {"<1a/>", "StartTag: invalid element name"},
      {"<a><![CDATA[x</a>", "CDATA section: the document ends inside it"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.doc);
    for (size_t piece : {size_t(0), size_t(1)}) {
      CAPTURE(piece);
      Recorder r = scan(c.doc, piece);
      CHECK(r.fatal);
      CHECK(has_error(r, c.error));
    }
  }
  Recorder r = scan("<a>\n\n<b>\n</c></a>");
  REQUIRE(r.error_lines.size() == 1);
  CHECK(r.error_lines[0] == 4);
}

TEST_CASE("XML scanner: a DOCTYPE goes to the handler before anything it declares is read") {
  Recorder r = scan("<?xml version=\"1.0\"?>\n<!DOCTYPE lolz [<!ENTITY lol \"lol\">]><lolz>&lol;</lolz>");
  CHECK(r.doctype_name == "lolz");
  CHECK(r.events.empty());
}

TEST_CASE("XML scanner: a construct cut into single bytes is read once, not again from its start at each byte") {
  // A start tag of 256 KiB trickled a byte at a time (a hostile server's
  // trickle): each byte resumes the search for the tag's end where it
  // stopped. Read from the start at every byte it would take some 30
  // billion steps; this test would not end.
  std::string doc = "<a x=\"" + std::string(256 * 1024, 'v') + "\" y='>'>t</a>";
  Recorder r = scan(doc, 1);
  CHECK(r.errors.empty());
  CHECK(r.events == "<a{} x{}=[" + std::string(256 * 1024, 'v') + "] y{}=[>]>t</>");
  // Past the limit, a construct is refused rather than held.
  Recorder big;
  Scanner s(big, 1024);
  big.scanner = &s;
  s.feed("<a x=\"" + std::string(4096, 'v'));
  CHECK(big.fatal);
  CHECK(has_error(big, "longer than the limit of 1024 bytes"));
}

TEST_CASE("XML scanner: a start tag with half a million attributes is read in one pass, its duplicates found") {
  // Pairwise, 500,000 names would take 10^11 comparisons: this test would
  // not end. Past a few, the names go through a set.
  std::string tag = "<a";
  for (int i = 0; i < 500000; ++i) {
    tag += " a" + std::to_string(i) + "=''";
  }
  Recorder many;
  Scanner s(many, 8 << 20);
  many.scanner = &s;
  s.feed(tag + "/>");
  s.finish();
  CHECK(many.errors.empty());
  CHECK(many.events.size() > tag.size());
  Recorder dup;
  Scanner d(dup, 8 << 20);
  dup.scanner = &d;
  d.feed(tag + " a499=''/>");
  d.finish();
  CHECK(has_error(dup, "Attribute a499 redefined"));
  // And under two prefixes bound to one namespace, past a few.
  std::string ns = "<a xmlns:p='urn:x' xmlns:q='urn:x'";
  for (int i = 0; i < 100; ++i) {
    ns += " p:k" + std::to_string(i) + "=''";
  }
  CHECK(has_error(scan(ns + " q:k77=''/>"), "Namespaced Attribute k77 in 'urn:x' redefined"));
}

TEST_CASE("XML scanner: more than 256 namespace declarations in scope stop it") {
  // Every name is looked up among the declarations in scope: a million of
  // them would make each element of a long document cost a million steps.
  // (Sitemaps with every extension in use declare about ten.)
  std::string ok = "<a";
  for (int i = 0; i < 256; ++i) {
    ok += " xmlns:p" + std::to_string(i) + "='urn:" + std::to_string(i) + "'";
  }
  CHECK(scan(ok + "><p255:b/></a>").errors.empty());
  Recorder r = scan(ok + "><b xmlns:q='urn:q'/></a>");
  CHECK(r.fatal);
  CHECK(has_error(r, "more than 256 namespace declarations in scope"));
}

TEST_CASE("XML scanner: line ends in indented text are counted once, whether the text is white space alone or "
          "holds a value, in every piece size") {
  // White space before '<' is read by a fast path; white space before a
  // value is read by the general one, which starts where the fast path
  // stopped. Each line end counts once either way.
  const std::string doc = "<urlset>\n  <url>\n    <loc>\n      http://e.org/a\n    </loc>\n"
                          "    <lastmod>\n\n 2020-01-01\t\n</lastmod>\n  </url>\n  <url>\n</urlset>";
  for (size_t piece : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{5}, size_t{7}}) {
    INFO("piece " << piece);
    Recorder r = scan(doc, piece);
    REQUIRE(r.start_lines.size() == 5);
    CHECK(r.start_lines[1] == 2);  // the first <url>
    CHECK(r.start_lines[2] == 3);  // <loc>
    CHECK(r.start_lines[3] == 6);  // <lastmod>, after a value's text of two line ends
    CHECK(r.start_lines[4] == 11); // the second <url>, after three more in <lastmod>
    REQUIRE(r.error_lines.size() == 1); // </urlset> closes the open <url>
    CHECK(r.error_lines[0] == 12);
  }
}

TEST_CASE("XML scanner: the first byte that needs a second look is found sixteen at a time as one at a time") {
  // chars::find_stop skips runs of ordinary bytes sixteen at a time where
  // there is SSE2: it must stop where a byte-wise look stops, at every
  // offset and length, whatever the neighbours of the byte are. For the
  // scanner's text (three named bytes, a tab passed) and the writer's
  // escaping (four named bytes, every control a stop).
  struct Case {
    chars::StopBytes stops;
    std::string named;
    std::string passed;
  };
  const Case cases[] = {{chars::StopBytes("&]\xEF", "\t"), "&]\xEF", "\t"},
                        {chars::StopBytes("&<>\""), "&<>\"", ""}};
  const std::string alphabet = std::string("abcXYZ09/:.-_ \t\t\t\xC3\xA9\xEF\xBF", 22) + "&]<>\"\n\r\x01\x1F";
  for (const Case& c : cases) {
    // What the case's stops should be, written out one byte at a time.
    auto stops_at = [&c](char b) {
      const auto u = static_cast<unsigned char>(b);
      return (u < 0x20 && c.passed.find(b) == std::string::npos) || c.named.find(b) != std::string::npos;
    };
    std::mt19937 rng(7);
    for (int round = 0; round < 20000; ++round) {
      std::string s(rng() % 70, 'a');
      const int specials = static_cast<int>(rng() % 3);
      for (auto& b : s) {
        // Mostly ordinary bytes, some rare ones, so that long runs occur.
        b = (rng() % 16 == 0 || specials == 2) ? alphabet[rng() % alphabet.size()] : "httpexample/0123"[rng() % 16];
      }
      const size_t from = s.empty() ? 0 : rng() % (s.size() + 1);
      const char* begin = s.data() + from;
      const char* end = s.data() + s.size();
      const char* expected = begin;
      while (expected < end && !stops_at(*expected)) {
        ++expected;
      }
      const char* found = chars::find_stop(begin, end, c.stops);
      INFO("named " << c.named.size() << ", round " << round << ", from " << from << ", size " << s.size());
      REQUIRE(found - s.data() == expected - s.data());
    }
  }
}

TEST_CASE("XML scanner: a namespace its handler interned is reported as that very view, wherever and however it is bound") {
  static const std::string interned = "urn:interned";
  struct Views : ScannerHandler {
    // Each namespace reported, and whether it was the interned view (a
    // view is valid during its event only).
    std::vector<std::pair<std::string, bool>> ns;
    void start_element(std::string_view, std::string_view, std::string_view n, std::span<const Namespace>,
                       std::span<const Attribute> attrs) override {
      ns.emplace_back(n, n.data() == interned.data());
      for (const auto& a : attrs) {
        ns.emplace_back(a.ns, a.ns.data() == interned.data());
      }
    }
    void end_element() override {}
    void characters(std::string_view) override {}
    void doctype(std::string_view) override {}
    void xml_error(uint64_t, std::string, bool) override {}
  } h;
  Scanner s(h, 1 << 20);
  s.intern(interned);
  s.feed("<a xmlns=\"urn:interned\"><p:b xmlns:p=\"urn:interned\" p:x=\"1\"/><c xmlns=\"urn:other\"/>"
         "<d xmlns=\"urn:interned\"/></a>");
  s.finish();
  REQUIRE(h.ns.size() == 5);
  for (size_t i : {0, 1, 2, 4}) {
    INFO(i);
    CHECK(h.ns[i].first == "urn:interned");
    CHECK(h.ns[i].second);
  }
  CHECK(h.ns[3].first == "urn:other");
  CHECK_FALSE(h.ns[3].second);
}

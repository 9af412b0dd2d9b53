#include "resourcesync/reader.h"
#include "resourcesync/writer.h"

#include "test_support.h"

#include <doctest/doctest.h>

using namespace tributary;
using namespace tributary::rs;

namespace {

Timestamp t(const char* s) { return *parse_w3c_datetime(s); }

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) {
    ++n;
  }
  return n;
}

Document full_change_list() {
  Document d;
  d.header.md = Metadata{};
  d.header.md->capability = "changelist";
  d.header.md->from = t("2013-01-03T00:00:00Z");
  d.header.links.push_back(Link{.rel = "up", .href = "http://example.com/caps.xml"});
  d.header.namespaces.emplace_back("dc", "http://purl.org/dc/elements/1.1/");
  Entry e;
  e.loc = "http://example.com/a?x=1&y=<2>\"'";
  e.lastmod = t("2013-01-03T11:00:00.25+01:00");
  e.changefreq = "daily";
  e.md = Metadata{};
  e.md->change = Change::updated;
  e.md->datetime = t("2013-01-03T11:00:00Z");
  e.md->hash = {HashValue{"md5", "1e0d5cb8ef6ba40c99b14c0237be735e"}};
  e.md->length = 8876;
  e.md->type = "text/html; charset=\"utf-8\"";
  e.md->encoding = "gzip";
  e.md->extensions.push_back(ExtensionAttribute{"urn:ext", "e", "score", "0.5"});
  e.links.push_back(Link{.rel = "duplicate", .href = "http://mirror.example.com/a", .pri = 1});
  Link via{.rel = "via", .href = "http://original.example.com/a"};
  via.modified = t("2013-01-03T07:00:00Z");
  via.hash = {HashValue{"sha-256", std::string(64, 'a')}};
  via.length = 42;
  via.path = "/a";
  via.type = "text/plain";
  e.links.push_back(via);
  XmlNode dc{.ns = "http://purl.org/dc/elements/1.1/", .prefix = "dc", .name = "title"};
  dc.text = "A & B";
  e.extensions.push_back(dc);
  XmlNode other{.ns = "urn:other", .prefix = "o", .name = "x"};
  other.attributes.push_back(ExtensionAttribute{"", "", "plain", "1"});
  other.children.push_back(XmlNode{.ns = "urn:other", .prefix = "o", .name = "y"});
  e.extensions.push_back(other);
  d.entries.push_back(e);
  return d;
}

} // namespace

TEST_CASE("Writer: read -> write -> read gives an equal model, every field included") {
  Document d = full_change_list();
  std::string xml = write_document(d);
  auto p = parse_document(xml);
  INFO(xml);
  INFO(test::all_diagnostics(p.summary));
  CHECK(p.summary.valid());
  CHECK(p.document == d);
  CHECK(count(xml, "xmlns:rs=") == 1);
  CHECK(count(xml, "xmlns=\"http://www.sitemaps.org") == 1);
  CHECK(count(xml, "xmlns:dc=") == 1); // declared once on the root
  CHECK(xml.find("a?x=1&amp;y=&lt;2&gt;\"'</loc>") != std::string::npos);
  CHECK(xml.find("<lastmod>2013-01-03T10:00:00.250000Z</lastmod>") != std::string::npos);
  // Writing the re-read model gives the same bytes.
  CHECK(write_document(p.document) == xml);
}

TEST_CASE("PartitionedWriter: one part is published as a plain document at the index URL") {
  std::vector<WrittenPart> parts;
  Document d = full_change_list();
  PartitionedWriter w(d.header, "http://example.com/changelist.xml",
                      [](size_t n) { return "http://example.com/changelist-" + std::to_string(n) + ".xml"; },
                      [&](WrittenPart&& p) { parts.push_back(std::move(p)); });
  w.add(d.entries[0]);
  CHECK(w.finish() == 1);
  REQUIRE(parts.size() == 1);
  CHECK(parts[0].url == "http://example.com/changelist.xml");
  CHECK_FALSE(parts[0].is_index);
  auto p = parse_document(parts[0].xml);
  CHECK(p.summary.valid());
  CHECK(p.document.header.find_link("index") == nullptr);
}

TEST_CASE("PartitionedWriter: splits at the entry limit and links parts to the index") {
  DocumentHeader h;
  h.md = Metadata{};
  h.md->capability = "resourcelist";
  h.md->at = t("2013-01-03T09:00:00Z");
  h.links.push_back(Link{.rel = "up", .href = "http://example.com/caps.xml"});
  std::vector<WrittenPart> parts;
  PartitionedWriter w(h, "http://example.com/rl.xml",
                      [](size_t n) { return "http://example.com/rl-" + std::to_string(n) + ".xml"; },
                      [&](WrittenPart&& p) { parts.push_back(std::move(p)); }, PartitionLimits{.max_entries = 3});
  for (int i = 0; i < 8; ++i) {
    w.add(Entry{.loc = "http://example.com/r" + std::to_string(i)});
  }
  CHECK(w.finish() == 3);
  REQUIRE(parts.size() == 4);
  CHECK(parts[3].is_index);
  CHECK(parts[3].url == "http://example.com/rl.xml");
  uint64_t total = 0;
  for (size_t i = 0; i < 3; ++i) {
    auto p = parse_document(parts[i].xml);
    INFO(parts[i].xml);
    CHECK(p.summary.valid());
    CHECK(parts[i].url == "http://example.com/rl-" + std::to_string(i + 1) + ".xml");
    REQUIRE(p.document.header.find_link("index"));
    CHECK(p.document.header.find_link("index")->href == "http://example.com/rl.xml");
    CHECK(p.document.header.find_link("up")->href == "http://example.com/caps.xml");
    total += p.document.entries.size();
  }
  CHECK(total == 8);
  auto index = parse_document(parts[3].xml);
  CHECK(index.summary.valid());
  CHECK(index.document.header.root == RootElement::sitemapindex);
  REQUIRE(index.document.entries.size() == 3);
  CHECK(index.document.entries[1].loc == "http://example.com/rl-2.xml");
  CHECK(index.document.entries[1].md->at == h.md->at);
}

TEST_CASE("PartitionedWriter: change list parts carry from/until and the last stays open") {
  DocumentHeader h;
  h.md = Metadata{};
  h.md->capability = "changelist";
  h.md->from = t("2013-01-01T00:00:00Z");
  h.links.push_back(Link{.rel = "up", .href = "http://example.com/caps.xml"});
  std::vector<WrittenPart> parts;
  PartitionedWriter w(h, "http://example.com/cl.xml",
                      [](size_t n) { return "http://example.com/cl-" + std::to_string(n) + ".xml"; },
                      [&](WrittenPart&& p) { parts.push_back(std::move(p)); },
                      PartitionLimits{.max_entries = 50000, .max_bytes = 2000});
  for (int i = 0; i < 20; ++i) {
    Entry e{.loc = "http://example.com/r" + std::to_string(i)};
    e.md = Metadata{};
    e.md->change = Change::created;
    e.md->datetime = t("2013-01-02T00:00:00Z") + std::chrono::hours(i);
    w.add(e);
  }
  size_t n = w.finish();
  CHECK(n > 2);
  REQUIRE(parts.size() == n + 1);
  for (size_t i = 0; i < n; ++i) {
    CHECK(parts[i].xml.size() <= 2000);
    auto p = parse_document(parts[i].xml);
    INFO(parts[i].xml);
    CHECK(p.summary.valid());
    if (i + 1 < n) {
      CHECK(p.document.header.md->until.has_value());
    } else {
      CHECK_FALSE(p.document.header.md->until.has_value());
    }
  }
  auto index = parse_document(parts[n].xml);
  INFO(parts[n].xml);
  CHECK(index.summary.valid());
  CHECK(index.document.entries[0].md->from == h.md->from);
  CHECK(index.document.entries[1].md->from == index.document.entries[0].md->until);
  CHECK_FALSE(index.document.entries.back().md->until.has_value());
}

TEST_CASE("Writer: control characters that XML cannot carry are dropped, the rest escaped") {
  Document d;
  d.header.md = Metadata{};
  d.header.md->capability = "resourcelist";
  d.header.md->at = t("2013-01-03T09:00:00Z");
  Entry e{.loc = std::string("http://example.com/a\x01" "b\tc")};
  e.md = Metadata{};
  e.md->encoding = "gzip;\n x=\"1\"\x1f"; // (a type like this would be refused when read)
  d.entries.push_back(e);
  std::string xml = write_document(d);
  auto p = parse_document(xml);
  INFO(xml);
  CHECK(p.summary.valid());
  CHECK(p.document.entries.at(0).loc == "http://example.com/ab\tc");
  CHECK(*p.document.entries.at(0).md->encoding == "gzip;\n x=\"1\"");
}

TEST_CASE("gzip: one member that zlib inflates back to the input, at every level, empty and large alike") {
  std::string big;
  for (int i = 0; big.size() < (1u << 20); ++i) {
    big += "<url><loc>http://example.org/r" + std::to_string(i * 7919 % 100003) + "</loc></url>\n";
  }
  for (const std::string& input : {std::string(), std::string("x"), big}) {
    for (int level : {-1, 0, 1, 6, 9, 42}) {
      CAPTURE(input.size());
      CAPTURE(level);
      const std::string gz = rs::gzip(input, level);
      REQUIRE(gz.size() >= 18);
      CHECK(static_cast<unsigned char>(gz[0]) == 0x1f);
      CHECK(static_cast<unsigned char>(gz[1]) == 0x8b);
      CHECK(test::gunzip(gz).value_or("(not inflated)") == input);
      if (input.size() == big.size() && level != 0) {
        CHECK(gz.size() < big.size() / 5); // compressed
      }
    }
  }
}

TEST_CASE("Writer: escaping finds a character to escape wherever it stands in a value, sixteen bytes at a time or one") {
  // The rules, one byte at a time, as the spec of what the writer does.
  auto by_hand = [](std::string_view s, bool attribute) {
    std::string out;
    for (const char c : s) {
      switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += attribute ? "&quot;" : "\""; break;
      case '\n': out += attribute ? "&#10;" : "\n"; break;
      case '\t': out += attribute ? "&#9;" : "\t"; break;
      case '\r': out += "&#13;"; break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20) {
          out += c;
        }
      }
    }
    return out;
  };
  const std::string specials = std::string("&<>\"\n\t\r\x01\x1f", 9) + "\xC3\xA9";
  for (size_t len = 0; len <= 40; ++len) {
    for (size_t at = 0; at < len; ++at) {
      for (const char sp : specials) {
        std::string s(len, 'a');
        s[at] = sp;
        if (at + 17 < len) {
          s[at + 17] = '<'; // a second, in the next sixteen
        }
        for (const bool attribute : {false, true}) {
          CAPTURE(len);
          CAPTURE(at);
          CAPTURE(static_cast<int>(static_cast<unsigned char>(sp)));
          std::string out = "x";
          append_xml_escaped(out, s, attribute);
          CHECK(out == "x" + by_hand(s, attribute));
        }
      }
    }
  }
}

#include "resourcesync/reader.h"
#include "resourcesync/validator.h"

#include "test_support.h"

#include <doctest/doctest.h>

using namespace tributary;
using namespace tributary::rs;
using test::has_diagnostic;

namespace {

ReadSummary read(const std::string& root_attrs_and_body, const char* root = "urlset") {
  std::string doc = std::string("<") + root +
                    " xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" "
                    "xmlns:rs=\"http://www.openarchives.org/rs/terms/\">\n" +
                    root_attrs_and_body + "</" + root + ">\n";
  return parse_document(doc).summary;
}

const char* k_up = "<rs:ln rel=\"up\" href=\"http://example.com/caps.xml\"/>\n";

} // namespace

TEST_CASE("Validator: the mandatory rs:md and capability") {
  // Read, a plain sitemap becomes a Resource List (with a warning); the
  // validator alone still says what the specification requires.
  CHECK(has_diagnostic(read("<url><loc>http://e.org/a</loc></url>"), Severity::warning,
                       "a plain Sitemap (no <rs:md>): read as a Resource List"));
  CHECK_FALSE(validate(rs::Document{}).empty());
  CHECK(validate(rs::Document{}).front().message == "the document has no <rs:md> (mandatory, with a capability attribute)");
  CHECK(has_diagnostic(read("<rs:md at=\"2013-01-01\"/>"), Severity::error,
                       "the document's <rs:md> has no capability attribute (mandatory)"));
  CHECK(has_diagnostic(read("<rs:md capability=\"bogus\"/>"), Severity::error, "unknown capability 'bogus'"));
}

TEST_CASE("Validator: root element against capability") {
  auto s = read("<rs:md capability=\"capabilitylist\"/>", "sitemapindex");
  CHECK(has_diagnostic(s, Severity::error,
                       "a document with capability 'capabilitylist' must have root <urlset>, not <sitemapindex>"));
  CHECK(has_diagnostic(read("<rs:md capability=\"resourcedump-manifest\" at=\"2013-01-01\"/>", "sitemapindex"),
                       Severity::error, "must have root <urlset>"));
  auto ok = read(std::string(k_up) + "<rs:md capability=\"resourcelist\" at=\"2013-01-01\"/>", "sitemapindex");
  CHECK(ok.valid());
}

TEST_CASE("Validator: a Capability List may offer notification channels, Framework Notification's too") {
  // Shaped as Change Notification 1.0.1 and Framework Notification 1.0.1
  // advertise their channels: a topic entry with the hub as rel="hub".
  auto s = read("<rs:ln rel=\"up\" href=\"http://example.com/.well-known/resourcesync\"/>\n"
                "<rs:md capability=\"capabilitylist\"/>\n"
                "<url><loc>http://example.com/rl.xml</loc><rs:md capability=\"resourcelist\"/></url>\n"
                "<url><loc>http://example.com/notify/cl</loc><rs:md capability=\"changelist-notification\"/>"
                "<rs:ln rel=\"hub\" href=\"http://example.com/hub\"/></url>\n"
                "<url><loc>http://example.com/notify/fw</loc><rs:md capability=\"framework-notification\"/>"
                "<rs:ln rel=\"hub\" href=\"http://example.com/hub\"/></url>\n");
  CHECK(s.valid());
  CHECK(s.warnings == 0);
}

TEST_CASE("Validator: Appendix A time attributes") {
  SUBCASE("at is mandatory on snapshots, but its absence is a warning: real Sources omit it") {
    for (const char* cap : {"resourcelist", "resourcedump", "resourcedump-manifest"}) {
      CAPTURE(cap);
      auto s = read(std::string(k_up) + "<rs:md capability=\"" + cap + "\"/>");
      CHECK(s.valid());
      CHECK(has_diagnostic(s, Severity::warning, std::string("a ") + cap + " without an 'at' attribute"));
    }
    CHECK(has_diagnostic(read(std::string(k_up) + "<rs:md capability=\"resourcelist\"/>", "sitemapindex"),
                         Severity::warning, "a resourcelist index without an 'at' attribute"));
  }
  SUBCASE("from is mandatory on change documents, but its absence is a warning: real Sources omit it") {
    for (const char* cap : {"changelist", "changedump", "changedump-manifest"}) {
      CAPTURE(cap);
      auto s = read(std::string(k_up) + "<rs:md capability=\"" + cap + "\"/>");
      CHECK(s.valid());
      CHECK(has_diagnostic(s, Severity::warning, std::string("a ") + cap + " without a 'from' attribute"));
    }
  }
  SUBCASE("attributes that do not belong are warnings") {
    auto s = read(std::string(k_up) + "<rs:md capability=\"changelist\" from=\"2013-01-01\" at=\"2013-01-01\"/>");
    CHECK(s.valid());
    CHECK(has_diagnostic(s, Severity::warning, "'at'/'completed' are not used in a changelist"));
    auto r = read(std::string(k_up) + "<rs:md capability=\"resourcelist\" at=\"2013-01-01\" from=\"2013-01-01\"/>");
    CHECK(r.valid());
    CHECK(has_diagnostic(r, Severity::warning, "'from'/'until' are not used in a resourcelist"));
  }
  SUBCASE("intervals must not end before they start") {
    CHECK(has_diagnostic(read(std::string(k_up) + "<rs:md capability=\"changelist\" from=\"2013-01-02\" until=\"2013-01-01\"/>"),
                         Severity::error, "'until' 2013-01-01T00:00:00Z is before 'from' 2013-01-02T00:00:00Z"));
    CHECK(has_diagnostic(read(std::string(k_up) + "<rs:md capability=\"resourcelist\" at=\"2013-01-02\" completed=\"2013-01-01\"/>"),
                         Severity::error, "'completed' 2013-01-01T00:00:00Z is before 'at' 2013-01-02T00:00:00Z"));
  }
}

TEST_CASE("Validator: change lists") {
  const std::string head = std::string(k_up) +
                           "<rs:md capability=\"changelist\" from=\"2013-01-03T00:00:00Z\" until=\"2013-01-04T00:00:00Z\"/>\n";
  SUBCASE("change is mandatory") {
    auto s = read(head + "<url><loc>http://e.org/a</loc><lastmod>2013-01-03T10:00:00Z</lastmod></url>\n");
    CHECK(has_diagnostic(s, Severity::error, "entry 'http://e.org/a' has no change attribute (mandatory in a changelist; read as 'updated')"));
  }
  SUBCASE("a change needs a time") {
    auto s = read(head + "<url><loc>http://e.org/a</loc><rs:md change=\"created\"/></url>\n");
    CHECK(has_diagnostic(s, Severity::warning, "has neither <lastmod> nor a datetime attribute"));
  }
  SUBCASE("forward chronological order") {
    auto s = read(head +
                  "<url><loc>http://e.org/a</loc><lastmod>2013-01-03T12:00:00Z</lastmod><rs:md change=\"created\"/></url>\n"
                  "<url><loc>http://e.org/b</loc><lastmod>2013-01-03T12:00:00Z</lastmod><rs:md change=\"created\"/></url>\n"
                  "<url><loc>http://e.org/c</loc><lastmod>2013-01-03T11:00:00Z</lastmod><rs:md change=\"created\"/></url>\n");
    // A warning: a reader applies them sorted by time (a Source whose clock
    // was put right appends changes dated before earlier ones).
    CHECK(has_diagnostic(s, Severity::warning,
                         "entry 'http://e.org/c' changed at 2013-01-03T11:00:00Z is listed after a change at "
                         "2013-01-03T12:00:00Z (line 5): entries must be in forward chronological order"));
    CHECK(s.warnings == 1); // equal times are in order
    CHECK(s.out_of_order);
  }
  SUBCASE("datetime within from/until") {
    auto s = read(head +
                  "<url><loc>http://e.org/a</loc><rs:md change=\"created\" datetime=\"2013-01-02T23:00:00Z\"/></url>\n"
                  "<url><loc>http://e.org/b</loc><rs:md change=\"created\" datetime=\"2013-01-05T00:00:00Z\"/></url>\n");
    CHECK(has_diagnostic(s, Severity::error, "changed at 2013-01-02T23:00:00Z, before the document's from"));
    CHECK(has_diagnostic(s, Severity::error, "changed at 2013-01-05T00:00:00Z, after the document's until"));
  }
  SUBCASE("a change list index out of order is read by the times of its parts") {
    auto s = read(std::string(k_up) + "<rs:md capability=\"changelist\" from=\"2013-01-01\"/>"
                  "<sitemap><loc>http://e.org/2.xml</loc><rs:md from=\"2013-01-02\"/></sitemap>"
                  "<sitemap><loc>http://e.org/1.xml</loc><rs:md from=\"2013-01-01\"/></sitemap>",
                  "sitemapindex");
    CHECK(has_diagnostic(s, Severity::warning, "must be in forward chronological order (read in the order of their times)"));
  }
}

TEST_CASE("Validator: manifests need safe paths") {
  const std::string head = std::string(k_up) + "<rs:md capability=\"changedump-manifest\" from=\"2013-01-01\"/>\n";
  auto entry = [](const std::string& md) {
    return "<url><loc>http://e.org/a</loc><lastmod>2013-01-02T00:00:00Z</lastmod><rs:md " + md + "/></url>\n";
  };
  CHECK(read(head + entry("change=\"created\" path=\"/res/a.html\"")).valid());
  CHECK(read(head + entry("change=\"deleted\"")).valid());
  CHECK(has_diagnostic(read(head + entry("change=\"created\"")), Severity::error,
                       "entry 'http://e.org/a' has no path attribute (mandatory in a manifest)"));
  auto noslash = read(head + entry("change=\"created\" path=\"res/a.html\""));
  CHECK(noslash.valid());
  CHECK(has_diagnostic(noslash, Severity::warning, "has path 'res/a.html' without the leading slash"));
  CHECK(has_diagnostic(read(head + entry("change=\"created\" path=\"/res/../../etc/passwd\"")), Severity::error,
                       "with a '..' segment"));
  CHECK(has_diagnostic(read(head + entry("change=\"created\" path=\"..\"")), Severity::error, "with a '..' segment"));
  CHECK(has_diagnostic(read(head + entry("change=\"created\" path=\"/a\\b\"")), Severity::error, "unsafe path"));
}

TEST_CASE("Validator: capability lists and source descriptions") {
  auto s = read("<rs:ln rel=\"up\" href=\"http://e.org/.well-known/resourcesync\"/>"
                "<rs:md capability=\"capabilitylist\"/>"
                "<url><loc>http://e.org/rl.xml</loc><rs:md capability=\"resourcelist\"/></url>"
                "<url><loc>http://e.org/rl2.xml</loc><rs:md capability=\"resourcelist\"/></url>"
                "<url><loc>http://e.org/x.xml</loc></url>");
  CHECK(has_diagnostic(s, Severity::error, "capability 'resourcelist' is listed twice"));
  CHECK(has_diagnostic(s, Severity::error, "entry 'http://e.org/x.xml' has no capability on its <rs:md>"));
  auto missing_up = read("<rs:md capability=\"capabilitylist\"/>");
  CHECK(missing_up.valid());
  CHECK(has_diagnostic(missing_up, Severity::warning, "no <rs:ln rel=\"up\"> to the Source Description"));
}

TEST_CASE("Validator: loc must be an absolute URI") {
  auto s = read(std::string(k_up) + "<rs:md capability=\"resourcelist\" at=\"2013-01-01\"/>"
                "<url><loc>resource1.html</loc></url><url><loc></loc></url>");
  CHECK(has_diagnostic(s, Severity::error, "<loc> 'resource1.html' is not an absolute URI"));
  CHECK(has_diagnostic(s, Severity::error, "an entry has no <loc> (mandatory)"));
}

TEST_CASE("Validator: the 50 MB limit is checked on the uncompressed size") {
  Document d;
  d.header.md = Metadata{};
  d.header.md->capability = "resourcelist";
  d.header.md->at = parse_w3c_datetime("2013-01-01");
  auto diags = validate(d, k_max_document_bytes + 1);
  bool found = false;
  for (const auto& x : diags) {
    found = found || x.message.find("over the limit of 52428800") != std::string::npos;
  }
  CHECK(found);
}

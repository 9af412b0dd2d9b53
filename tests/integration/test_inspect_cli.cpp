// End to end: the built `tributary` executable run as a process against
// files and a real HTTP server on 127.0.0.1.
#include "../common/files.h"
#include "http_get.h"
#include "process.h"

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

namespace fs = std::filesystem;

namespace {

using tributary::test::Run;
using tributary::test::run_tributary;
using tributary::test::slurp;

std::string gzip_cli(const std::string& data) {
  // Use the system gzip to build a .gz the way a Source would publish it.
  auto tmp = fs::temp_directory_path() / "tributary-inspect-gz";
  fs::create_directories(tmp);
  std::ofstream(tmp / "d.xml", std::ios::binary) << data;
  std::string cmd = "gzip -c " + (tmp / "d.xml").string() + " > " + (tmp / "d.xml.gz").string();
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::string gz = slurp(tmp / "d.xml.gz");
  fs::remove_all(tmp);
  return gz;
}

// A Source on 127.0.0.1:<ephemeral> serving a few documents.
class Source {
public:
  Source() {
    const fs::path ref(TRIBUTARY_REFERENCE_DIR);
    m_valid = slurp(ref / "spec-examples" / "ex19.xml");
    m_invalid = slurp(ref / "spec-examples" / "ex27.xml");
    m_gz = gzip_cli(m_valid);
    m_server.Get("/changelist.xml", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(m_valid, "application/xml");
    });
    m_server.Get("/changelist.xml.gz", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(m_gz, "application/gzip");
    });
    m_server.Get("/invalid.xml", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(m_invalid, "application/xml");
    });
    m_server.Get("/moved", [](const httplib::Request&, httplib::Response& res) {
      res.set_redirect("/changelist.xml", 302);
    });
    m_server.Get("/loop", [](const httplib::Request&, httplib::Response& res) { res.set_redirect("/loop", 302); });
    m_running = std::make_unique<tributary::test::ServerThread>(m_server);
  }
  ~Source() { m_running.reset(); } // stopped while what it serves is still here
  std::string url(const std::string& path) const { return m_running->base() + path; }

private:
  httplib::Server m_server;
  std::unique_ptr<tributary::test::ServerThread> m_running;
  std::string m_valid, m_invalid, m_gz;
};

} // namespace

TEST_CASE("tributary inspect: a valid file prints a summary and exits 0") {
  const fs::path ex(fs::path(TRIBUTARY_REFERENCE_DIR) / "spec-examples" / "ex19.xml");
  Run r = run_tributary("inspect " + ex.string());
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(r.out.find("capability: changelist") != std::string::npos);
  CHECK(r.out.find("entries:    4 (created 1, updated 2, deleted 1)") != std::string::npos);
  CHECK(r.out.find("from:       2013-01-03T00:00:00Z") != std::string::npos);
  CHECK(r.out.find("link:       up -> http://example.com/dataset1/capabilitylist.xml") != std::string::npos);
  CHECK(r.out.find("valid:      yes") != std::string::npos);
}

TEST_CASE("tributary inspect: over HTTP, plain, gzip, redirected, invalid, missing") {
  Source src;
  SUBCASE("plain") {
    Run r = run_tributary("inspect " + src.url("/changelist.xml"));
    INFO(r.out);
    CHECK(r.status == 0);
    CHECK(r.out.find("entries:    4") != std::string::npos);
  }
  SUBCASE("a .xml.gz document") {
    Run r = run_tributary("inspect " + src.url("/changelist.xml.gz"));
    INFO(r.out);
    CHECK(r.status == 0);
    CHECK(r.out.find(", gzip ") != std::string::npos);
  }
  SUBCASE("redirect is followed and the final URL shown") {
    Run r = run_tributary("inspect " + src.url("/moved"));
    INFO(r.out);
    CHECK(r.status == 0);
    CHECK(r.out.find("document:   " + src.url("/changelist.xml")) != std::string::npos);
  }
  SUBCASE("redirect loop is an I/O error") {
    Run r = run_tributary("inspect " + src.url("/loop"));
    INFO(r.out);
    CHECK(r.status == 2);
    CHECK(r.out.find("more than 5 redirects") != std::string::npos);
  }
  SUBCASE("invalid document exits 1 with the reason and line") {
    Run r = run_tributary("inspect " + src.url("/invalid.xml"));
    INFO(r.out);
    CHECK(r.status == 1);
    // The spec's example 27: base64url digests are read (a warning each);
    // the one of the wrong length costs that value (an error).
    CHECK(r.out.find("warning line 14: <rs:md> attribute 'hash': hash value 'sha-256:f4OxZX_x_DFGFDgghgdfb6rtSx-iosjf6735432nklj' is base64, not hex") != std::string::npos);
    CHECK(r.out.find("error   line 34: <rs:ln> attribute 'hash': hash value 'sha-256:h986gT_t_87HTkjHYE76G558hY-jdfgy76t55sadJUYT': sha-256 needs 64 hex digits") != std::string::npos);
    CHECK(r.out.find("dropped:    1 unusable value(s)") != std::string::npos);
    CHECK(r.out.find("valid:      no") != std::string::npos);
  }
  SUBCASE("404 exits 2") {
    Run r = run_tributary("inspect " + src.url("/nothing.xml"));
    INFO(r.out);
    CHECK(r.status == 2);
    CHECK(r.out.find("HTTP 404") != std::string::npos);
  }
  SUBCASE("--json prints the whole document") {
    Run r = run_tributary("inspect --json " + src.url("/changelist.xml"));
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["root"] == "urlset");
    CHECK(j["capability"] == "changelist");
    CHECK(j["md"]["from"] == "2013-01-03T00:00:00Z");
    CHECK(j["links"][0]["rel"] == "up");
    REQUIRE(j["entries"].size() == 4);
    CHECK(j["entries"][0]["loc"] == "http://example.com/res1.html");
    CHECK(j["entries"][0]["lastmod"] == "2013-01-03T11:00:00Z");
    CHECK(j["entries"][0]["md"]["change"] == "created");
    CHECK(j["warnings"].is_array());
    CHECK(j["errors"].empty());
  }
}

TEST_CASE("tributary inspect: usage and I/O errors exit 2") {
  CHECK(run_tributary("inspect").status == 2);
  CHECK(run_tributary("frobnicate").status == 2);
  Run missing = run_tributary("inspect /nonexistent/list.xml");
  CHECK(missing.status == 2);
  CHECK(missing.out.find("cannot open /nonexistent/list.xml") != std::string::npos);
  Run dead = run_tributary("inspect http://127.0.0.1:1/x.xml");
  CHECK(dead.status == 2);
  Run help = run_tributary("--help");
  CHECK(help.status == 0);
  CHECK(help.out.find("inspect") != std::string::npos);
}

namespace {

// Entries counted without our reader: `<url>` and `<sitemap>` elements of
// the Sitemap namespace, whatever their prefix, outside comments.
size_t count_entries(std::string xml) {
  for (size_t c = xml.find("<!--"); c != std::string::npos; c = xml.find("<!--", c)) {
    size_t end = xml.find("-->", c);
    xml.erase(c, end == std::string::npos ? std::string::npos : end + 3 - c);
  }
  size_t n = 0;
  for (size_t i = xml.find('<'); i != std::string::npos; i = xml.find('<', i + 1)) {
    size_t j = i + 1;
    size_t name = j;
    while (j < xml.size() && (std::isalnum(static_cast<unsigned char>(xml[j])) || xml[j] == ':' || xml[j] == '_' ||
                              xml[j] == '-')) {
      ++j;
    }
    std::string tag = xml.substr(name, j - name);
    if (auto colon = tag.find(':'); colon != std::string::npos) {
      if (tag.compare(0, colon, "rs") == 0) {
        continue;
      }
      tag = tag.substr(colon + 1);
    }
    if ((tag == "url" || tag == "sitemap") && j < xml.size() && (xml[j] == '>' || std::isspace(static_cast<unsigned char>(xml[j])))) {
      ++n;
    }
  }
  return n;
}

} // namespace

TEST_CASE("inspect --json: every reference document that carries a capability yields all of its entries") {
  const fs::path ref(TRIBUTARY_REFERENCE_DIR);
  REQUIRE(fs::exists(ref / "corpus"));
  size_t documents = 0;
  size_t entries = 0;
  size_t with_warnings = 0;
  for (const char* dir : {"spec-examples", "corpus"}) {
    for (const auto& e : fs::recursive_directory_iterator(ref / dir)) {
      const auto name = e.path().filename().string();
      if (!e.is_regular_file() || (e.path().extension() != ".xml" && name != "resourcesync")) {
        continue;
      }
      CAPTURE(e.path().string());
      Run r = run_tributary("inspect --json '" + e.path().string() + "'");
      REQUIRE(r.status != 2);
      auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
      if (j["capability"].is_null()) {
        continue; // not a ResourceSync document, nor a sitemap
      }
      const size_t expected = count_entries(slurp(e.path()));
      INFO(j["errors"].dump());
      CHECK(j["entries"].size() == expected);
      ++documents;
      entries += expected;
      with_warnings += j["warnings"].empty() ? 0 : 1;
    }
  }
  MESSAGE(documents << " documents, " << entries << " entries, " << with_warnings << " with warnings");
  CHECK(documents >= 200);
  CHECK(entries >= 1400);
}

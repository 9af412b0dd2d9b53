#include "aggregator/cli/document_json.h"
#include "resourcesync/datetime.h"
#include "resourcesync/fields.h"
#include "resourcesync/writer.h"

#include <doctest/doctest.h>

#include <set>
#include <string>

using namespace tributary;

namespace {

rs::Timestamp at(const char* w3c) { return *rs::parse_w3c_datetime(w3c); }

// Every field of the tables set.
rs::Entry full_entry() {
  rs::Entry e;
  e.loc = "http://example.org/a";
  rs::Metadata md;
  md.capability = "changelist";
  md.at = at("2026-01-02T03:04:05Z");
  md.completed = at("2026-01-02T03:04:06Z");
  md.from = at("2026-01-01T00:00:00Z");
  md.until = at("2026-01-02T00:00:00Z");
  md.change = rs::Change::updated;
  md.datetime = at("2026-01-01T12:00:00Z");
  md.hash = {rs::HashValue{"md5", "1e0d5cb8ef6ba40c99b14c0237be735e"}};
  md.length = 8876;
  md.type = "text/html";
  md.encoding = "gzip";
  md.path = "/resources/a";
  e.md = md;
  rs::Link l;
  l.rel = "duplicate";
  l.href = "http://mirror.example.com/a";
  l.hash = {rs::HashValue{"md5", "1e0d5cb8ef6ba40c99b14c0237be735e"}};
  l.length = 8876;
  l.modified = at("2026-01-01T12:00:00Z");
  l.path = "/a";
  l.pri = 1;
  l.type = "text/html";
  l.encoding = "gzip";
  e.links = {l};
  return e;
}

} // namespace

TEST_CASE("Field tables: the writer writes every <rs:md> and <rs:ln> attribute, in the tables' order") {
  std::string out;
  rs::append_entry(out, full_entry(), rs::RootElement::urlset);
  CHECK(out.find("<rs:md capability=\"changelist\" at=\"2026-01-02T03:04:05Z\" completed=\"2026-01-02T03:04:06Z\" "
                 "from=\"2026-01-01T00:00:00Z\" until=\"2026-01-02T00:00:00Z\" change=\"updated\" "
                 "datetime=\"2026-01-01T12:00:00Z\" hash=\"md5:1e0d5cb8ef6ba40c99b14c0237be735e\" length=\"8876\" "
                 "type=\"text/html\" encoding=\"gzip\" path=\"/resources/a\"/>") != std::string::npos);
  CHECK(out.find("<rs:ln rel=\"duplicate\" href=\"http://mirror.example.com/a\" "
                 "hash=\"md5:1e0d5cb8ef6ba40c99b14c0237be735e\" length=\"8876\" modified=\"2026-01-01T12:00:00Z\" "
                 "path=\"/a\" pri=\"1\" type=\"text/html\" encoding=\"gzip\"/>") != std::string::npos);
}

TEST_CASE("Field tables: the API's JSON names every field of the tables") {
  const rs::Entry e = full_entry();
  std::set<std::string> md_names;
  rs::each_md_field(*e.md, [&](const char* name, const auto&) { md_names.insert(name); });
  const auto md = agg::to_json(*e.md);
  CHECK(md.size() == md_names.size());
  for (const auto& n : md_names) {
    CHECK_MESSAGE(md.contains(n), n);
  }
  std::set<std::string> ln_names;
  rs::each_ln_field(e.links.front(), [&](const char* name, const auto&) { ln_names.insert(name); });
  const auto ln = agg::to_json(e.links.front());
  CHECK(ln.size() == ln_names.size());
  CHECK(ln["pri"] == 1);
  CHECK(md["hash"] == "md5:1e0d5cb8ef6ba40c99b14c0237be735e");
}

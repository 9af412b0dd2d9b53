// Baselines from Resource Dumps over real HTTP into a real PostgreSQL: an
// index of several packages, the strategy choosing dumps or lists, a broken
// dump falling back to lists (auto) or failing the run (dumps) with nothing
// applied.
#include "sync_fixture.h"

#include "resourcesync/hash.h"

#include <zip.h>

#include <fstream>

using namespace tributary;
using namespace tributary::test;
using store::RunMode;
using store::RunStatus;

namespace {

// A ZIP with manifest.xml and the given files (path in ZIP -> bytes).
std::string make_package(const std::string& manifest_xml, const std::map<std::string, std::string>& files) {
  const auto path = std::filesystem::temp_directory_path() / ("tributary-pkg-" + std::to_string(::getpid()) + ".zip");
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  REQUIRE(z);
  std::vector<std::string> keep{manifest_xml};
  for (const auto& [name, bytes] : files) {
    keep.push_back(bytes);
  }
  size_t k = 0;
  REQUIRE(zip_file_add(z, "manifest.xml", zip_source_buffer(z, keep[k].data(), keep[k].size(), 0), 0) >= 0);
  for (const auto& [name, bytes] : files) {
    ++k;
    REQUIRE(zip_file_add(z, name.c_str(), zip_source_buffer(z, keep[k].data(), keep[k].size(), 0), 0) >= 0);
  }
  REQUIRE(zip_close(z) == 0);
  std::ifstream in(path, std::ios::binary);
  std::string out((std::istreambuf_iterator<char>(in)), {});
  std::filesystem::remove(path);
  return out;
}

struct DumpSite {
  Upstream up;
  Site site{up};
  rs::Timestamp at = ts("2026-03-01T00:00:00Z");
  std::map<std::string, std::string> bytes{{"/res/a.txt", "alpha"}, {"/res/b.txt", "bravo"}, {"/res/c.txt", "charlie"}};

  // The Capability List offers a Resource List, a Change List and a Resource
  // Dump index of two parts, one package each.
  DumpSite() {
    rs::Document caps = make_doc("capabilitylist");
    caps.header.links.push_back(rs::Link{.rel = "up", .href = up.url("/.well-known/resourcesync")});
    caps.entries.push_back(cap_entry(up.url("/rl.xml"), "resourcelist"));
    caps.entries.push_back(cap_entry(up.url("/cl.xml"), "changelist"));
    caps.entries.push_back(cap_entry(up.url("/rd.xml"), "resourcedump"));
    up.set_document("/caps.xml", caps);
    for (const auto& [p, b] : bytes) {
      site.content[p] = b; // listed, but not served: only the dump has them
    }
    site.publish_resource_list(at);
    site.publish_change_list("/cl.xml", at, std::nullopt, {});
    publish_packages({{"/res/a.txt", "/res/b.txt"}, {"/res/c.txt"}});
  }

  void publish_packages(const std::vector<std::vector<std::string>>& groups, bool corrupt_second = false) {
    rs::Document index = make_doc("resourcedump", rs::RootElement::sitemapindex);
    index.header.md->at = at;
    for (size_t g = 0; g < groups.size(); ++g) {
      rs::Document manifest = make_doc("resourcedump-manifest");
      manifest.header.md->at = at;
      std::map<std::string, std::string> files;
      for (const auto& p : groups[g]) {
        rs::Entry e = resource_entry(up.url(p), bytes[p]);
        e.md->path = p;
        manifest.entries.push_back(e);
        files[p.substr(1)] = bytes[p];
      }
      std::string zip = make_package(rs::write_document(manifest), files);
      const std::string md5 = rs::hash_hex(rs::HashAlgorithm::md5, zip);
      if (corrupt_second && g == 1) {
        zip[zip.size() / 2] ^= 0x55; // the bytes no longer match the dump's hash
      }
      const std::string name = "/dump/part" + std::to_string(g + 1) + ".zip";
      up.set(name, zip, "application/zip");
      rs::Document part = make_doc("resourcedump");
      part.header.md->at = at;
      part.header.links.push_back(rs::Link{.rel = "up", .href = up.url("/caps.xml")});
      rs::Entry pkg;
      pkg.loc = up.url(name);
      pkg.md = rs::Metadata{};
      pkg.md->hash = {rs::HashValue{"md5", md5}};
      pkg.md->length = zip.size();
      pkg.md->type = "application/zip";
      part.entries.push_back(pkg);
      const std::string part_path = "/rd-" + std::to_string(g + 1) + ".xml";
      up.set_document(part_path, part);
      index.entries.push_back(cap_entry(up.url(part_path), "resourcedump"));
      index.entries.back().md->capability.reset();
    }
    index.header.links.push_back(rs::Link{.rel = "up", .href = up.url("/caps.xml")});
    up.set_document("/rd.xml", index);
  }

  sync::SourceConfig source(const std::string& strategy) {
    auto s = SyncEnv::source(up.url("/"));
    s.strategy = strategy;
    return s;
  }
};

bool has_note(const sync::SourceReport& r, const std::string& text) {
  for (const auto& n : r.notes) {
    if (n.find(text) != std::string::npos) {
      return true;
    }
  }
  return false;
}

} // namespace

TEST_CASE("Dumps: a baseline from a Resource Dump index of several packages, then incremental from the manifests' at") {
  DumpSite d;
  SyncEnv env;
  auto r = env.run(d.source("auto"), RunMode::incremental);
  REQUIRE(r.status == RunStatus::succeeded);
  CHECK(has_note(r, "baselined from the Resource Dump"));
  CHECK(r.counters.created == 3);
  std::map<std::string, std::string> expected;
  for (const auto& [p, b] : d.bytes) {
    expected[d.up.url(p)] = b;
  }
  CHECK(env.live() == expected);
  {
    pqxx::connection c(env.db.conninfo());
    pqxx::read_transaction tx(c);
    CHECK(tx.exec1("SELECT baseline_at = '2026-03-01T00:00:00Z' FROM watermark")[0].as<bool>());
  }
  // A change after the manifests' `at` is applied incrementally.
  d.site.put("/res/a.txt", "alpha v2");
  d.site.publish_change_list("/cl.xml", d.at, std::nullopt,
                             {change_entry(d.up.url("/res/a.txt"), rs::Change::updated, ts("2026-03-02T00:00:00Z"),
                                           "alpha v2")});
  r = env.run(d.source("auto"), RunMode::incremental);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(env.live()[d.up.url("/res/a.txt")] == "alpha v2");
}

TEST_CASE("Dumps: a package whose bytes differ from the dump's rs:md fails a dumps run and applies nothing of itself, and auto falls back to lists") {
  DumpSite d;
  d.publish_packages({{"/res/a.txt", "/res/b.txt"}, {"/res/c.txt"}}, /*corrupt_second=*/true);
  SyncEnv env;
  auto r = env.run(d.source("dumps"), RunMode::baseline);
  CHECK(r.status == RunStatus::failed);
  REQUIRE_FALSE(r.errors.empty());
  CHECK(r.errors.front().find("package hash differs from the dump's rs:md") != std::string::npos);
  CHECK(r.errors.front().find(d.up.url("/dump/part2.zip")) != std::string::npos);
  {
    pqxx::connection c(env.db.conninfo());
    pqxx::read_transaction tx(c);
    CHECK(tx.exec1("SELECT count(*) FROM watermark WHERE baseline_at IS NOT NULL")[0].as<int>() == 0);
  }
  // The first (good) package committed on its own; nothing of the second.
  CHECK(env.live().size() == 2);
  CHECK(env.live().count(d.up.url("/res/c.txt")) == 0);
  // auto: the lists serve the resources, so the run succeeds from them.
  for (const auto& [p, b] : d.bytes) {
    d.site.put(p, b);
  }
  r = env.run(d.source("auto"), RunMode::baseline);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(has_note(r, "Resource Dump unusable, baselined from the Resource List instead"));
  CHECK(env.live().size() == 3);
}

TEST_CASE("Dumps: strategy lists never touches the dump") {
  DumpSite d;
  d.publish_packages({{"/res/a.txt", "/res/b.txt"}, {"/res/c.txt"}}, /*corrupt_second=*/true);
  for (const auto& [p, b] : d.bytes) {
    d.site.put(p, b);
  }
  SyncEnv env;
  auto r = env.run(d.source("lists"), RunMode::baseline);
  CHECK(r.status == RunStatus::succeeded);
  CHECK_FALSE(has_note(r, "Resource Dump"));
  CHECK(env.live().size() == 3);
}

// Baselines from Resource Dumps over real HTTP into a real PostgreSQL: an
// index of several packages, the strategy choosing dumps or lists, a broken
// dump falling back to lists (auto) or failing the run (dumps) with nothing
// applied.
#include "sync_fixture.h"

#include "resourcesync/hash.h"

#include <zip.h>

#include <fstream>
#include <future>
#include <set>
#include <sys/stat.h>

using namespace tributary;
using namespace tributary::test;
using store::RunMode;
using store::RunStatus;

namespace {

// A ZIP with manifest.xml and the given files (path in ZIP -> bytes); names
// in `symlinks` are stored as symbolic links.
std::string make_package(const std::string& manifest_xml, const std::map<std::string, std::string>& files,
                         const std::set<std::string>& symlinks = {}, bool with_manifest = true) {
  const auto path = std::filesystem::temp_directory_path() / ("tributary-pkg-" + std::to_string(::getpid()) + ".zip");
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  REQUIRE(z);
  std::vector<std::string> keep{manifest_xml};
  for (const auto& [name, bytes] : files) {
    keep.push_back(bytes);
  }
  size_t k = 0;
  if (with_manifest) {
    REQUIRE(zip_file_add(z, "manifest.xml", zip_source_buffer(z, keep[k].data(), keep[k].size(), 0), 0) >= 0);
  }
  for (const auto& [name, bytes] : files) {
    ++k;
    const zip_int64_t i = zip_file_add(z, name.c_str(), zip_source_buffer(z, keep[k].data(), keep[k].size(), 0), 0);
    REQUIRE(i >= 0);
    if (symlinks.count(name)) {
      zip_file_set_external_attributes(z, static_cast<zip_uint64_t>(i), 0, ZIP_OPSYS_UNIX,
                                       static_cast<zip_uint32_t>(S_IFLNK | 0777) << 16);
    }
  }
  REQUIRE(zip_close(z) == 0);
  std::ifstream in(path, std::ios::binary);
  std::string out((std::istreambuf_iterator<char>(in)), {});
  std::filesystem::remove(path);
  return out;
}

// The same package written by Python's zipfile the way py-resync's
// Dump.write_zip() writes one: the manifest with writestr() (permission bits,
// no file type), then each file from disk with write() (a regular file).
std::string make_python_package(const std::string& manifest_xml, const std::map<std::string, std::string>& files) {
  const auto dir = std::filesystem::temp_directory_path() / ("tributary-pyzip-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "files");
  std::ofstream(dir / "manifest.xml", std::ios::binary) << manifest_xml;
  std::string script = "import zipfile\n"
                       "zf = zipfile.ZipFile('" + (dir / "out.zip").string() + "', 'w', compression=zipfile.ZIP_DEFLATED, allowZip64=True)\n"
                       "zf.writestr('manifest.xml', open('" + (dir / "manifest.xml").string() + "', 'rb').read())\n";
  int n = 0;
  for (const auto& [name, bytes] : files) {
    const auto f = dir / "files" / std::to_string(n++);
    std::ofstream(f, std::ios::binary) << bytes;
    script += "zf.write('" + f.string() + "', arcname='" + name + "')\n";
  }
  script += "zf.close()\n";
  std::ofstream(dir / "write.py") << script;
  REQUIRE(std::system(("python3 " + (dir / "write.py").string()).c_str()) == 0);
  std::ifstream in(dir / "out.zip", std::ios::binary);
  std::string out((std::istreambuf_iterator<char>(in)), {});
  std::filesystem::remove_all(dir);
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

  void publish_packages(const std::vector<std::vector<std::string>>& groups, bool corrupt_second = false,
                        bool python = false) {
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
      std::string zip = python ? make_python_package(rs::write_document(manifest), files)
                               : make_package(rs::write_document(manifest), files);
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

  // A Change Dump of packages, each a list of (path, change, time, bytes);
  // the Capability List starts offering it.
  struct Change {
    std::string path;
    rs::Change change;
    const char* time;
    std::string bytes;
    std::optional<std::string> zipped = std::nullopt; // other bytes in the ZIP than the manifest describes
  };
  // `as_index`: a Change Dump index with one part per package. `undated`:
  // packages without from/until, each linking its manifest copy
  // (rel="contents") instead.
  void publish_change_dump(const std::vector<std::pair<std::pair<const char*, const char*>, std::vector<Change>>>& pkgs,
                           bool corrupt_last = false, bool as_index = false, bool undated = false) {
    rs::Document caps = make_doc("capabilitylist");
    caps.header.links.push_back(rs::Link{.rel = "up", .href = up.url("/.well-known/resourcesync")});
    for (const auto& [loc, cap] : {std::pair<const char*, const char*>{"/rl.xml", "resourcelist"},
                                   {"/cl.xml", "changelist"}, {"/rd.xml", "resourcedump"}, {"/cd.xml", "changedump"}}) {
      caps.entries.push_back(cap_entry(up.url(loc), cap));
    }
    up.set_document("/caps.xml", caps);
    rs::Document cd = make_doc("changedump");
    cd.header.md->from = at;
    cd.header.links.push_back(rs::Link{.rel = "up", .href = up.url("/caps.xml")});
    for (size_t k = 0; k < pkgs.size(); ++k) {
      const auto& [range, changes] = pkgs[k];
      rs::Document manifest = make_doc("changedump-manifest");
      manifest.header.md->from = ts(range.first);
      manifest.header.md->until = ts(range.second);
      std::map<std::string, std::string> files;
      for (size_t i = 0; i < changes.size(); ++i) {
        const Change& c = changes[i];
        rs::Entry e = change_entry(up.url(c.path), c.change, ts(c.time), c.bytes);
        if (c.change != rs::Change::deleted) {
          const std::string name = "changes/" + std::to_string(i) + c.path; // one bitstream per change
          e.md->path = "/" + name;
          files[name] = c.zipped.value_or(c.bytes);
        }
        manifest.entries.push_back(e);
      }
      std::string zip = make_package(rs::write_document(manifest), files);
      const std::string md5 = rs::hash_hex(rs::HashAlgorithm::md5, zip);
      if (corrupt_last && k + 1 == pkgs.size()) {
        zip[zip.size() / 2] ^= 0x55;
      }
      const std::string name = "/cdump/" + std::to_string(k + 1) + ".zip";
      up.set(name, zip, "application/zip");
      rs::Entry pkg;
      pkg.loc = up.url(name);
      pkg.md = rs::Metadata{};
      if (undated) {
        const std::string copy = "/cdump/" + std::to_string(k + 1) + "-manifest.xml";
        up.set_document(copy, manifest);
        pkg.links.push_back(rs::Link{.rel = "contents", .href = up.url(copy), .type = "application/xml"});
      } else {
        pkg.md->from = ts(range.first);
        pkg.md->until = ts(range.second);
      }
      pkg.md->hash = {rs::HashValue{"md5", md5}};
      pkg.md->length = zip.size();
      pkg.md->type = "application/zip";
      cd.entries.push_back(pkg);
    }
    if (!as_index) {
      up.set_document("/cd.xml", cd);
      return;
    }
    rs::Document index = make_doc("changedump", rs::RootElement::sitemapindex);
    index.header.md->from = at;
    index.header.links.push_back(rs::Link{.rel = "up", .href = up.url("/caps.xml")});
    for (size_t k = 0; k < cd.entries.size(); ++k) {
      rs::Document part = make_doc("changedump");
      part.header.md->from = cd.entries[k].md->from;
      part.header.md->until = cd.entries[k].md->until;
      part.header.links.push_back(rs::Link{.rel = "up", .href = up.url("/caps.xml")});
      part.header.links.push_back(rs::Link{.rel = "index", .href = up.url("/cd.xml")});
      part.entries.push_back(cd.entries[k]);
      const std::string path = "/cd-" + std::to_string(k + 1) + ".xml";
      up.set_document(path, part);
      rs::Entry e;
      e.loc = up.url(path);
      e.md = rs::Metadata{};
      e.md->from = cd.entries[k].md->from;
      e.md->until = cd.entries[k].md->until;
      index.entries.push_back(e);
    }
    up.set_document("/cd.xml", index);
  }

  sync::SourceConfig source(const std::string& strategy) {
    auto s = SyncEnv::source(up.url("/"));
    s.strategy = strategy;
    return s;
  }
};

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

TEST_CASE("Dumps: a Resource Dump written with Python's zipfile, as py-resync writes one, is baselined from over HTTP") {
  DumpSite d;
  d.publish_packages({{"/res/a.txt", "/res/b.txt"}, {"/res/c.txt"}}, false, /*python=*/true);
  SyncEnv env;
  auto r = env.run(d.source("dumps"), RunMode::incremental);
  REQUIRE(r.status == RunStatus::succeeded);
  CHECK(has_note(r, "baselined from the Resource Dump"));
  CHECK(r.counters.created == 3);
  CHECK(r.counters.failed == 0);
  std::map<std::string, std::string> expected;
  for (const auto& [p, b] : d.bytes) {
    expected[d.up.url(p)] = b;
  }
  CHECK(env.live() == expected);
  // The untyped manifest entry is accepted with a warning, never silently.
  bool warned = false;
  for (const auto& n : r.notes) {
    warned = warned || n.find("no file type") != std::string::npos;
  }
  CHECK(warned);
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
  // The first (good) package committed on its own; nothing of the second,
  // fetched (once) while the first was applied, and whose file is gone.
  CHECK(env.live().size() == 2);
  CHECK(env.live().count(d.up.url("/res/c.txt")) == 0);
  CHECK(d.up.requests("/dump/part2.zip") == 1);
  size_t left = 0;
  for (const auto& f : std::filesystem::directory_iterator(env.data / "tmp")) {
    left += f.path().filename().string().rfind("package", 0) == 0;
  }
  CHECK(left == 0);
  // auto: the lists serve the resources, so the run succeeds from them.
  for (const auto& [p, b] : d.bytes) {
    d.site.put(p, b);
  }
  r = env.run(d.source("auto"), RunMode::baseline);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(has_note(r, "Resource Dump unusable, baselined from the Resource List instead"));
  CHECK(env.live().size() == 3);
}

TEST_CASE("Dumps: the next package is downloaded while one is applied") {
  DumpSite d;
  // A first package of three slices (2,500 entries each): with one commit
  // in flight, the second slice waits for the first.
  std::vector<std::string> first;
  for (int i = 0; i < 5001; ++i) {
    const std::string p = "/res/n" + std::to_string(i) + ".txt";
    d.bytes[p] = "n" + std::to_string(i);
    d.site.content[p] = d.bytes[p];
    first.push_back(p);
  }
  d.site.publish_resource_list(d.at);
  d.publish_packages({first, {"/res/a.txt", "/res/b.txt", "/res/c.txt"}});
  SyncEnv env;
  // The store is held: the first package cannot be applied until the
  // second was asked for, which only a download ahead of the applying does.
  pqxx::connection holder(env.db.conninfo());
  pqxx::work lock(holder);
  lock.exec("LOCK TABLE resource IN EXCLUSIVE MODE");
  auto run = std::async(std::launch::async, [&] { return env.run(d.source("dumps"), RunMode::baseline); });
  const bool ahead = eventually([&] { return d.up.requests("/dump/part2.zip") == 1; }, 10);
  CHECK(env.live().empty()); // (read beside the lock)
  lock.abort();
  CHECK(ahead);
  const auto r = run.get();
  CHECK(r.status == RunStatus::succeeded);
  CHECK(env.live().size() == d.bytes.size());
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

TEST_CASE("Dumps: catch-up through a Change Dump index, deletes and repeated changes included, each package once") {
  DumpSite d;
  SyncEnv env;
  REQUIRE(env.run(d.source("dumps"), RunMode::baseline).status == RunStatus::succeeded);
  d.publish_change_dump({{{"2026-03-01T00:00:00Z", "2026-03-02T00:00:00Z"},
                          {{"/res/a.txt", rs::Change::updated, "2026-03-01T10:00:00Z", "alpha v2"},
                           {"/res/d.txt", rs::Change::created, "2026-03-01T11:00:00Z", "delta"},
                           {"/res/b.txt", rs::Change::deleted, "2026-03-01T12:00:00Z", ""}}},
                         {{"2026-03-02T00:00:00Z", "2026-03-03T00:00:00Z"},
                          {{"/res/a.txt", rs::Change::updated, "2026-03-02T10:00:00Z", "alpha v3"},
                           {"/res/a.txt", rs::Change::updated, "2026-03-02T11:00:00Z", "alpha v4"},
                           {"/res/c.txt", rs::Change::deleted, "2026-03-02T12:00:00Z", ""}}}},
                        /*corrupt_last=*/false, /*as_index=*/true);
  auto r = env.run(d.source("dumps"), RunMode::incremental);
  REQUIRE(r.status == RunStatus::succeeded);
  CHECK(has_note(r, "caught up from the Change Dump"));
  CHECK(r.counters.updated == 3);
  CHECK(r.counters.created == 1);
  CHECK(r.counters.deleted == 2);
  auto live = env.live();
  CHECK(live.size() == 2);
  CHECK(live[d.up.url("/res/a.txt")] == "alpha v4");
  CHECK(live[d.up.url("/res/d.txt")] == "delta");
  CHECK(env.deleted() == std::set<std::string>{d.up.url("/res/b.txt"), d.up.url("/res/c.txt")});
  // Again: every package ends before the watermark, nothing is applied twice.
  r = env.run(d.source("dumps"), RunMode::incremental);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(r.counters.updated + r.counters.created + r.counters.deleted == 0);
  pqxx::connection c(env.db.conninfo());
  pqxx::read_transaction tx(c);
  CHECK(tx.exec1("SELECT count(*) FROM change_log WHERE upstream_datetime > '2026-03-01T00:00:00Z'")[0].as<int>() == 6);
  CHECK(env.stats_consistent());
}

TEST_CASE("Dumps: packages without from/until are dated by their manifest copies, and an applied one is not downloaded again") {
  DumpSite d;
  SyncEnv env;
  REQUIRE(env.run(d.source("dumps"), RunMode::baseline).status == RunStatus::succeeded);
  const std::vector<std::pair<std::pair<const char*, const char*>, std::vector<DumpSite::Change>>> pkgs = {
      {{"2026-03-02T00:00:00Z", "2026-03-03T00:00:00Z"},
       {{"/res/a.txt", rs::Change::updated, "2026-03-02T10:00:00Z", "alpha v3"}}},
      {{"2026-03-01T00:00:00Z", "2026-03-02T00:00:00Z"},
       {{"/res/a.txt", rs::Change::updated, "2026-03-01T10:00:00Z", "alpha v2"},
        {"/res/b.txt", rs::Change::deleted, "2026-03-01T12:00:00Z", ""}}}}; // listed out of order
  d.publish_change_dump(pkgs, false, false, /*undated=*/true);
  auto r = env.run(d.source("auto"), RunMode::incremental);
  REQUIRE(r.status == RunStatus::succeeded);
  CHECK(has_note(r, "2 Change Dump packages without from/until dated by the manifest copy"));
  CHECK(has_note(r, "caught up from the Change Dump"));
  CHECK(r.counters.updated == 2);
  CHECK(r.counters.deleted == 1);
  CHECK(env.live()[d.up.url("/res/a.txt")] == "alpha v3"); // applied in the manifests' order
  CHECK(d.up.requests("/cdump/1.zip") == 1);
  CHECK(d.up.requests("/cdump/2.zip") == 1);
  // Again: the manifest copies say both are applied; neither is fetched.
  r = env.run(d.source("dumps"), RunMode::incremental);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(r.counters.updated + r.counters.created + r.counters.deleted == 0);
  CHECK(d.up.requests("/cdump/1.zip") == 1);
  CHECK(d.up.requests("/cdump/2.zip") == 1);
  CHECK(d.up.requests("/cdump/1-manifest.xml") == 2);
  // A broken manifest copy leaves that package undated: whether the dump
  // covers every change since the watermark is unknown, so auto follows
  // the Change List instead, saying why, and dumps refuses.
  d.up.set("/cdump/1-manifest.xml", "<urlset", "application/xml");
  r = env.run(d.source("auto"), RunMode::incremental);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(has_note(r, "the manifest copy of " + d.up.url("/cdump/1.zip") + " is unusable"));
  CHECK(has_note(r, "Change Dump unusable, following the Change List instead"));
  CHECK(r.counters.updated + r.counters.created + r.counters.deleted == 0);
  r = env.run(d.source("dumps"), RunMode::incremental);
  CHECK(r.status == RunStatus::failed);
  CHECK(d.up.requests("/cdump/1.zip") == 1);
}

TEST_CASE("Dumps: auto takes the Change Dump for a backlog of whole packages, and a broken package applies nothing") {
  DumpSite d;
  SyncEnv env;
  REQUIRE(env.run(d.source("auto"), RunMode::baseline).status == RunStatus::succeeded);
  d.publish_change_dump({{{"2026-03-01T00:00:00Z", "2026-03-02T00:00:00Z"},
                          {{"/res/a.txt", rs::Change::updated, "2026-03-01T10:00:00Z", "alpha v2"}}},
                         {{"2026-03-02T00:00:00Z", "2026-03-03T00:00:00Z"},
                          {{"/res/b.txt", rs::Change::updated, "2026-03-02T10:00:00Z", "bravo v2"}}}},
                        /*corrupt_last=*/true);
  auto r = env.run(d.source("dumps"), RunMode::incremental);
  CHECK(r.status == RunStatus::failed);
  REQUIRE_FALSE(r.errors.empty());
  CHECK(r.errors.front().find("package hash differs") != std::string::npos);
  CHECK(env.live()[d.up.url("/res/a.txt")] == "alpha v2"); // the first package stands
  CHECK(env.live()[d.up.url("/res/b.txt")] == "bravo");    // nothing of the broken one
  d.publish_change_dump({{{"2026-03-01T00:00:00Z", "2026-03-02T00:00:00Z"},
                          {{"/res/a.txt", rs::Change::updated, "2026-03-01T10:00:00Z", "alpha v2"}}},
                         {{"2026-03-02T00:00:00Z", "2026-03-03T00:00:00Z"},
                          {{"/res/b.txt", rs::Change::updated, "2026-03-02T10:00:00Z", "bravo v2"}}}});
  r = env.run(d.source("auto"), RunMode::incremental);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(has_note(r, "caught up from the Change Dump"));
  CHECK(r.counters.updated == 1); // the first package is not applied again
  CHECK(env.live()[d.up.url("/res/b.txt")] == "bravo v2");
}

TEST_CASE("Dumps: a Change Dump package is applied in slices, each with its watermark, and a bitstream that fails its "
          "hash costs only the slices from its own, and the next run resumes there") {
  DumpSite d;
  SyncEnv env;
  REQUIRE(env.run(d.source("dumps"), RunMode::baseline).status == RunStatus::succeeded);
  // 2,600 changes of one time in one package: slices of 2,500, so the
  // second slice starts at position 2,500 of that time.
  auto changes = [&](bool lie) {
    std::vector<DumpSite::Change> out;
    for (int i = 0; i < 2600; ++i) {
      out.push_back({"/res/n" + std::to_string(i), rs::Change::created, "2026-03-01T10:00:00Z",
                     "n" + std::to_string(i)});
    }
    if (lie) {
      out[2550].zipped = "x2550"; // the same length, other bytes
    }
    return out;
  };
  d.publish_change_dump({{{"2026-03-01T00:00:00Z", "2026-03-02T00:00:00Z"}, changes(true)}});
  auto r = env.run(d.source("dumps"), RunMode::incremental);
  CHECK(r.status == RunStatus::failed);
  REQUIRE_FALSE(r.errors.empty());
  CHECK(r.errors.front().find("hash mismatch against the manifest") != std::string::npos);
  auto live = env.live();
  CHECK(live.size() == 3 + 2500); // the first slice stands, with its watermark
  CHECK(live.count(d.up.url("/res/n2499")) == 1);
  CHECK(live.count(d.up.url("/res/n2500")) == 0); // nothing of the slice with the bad bitstream
  d.publish_change_dump({{{"2026-03-01T00:00:00Z", "2026-03-02T00:00:00Z"}, changes(false)}});
  r = env.run(d.source("dumps"), RunMode::incremental);
  CHECK(r.status == RunStatus::succeeded);
  CHECK(r.counters.created == 100); // resumed at position 2,500 of 10:00:00
  live = env.live();
  CHECK(live.size() == 3 + 2600);
  CHECK(live[d.up.url("/res/n2550")] == "n2550");
}

TEST_CASE("Dumps: a Change Dump package out of chronological order is refused before any of it is applied") {
  DumpSite d;
  SyncEnv env;
  REQUIRE(env.run(d.source("dumps"), RunMode::baseline).status == RunStatus::succeeded);
  std::vector<DumpSite::Change> changes;
  for (int i = 0; i < 3000; ++i) { // past one slice: the disorder is in the second
    changes.push_back({"/res/n" + std::to_string(i), rs::Change::created,
                       i == 2900 ? "2026-03-01T09:00:00Z" : "2026-03-01T10:00:00Z", "n" + std::to_string(i)});
  }
  d.publish_change_dump({{{"2026-03-01T00:00:00Z", "2026-03-02T00:00:00Z"}, changes}});
  auto r = env.run(d.source("dumps"), RunMode::incremental);
  CHECK(r.status == RunStatus::failed);
  REQUIRE_FALSE(r.errors.empty());
  CHECK(r.errors.front().find("not in forward chronological order") != std::string::npos);
  CHECK(env.live().size() == 3);
}

TEST_CASE("Dumps: every hostile package is refused over HTTP with its reason, and the store stays empty") {
  DumpSite d;
  auto entry = [&](const std::string& path, const std::string& zip_path, const std::string& bytes) {
    rs::Entry e = resource_entry(d.up.url(path), bytes);
    e.md->path = zip_path;
    return e;
  };
  auto manifest_of = [&](const std::vector<rs::Entry>& entries, const char* cap = "resourcedump-manifest") {
    rs::Document m = make_doc(cap);
    m.header.md->at = d.at;
    m.entries = entries;
    return rs::write_document(m);
  };
  const std::string good = manifest_of({entry("/res/a.txt", "/a.txt", "alpha")});
  const std::string zeros(64u << 20, '\0');
  struct Case {
    const char* what;
    std::string zip;
    const char* reason;
  };
  std::vector<Case> cases;
  cases.push_back({"no manifest", make_package(good, {{"a.txt", "alpha"}}, {}, false), "no manifest.xml"});
  cases.push_back({"malformed manifest", make_package("<urlset><url>", {{"a.txt", "alpha"}}),
                   "manifest.xml is not a valid document"});
  cases.push_back({"dot-dot", make_package(good, {{"a.txt", "alpha"}, {"../evil", "x"}}), "unsafe entry name"});
  cases.push_back({"absolute", make_package(good, {{"a.txt", "alpha"}, {"/evil", "x"}}), "unsafe entry name"});
  cases.push_back({"symlink", make_package(good, {{"a.txt", "/etc/passwd"}}, {"a.txt"}), "symbolic link"});
  cases.push_back({"unlisted entry", make_package(good, {{"a.txt", "alpha"}, {"b.txt", "bravo"}}),
                   "not listed in the manifest"});
  cases.push_back({"missing bitstream", make_package(good, {}), "is not in the ZIP"});
  cases.push_back({"wrong bitstream", make_package(good, {{"a.txt", "alphA"}}), "hash mismatch against the manifest"});
  cases.push_back({"zip bomb", make_package(manifest_of({entry("/res/z", "/z.bin", zeros)}), {{"z.bin", zeros}}),
                   "a zip bomb"});
  std::string truncated = make_package(good, {{"a.txt", "alpha"}});
  truncated.resize(truncated.size() / 2);
  cases.push_back({"truncated", truncated, "not a readable ZIP file"});
  for (const auto& c : cases) {
    CAPTURE(c.what);
    rs::Document part = make_doc("resourcedump");
    part.header.md->at = d.at;
    part.header.links.push_back(rs::Link{.rel = "up", .href = d.up.url("/caps.xml")});
    rs::Entry pkg;
    pkg.loc = d.up.url("/dump/hostile.zip");
    pkg.md = rs::Metadata{};
    pkg.md->hash = {rs::HashValue{"md5", rs::hash_hex(rs::HashAlgorithm::md5, c.zip)}};
    pkg.md->length = c.zip.size();
    part.entries.push_back(pkg);
    d.up.set("/dump/hostile.zip", c.zip, "application/zip");
    d.up.set_document("/rd.xml", part);
    SyncEnv env;
    auto r = env.run(d.source("dumps"), RunMode::baseline);
    CHECK(r.status == RunStatus::failed);
    REQUIRE_FALSE(r.errors.empty());
    CHECK_MESSAGE(r.errors.front().find(c.reason) != std::string::npos, r.errors.front());
    CHECK(r.errors.front().find(d.up.url("/dump/hostile.zip")) != std::string::npos);
    CHECK(env.live().empty());
    CHECK(env.deleted().empty());
  }
}

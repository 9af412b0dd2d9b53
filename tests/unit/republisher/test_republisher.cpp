// The Republisher without PostgreSQL: MemoryStore's change log and
// resources, a BlobStore on disk, archives in MemoryAuxStore; every
// document kind asked for through the handler, as the HTTP server would
// (the integration tests serve it over HTTP from a real sync's database).
#include "republisher/server.h"

#include "../../common/scratch_dir.h"
#include "records.h"

#include "resourcesync/reader.h"
#include "store/memory_aux_store.h"
#include "store/memory_store.h"

#include <doctest/doctest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>
#include <vector>

using namespace tributary;
using namespace tributary::pub;
using test::record;
using test::ts;

namespace {

struct Served {
  int status = 0;
  std::string body;
};

struct RepublisherRig {
  test::ScratchDir dir{"republisher-unit"};
  std::shared_ptr<store::MemoryStore> st = std::make_shared<store::MemoryStore>();
  std::shared_ptr<store::MemoryAuxStore> aux = std::make_shared<store::MemoryAuxStore>();
  std::shared_ptr<store::BlobStore> blobs;
  UrlScheme urls{"http://us.example/"};
  int64_t feed = 0;
  std::unique_ptr<Republisher> rep;
  http::Handler handler;

  RepublisherRig() {
    blobs = *store::BlobStore::open(dir / "blobs");
    const int64_t src = *st->ensure_source("up", "http://up.example/");
    feed = *st->ensure_feed(src, "http://up.example/caps.xml");
    // Five changes: three created, one updated, one deleted (parts of two:
    // two closed parts and an open one).
    change({"a", "b", "c"}, {"alpha", "bravo", "charlie"}, rs::Change::created, "2026-01-01T00:00:00Z");
    change({"a"}, {"alpha v2"}, rs::Change::updated, "2026-01-02T00:00:00Z");
    change({"c"}, {""}, rs::Change::deleted, "2026-01-03T00:00:00Z");
    PublishOptions o;
    o.public_url = urls.base() + "/";
    o.change_list_part = 2;
    o.poll_interval = std::chrono::milliseconds(50);
    o.document_dir = dir / "documents";
    o.dump_dir = dir / "dumps";
    o.archive = aux;
    rep = std::make_unique<Republisher>(st, blobs, o);
    REQUIRE(rep->start());
    handler = rep->handler();
  }
  ~RepublisherRig() { rep->stop(); }

  void change(const std::vector<std::string>& names, const std::vector<std::string>& contents, rs::Change kind,
              const char* at) {
    store::Batch b;
    b.feed_id = feed;
    for (size_t i = 0; i < names.size(); ++i) {
      auto r = record("http://up.example/" + names[i], contents[i]);
      if (kind == rs::Change::deleted) {
        r.state = store::ResourceState::deleted;
        r.blob_sha256.reset();
      } else {
        REQUIRE(blobs->put(contents[i]));
      }
      b.upserts.push_back(r);
      b.changes.push_back(store::ChangeRecord{kind, ts(at), r});
    }
    REQUIRE(st->apply(b));
  }

  Served get(const std::string& url) {
    http::Request req;
    req.method = "GET";
    req.target = req.path = urls.path_of(url);
    http::Response res;
    REQUIRE(handler(req, res, true) == http::Disposition::done);
    Served out{res.status, res.body};
    if (res.shared) {
      out.body = res.shared->substr(res.offset, res.length);
    } else if (res.file) {
      out.body.resize(res.length);
      REQUIRE(::pread(res.file->fd, out.body.data(), res.length, static_cast<off_t>(res.offset)) ==
              static_cast<ssize_t>(res.length));
    }
    return out;
  }

  rs::Document document(const std::string& url, rs::Capability expected) {
    Served s = get(url);
    INFO(url);
    REQUIRE(s.status == 200);
    auto parsed = rs::parse_document(s.body);
    std::string diags;
    for (const auto& d : parsed.summary.diagnostics) {
      diags += d.message + "\n";
    }
    INFO(diags);
    CHECK(parsed.summary.valid());
    CHECK(parsed.document.header.capability() == expected);
    return parsed.document;
  }

  // Waits up to 10 s for the Change Dump to list `n` packages.
  std::vector<rs::Entry> change_packages(size_t n) {
    std::vector<rs::Entry> packages;
    if (!offered("changedump.xml")) {
      return packages;
    }
    for (int i = 0; i < 200; ++i) {
      packages = document(urls.change_dump("up"), rs::Capability::changedump).entries;
      if (packages.size() >= n) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return packages;
  }

  // Waits up to 10 s for the Capability List to name `what`.
  bool offered(const std::string& what) {
    for (int i = 0; i < 200; ++i) {
      if (get(urls.capability_list("up")).body.find(what) != std::string::npos) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
};

std::set<std::string> locs(const rs::Document& d) {
  std::set<std::string> out;
  for (const auto& e : d.entries) {
    out.insert(e.loc);
  }
  return out;
}

} // namespace

TEST_CASE("Republisher (no database): the Source Description, Capability List, Resource List and Change Lists") {
  RepublisherRig rig;
  auto sd = rig.document(rig.urls.source_description(), rs::Capability::description);
  CHECK(locs(sd) == std::set<std::string>{rig.urls.capability_list("up")});
  auto caps = rig.document(rig.urls.capability_list("up"), rs::Capability::capabilitylist);
  CHECK(locs(caps).count(rig.urls.resource_list("up")));
  CHECK(locs(caps).count(rig.urls.change_list("up")));

  // The Resource List: what is live, with its hashes; c is gone.
  auto rl = rig.document(rig.urls.resource_list("up"), rs::Capability::resourcelist);
  CHECK(locs(rl) == std::set<std::string>{rig.urls.resource("up", "http://up.example/a"),
                                          rig.urls.resource("up", "http://up.example/b")});
  for (const auto& e : rl.entries) {
    REQUIRE(e.md);
    CHECK_FALSE(e.md->hash.empty());
    CHECK(e.find_link("via")); // provenance: the upstream URI
  }

  // The Change Lists: two closed parts of two and the open one, in order.
  auto index = rig.document(rig.urls.change_list_index("up"), rs::Capability::changelist);
  CHECK(index.entries.size() == 3);
  auto first = rig.document(rig.urls.change_list_part("up", 1), rs::Capability::changelist);
  REQUIRE(first.entries.size() == 2);
  CHECK(first.entries[0].change() == rs::Change::created);
  CHECK(first.header.md->until);
  auto open = rig.document(rig.urls.change_list("up"), rs::Capability::changelist);
  REQUIRE(open.entries.size() == 1);
  CHECK(open.entries[0].change() == rs::Change::deleted);
  CHECK_FALSE(open.header.md->until);
}

TEST_CASE("Republisher (no database): content as the blob store holds it, 410 for a deleted resource, 404 elsewhere") {
  RepublisherRig rig;
  Served a = rig.get(rig.urls.resource("up", "http://up.example/a"));
  CHECK(a.status == 200);
  CHECK(a.body == "alpha v2");
  CHECK(rig.get(rig.urls.resource("up", "http://up.example/c")).status == 410);
  CHECK(rig.get(rig.urls.resource("up", "http://up.example/nowhere")).status == 404);
  CHECK(rig.get("http://us.example/sets/other/capabilitylist.xml").status == 404);
}

TEST_CASE("Republisher (no database): a Resource Dump and Change Dump packages for the closed parts, with manifests") {
  RepublisherRig rig;
  REQUIRE(rig.offered("resourcedump.xml"));
  auto rd = rig.document(rig.urls.resource_dump("up"), rs::Capability::resourcedump);
  REQUIRE_FALSE(rd.entries.empty());
  Served zip = rig.get(rd.entries[0].loc);
  CHECK(zip.status == 200);
  CHECK(zip.body.rfind("PK", 0) == 0);
  CHECK(rs::hash_hex(rs::HashAlgorithm::sha256, zip.body) == rd.entries[0].md->hash[0].hex);
  const auto packages = rig.change_packages(2);
  REQUIRE(packages.size() == 2); // the closed parts; the open one is not packed
  const rs::Link* contents = packages[0].find_link("contents");
  REQUIRE(contents);
  auto manifest = rig.document(contents->href, rs::Capability::changedump_manifest);
  CHECK(manifest.entries.size() == 2);
}

TEST_CASE("Republisher (no database): closed Change List parts and their Change Dump packages go into the archives") {
  RepublisherRig rig;
  REQUIRE(rig.change_packages(2).size() == 2); // packed before they may be archived
  // Parts end when their last change was recorded (now): a cutoff an hour
  // ahead takes both closed parts, never the open one.
  const auto plan = rig.rep->compactable(
      std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now() + std::chrono::hours(1)));
  REQUIRE(plan.compact.size() == 1);
  CHECK(plan.compact[0].parts == 2);
  auto archived = rig.rep->archive(plan.compact);
  REQUIRE_MESSAGE(archived, (archived ? "" : archived.error().message));
  rig.rep->refresh_soon();
  REQUIRE(rig.offered("changelist-archive"));
  auto archive = rig.document(rig.urls.change_list_archive("up"), rs::Capability::changelist_archive);
  REQUIRE_FALSE(archive.entries.empty());
  auto part = rig.document(archive.entries[0].loc, rs::Capability::changelist);
  CHECK(part.entries.size() == 2);
  CHECK(part.header.md->until);
  CHECK(rig.aux->archived("up", "changelist")->size() == archive.entries.size());
  REQUIRE(rig.offered("changedump-archive"));
  auto dumps = rig.document(rig.urls.change_dump_archive("up"), rs::Capability::changedump_archive);
  // One archived Change Dump per archived part, then the current one.
  CHECK(locs(dumps) == std::set<std::string>{"http://us.example/sets/up/archive/changedump-1.xml",
                                             "http://us.example/sets/up/archive/changedump-2.xml",
                                             rig.urls.change_dump("up")});
  auto first = rig.document("http://us.example/sets/up/archive/changedump-1.xml", rs::Capability::changedump);
  REQUIRE(first.entries.size() == 1);
  CHECK(rig.get(first.entries[0].loc).status == 200); // the package stays at its URL
}

namespace {

// The nice value of each of this process's threads named `comm`.
std::vector<int> nice_of_threads(const std::string& comm) {
  std::vector<int> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream f(task.path() / "comm");
    std::string name;
    std::getline(f, name);
    if (name == comm) {
      const auto tid = static_cast<id_t>(std::stol(task.path().filename().string()));
      errno = 0;
      const int n = ::getpriority(PRIO_PROCESS, tid);
      if (errno == 0) {
        out.push_back(n);
      }
    }
  }
  return out;
}

} // namespace

TEST_CASE("Republisher (no database): the dump builder yields the processor, the documents a follower reads do not") {
  const int base = ::getpriority(PRIO_PROCESS, 0);
  RepublisherRig rig;
  // The dump builder runs 10 above the daemon's nice value (it lowers its
  // own once it starts): the Change Dump may wait for a busy machine. The
  // renderer (Change Lists) and the list keeper (Resource Lists) stay at
  // the daemon's: lowered too, a baseline of a million was no faster on
  // this machine and the daemon's peak memory rose by 20-50 MB while they
  // lagged (bench/RESULTS.md, session 44).
  auto settled = [&](const std::string& comm, int want) {
    std::vector<int> seen;
    for (int i = 0; i < 500; ++i) {
      seen = nice_of_threads(comm);
      if (seen.size() == 1 && seen[0] == want) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return seen;
  };
  CHECK(settled("dump builder", std::min(base + 10, 19)) == std::vector<int>{std::min(base + 10, 19)});
  CHECK(settled("renderer", base) == std::vector<int>{base});
  CHECK(settled("list keeper", base) == std::vector<int>{base});
  // The test's own thread (the daemon's, answering clients) is as it was.
  CHECK(::getpriority(PRIO_PROCESS, 0) == base);
}

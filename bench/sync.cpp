// bench/sync: how fast the sync engine mirrors a Source over loopback.
//
// 1. Baseline of 10,000 resources of 1 KB from a Resource List served by an
//    in-process HTTP server on 127.0.0.1 (md5 hashes verified, blobs
//    fsynced, state and change log in PostgreSQL).
// 2. Incremental application of 50,000 changes whose content is already in
//    the blob store (metadata, change log and watermark only).
//
// 3. With --dump instead: a baseline of the same resources from one Resource
//    Dump package (a deflated ZIP with manifest.xml), target >= 15,000/s.
//
//   bench_sync --pg CONNINFO [--resources N] [--changes N] [--dump]
#define PQXX_HAVE_OPTIONAL 1
#include "resourcesync/hash.h"
#include "resourcesync/writer.h"
#include "store/pg/pg_store.h"
#include "sync_engine/sync.h"

#include <httplib.h>
#include <zip.h>
#include <pqxx/pqxx>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>
#include <sys/socket.h>
#include <unistd.h>

using namespace tributary;
namespace fs = std::filesystem;

namespace {

rs::Timestamp ts(const char* s) { return *rs::parse_w3c_datetime(s); }

rs::Entry cap(const std::string& loc, const char* c) {
  rs::Entry e{.loc = loc};
  e.md = rs::Metadata{};
  e.md->capability = c;
  return e;
}

std::string content(int i) {
  std::string s = "resource " + std::to_string(i) + " ";
  s.resize(1024, static_cast<char>('a' + i % 26));
  return s;
}

} // namespace

int main(int argc, char** argv) {
  std::string pg;
  int resources = 10000;
  int changes = 50000;
  bool dump = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--dump") {
      dump = true;
    } else if (a == "--pg" && i + 1 < argc) {
      pg = argv[++i];
    } else if (a == "--resources" && i + 1 < argc) {
      resources = std::atoi(argv[++i]);
    } else if (a == "--changes" && i + 1 < argc) {
      changes = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_sync --pg CONNINFO [--resources N] [--changes N]\n");
      return 2;
    }
  }
  if (pg.empty()) {
    std::fprintf(stderr, "bench_sync: --pg is required (bench/run.sh starts a cluster)\n");
    return 2;
  }
  const std::string dbname = "tributary_bench_" + std::to_string(getpid());
  {
    pqxx::connection c(pg);
    pqxx::nontransaction tx(c);
    tx.exec0("CREATE DATABASE " + dbname);
  }
  const std::string conninfo = pg + " dbname=" + dbname;
  if (auto m = store::migrate(conninfo); !m) {
    std::fprintf(stderr, "%s\n", m.error().message.c_str());
    return 1;
  }

  // The upstream.
  std::mutex mutex;
  std::map<std::string, std::string> served;
  httplib::Server server;
  server.set_tcp_nodelay(true);
  server.set_keep_alive_max_count(100000);
  server.new_task_queue = [] { return new httplib::ThreadPool(12); };
  server.Get(".*", [&](const httplib::Request& req, httplib::Response& res) {
    std::string body;
    {
      std::lock_guard lock(mutex);
      auto it = served.find(req.path);
      if (it == served.end()) {
        res.status = 404;
        return;
      }
      body = it->second;
    }
    auto shared = std::make_shared<std::string>(std::move(body));
    res.set_content_provider(shared->size(), "application/octet-stream",
                             [shared](size_t off, size_t len, httplib::DataSink& sink) {
                               sink.write(shared->data() + off, len);
                               return true;
                             });
  });
  // cpp-httplib 0.11 listens with a backlog of 5: eight clients connecting
  // at once lose SYNs and wait out a 1 s retransmit. Listening again on the
  // same socket raises the backlog (Linux).
  int listen_fd = -1;
  server.set_socket_options([&listen_fd](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_fd = sock;
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  ::listen(listen_fd, 1024);
  std::thread server_thread([&] { server.listen_after_bind(); });
  while (!server.is_running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  auto set = [&](const std::string& path, std::string body) {
    std::lock_guard lock(mutex);
    served[path] = std::move(body);
  };

  rs::Document caps;
  caps.header.md = rs::Metadata{};
  caps.header.md->capability = "capabilitylist";
  caps.entries = {cap(base + "/rl.xml", "resourcelist"), cap(base + "/cl.xml", "changelist")};
  set("/caps.xml", rs::write_document(caps));
  rs::Document rl;
  rl.header.md = rs::Metadata{};
  rl.header.md->capability = "resourcelist";
  rl.header.md->at = ts("2026-01-01T00:00:00Z");
  std::vector<std::string> sha256(static_cast<size_t>(resources));
  for (int i = 0; i < resources; ++i) {
    const std::string path = "/res/" + std::to_string(i);
    const std::string body = content(i);
    rs::Entry e{.loc = base + path};
    e.md = rs::Metadata{};
    e.md->hash = {{"md5", rs::hash_hex(rs::HashAlgorithm::md5, body)}};
    e.md->length = body.size();
    e.md->type = "text/plain";
    rl.entries.push_back(e);
    sha256[static_cast<size_t>(i)] = rs::hash_hex(rs::HashAlgorithm::sha256, body);
    set(path, body);
  }
  set("/rl.xml", rs::write_document(rl));
  if (dump) {
    // One package of every resource, deflated, with its manifest.
    const fs::path zpath = fs::temp_directory_path() / ("tributary-bench-dump-" + std::to_string(getpid()) + ".zip");
    rs::Document manifest;
    manifest.header.md = rs::Metadata{};
    manifest.header.md->capability = "resourcedump-manifest";
    manifest.header.md->at = ts("2026-01-01T00:00:00Z");
    std::vector<std::string> bodies;
    bodies.reserve(static_cast<size_t>(resources) + 1);
    int err = 0;
    zip_t* z = zip_open(zpath.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
    for (int i = 0; i < resources; ++i) {
      rs::Entry e = rl.entries[static_cast<size_t>(i)];
      e.md->path = "/res/" + std::to_string(i);
      manifest.entries.push_back(e);
      bodies.push_back(content(i));
      zip_file_add(z, ("res/" + std::to_string(i)).c_str(),
                   zip_source_buffer(z, bodies.back().data(), bodies.back().size(), 0), 0);
    }
    bodies.push_back(rs::write_document(manifest));
    zip_file_add(z, "manifest.xml", zip_source_buffer(z, bodies.back().data(), bodies.back().size(), 0), 0);
    if (zip_close(z) != 0) {
      std::fprintf(stderr, "cannot write %s\n", zpath.c_str());
      return 1;
    }
    std::string zip_bytes;
    {
      std::FILE* f = std::fopen(zpath.c_str(), "rb");
      char buf[1 << 16];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
        zip_bytes.append(buf, n);
      }
      std::fclose(f);
      fs::remove(zpath);
    }
    rs::Document rd;
    rd.header.md = rs::Metadata{};
    rd.header.md->capability = "resourcedump";
    rd.header.md->at = ts("2026-01-01T00:00:00Z");
    rs::Entry pkg{.loc = base + "/dump/1.zip"};
    pkg.md = rs::Metadata{};
    pkg.md->hash = {{"md5", rs::hash_hex(rs::HashAlgorithm::md5, zip_bytes)}};
    pkg.md->length = zip_bytes.size();
    pkg.md->type = "application/zip";
    rd.entries.push_back(pkg);
    const size_t zip_size = zip_bytes.size();
    set("/dump/1.zip", std::move(zip_bytes));
    set("/rd.xml", rs::write_document(rd));
    caps.entries.push_back(cap(base + "/rd.xml", "resourcedump"));
    set("/caps.xml", rs::write_document(caps));
    const fs::path ddata = fs::temp_directory_path() / ("tributary-bench-dump-" + std::to_string(getpid()));
    auto dstore = store::PgStore::open(conninfo);
    auto dblobs = store::BlobStore::open(ddata);
    if (!dstore || !dblobs) {
      std::fprintf(stderr, "cannot open the store or blob store\n");
      return 1;
    }
    sync::SyncEngine dengine(std::shared_ptr<store::Store>(std::move(*dstore)), *dblobs, sync::make_default_fetcher(),
                             std::make_shared<sync::HostThrottle>(), ddata / "tmp");
    sync::SourceConfig dsrc;
    dsrc.name = "bench-dump";
    dsrc.url = base + "/caps.xml";
    dsrc.strategy = "dumps";
    sync::RunOptions dopt;
    dopt.mode = store::RunMode::baseline;
    const auto d0 = std::chrono::steady_clock::now();
    auto r = dengine.run(dsrc, dopt);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - d0).count();
    if (r.status != store::RunStatus::succeeded || r.counters.created != static_cast<uint64_t>(resources)) {
      std::fprintf(stderr, "dump baseline did not succeed: %s %s\n", sync::format_counters(r.counters).c_str(),
                   r.errors.empty() ? "" : r.errors[0].c_str());
      return 1;
    }
    const double rate = resources / secs;
    std::printf("dump baseline %6d resources of 1 KB from one Resource Dump package (%.1f MB deflated) in %.2f s: "
                "%8.0f resources/s  [target >= 15000: %s]\n",
                resources, static_cast<double>(zip_size) / 1e6, secs, rate, rate >= 15000 ? "PASS" : "FAIL");
    server.stop();
    server_thread.join();
    fs::remove_all(ddata);
    {
      pqxx::connection c(pg);
      pqxx::nontransaction tx(c);
      tx.exec0("DROP DATABASE " + dbname + " WITH (FORCE)");
    }
    return rate >= 15000 ? 0 : 1;
  }
  rs::Document cl;
  cl.header.md = rs::Metadata{};
  cl.header.md->capability = "changelist";
  cl.header.md->from = ts("2026-01-01T00:00:00Z");
  set("/cl.xml", rs::write_document(cl));

  const fs::path data = fs::temp_directory_path() / ("tributary-bench-sync-" + std::to_string(getpid()));
  auto opened = store::PgStore::open(conninfo);
  auto blobs = store::BlobStore::open(data);
  if (!opened || !blobs) {
    std::fprintf(stderr, "cannot open the store or blob store\n");
    return 1;
  }
  std::shared_ptr<store::Store> st(std::move(*opened));
  sync::SyncEngine engine(st, *blobs, sync::make_default_fetcher(), std::make_shared<sync::HostThrottle>(),
                          data / "tmp");
  sync::SourceConfig src;
  src.name = "bench";
  src.url = base + "/caps.xml";
  sync::RunOptions opt;
  opt.mode = store::RunMode::baseline;
  if (const char* b = std::getenv("BENCH_BATCH")) {
    opt.batch_size = std::stoul(b);
  }

  auto t0 = std::chrono::steady_clock::now();
  if (std::getenv("TRIB_DEBUG")) {
    opt.on_progress = [&](const sync::Progress& p) {
      std::fprintf(stderr, "%.3f %llu\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                   static_cast<unsigned long long>(p.done));
    };
  }
  auto r1 = engine.run(src, opt);
  double baseline_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (r1.status != store::RunStatus::succeeded || r1.counters.created != static_cast<uint64_t>(resources)) {
    std::fprintf(stderr, "baseline did not succeed: %s %s\n", sync::format_counters(r1.counters).c_str(),
                 r1.errors.empty() ? "" : r1.errors[0].c_str());
    return 1;
  }

  // 50,000 changes, each pointing a resource at another resource's bytes
  // (already in the blob store): metadata, log and watermark only.
  for (int k = 0; k < changes; ++k) {
    const int uri = k % resources;
    const int c = (uri + 1 + k / resources) % resources;
    rs::Entry e{.loc = base + "/res/" + std::to_string(uri)};
    e.md = rs::Metadata{};
    e.md->change = rs::Change::updated;
    e.md->datetime = ts("2026-01-02T00:00:00Z") + std::chrono::milliseconds(k);
    e.lastmod = e.md->datetime;
    e.md->hash = {{"sha-256", sha256[static_cast<size_t>(c)]}};
    e.md->length = 1024;
    e.md->type = "text/plain";
    cl.entries.push_back(e);
  }
  set("/cl.xml", rs::write_document(cl));
  opt.mode = store::RunMode::incremental;
  t0 = std::chrono::steady_clock::now();
  auto r2 = engine.run(src, opt);
  double incr_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (r2.status != store::RunStatus::succeeded || r2.counters.updated != static_cast<uint64_t>(changes)) {
    std::fprintf(stderr, "incremental did not succeed: %s %s\n", sync::format_counters(r2.counters).c_str(),
                 r2.errors.empty() ? "" : r2.errors[0].c_str());
    return 1;
  }
  const double baseline_rate = resources / baseline_s;
  const double incr_rate = changes / incr_s;
  std::printf("baseline    %6d resources of 1 KB in %.2f s: %8.0f resources/s  [target >= 7000: %s]\n", resources,
              baseline_s, baseline_rate, baseline_rate >= 7000 ? "PASS" : "FAIL");
  std::printf("incremental %6d changes (content present) in %.2f s: %8.0f changes/s  [target >= 40000: %s]\n",
              changes, incr_s, incr_rate, incr_rate >= 40000 ? "PASS" : "FAIL");

  server.stop();
  server_thread.join();
  st.reset();
  fs::remove_all(data);
  {
    pqxx::connection c(pg);
    pqxx::nontransaction tx(c);
    tx.exec0("DROP DATABASE " + dbname + " WITH (FORCE)");
  }
  return baseline_rate >= 7000 && incr_rate >= 40000 ? 0 : 1;
}

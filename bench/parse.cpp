// bench/parse: how fast and how lean the protocol library reads documents.
//
// Generates (into a temporary directory) a 50,000-entry Change List with
// lastmod, datetime, change, md5 hash, length and type on every entry
// (~12 MB), a 50,000-entry Resource List, and a 50 MB document; then reads
// each in a fresh child process (so peak RSS is that of reading alone) and
// prints MB/s, entries/s and peak RSS. Reading includes validation.
//
//   bench_parse [--repeat N] [--dir DIR]
//   bench_parse --read FILE --repeat N      (the child mode)
#include "resourcesync/reader.h"

#include "sync_engine/oai/oai_pmh.h"

#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

extern char** environ;

namespace fs = std::filesystem;
using namespace tributary::rs;

namespace {

class Counter : public DocumentHandler {
public:
  void on_entry(Entry&& e, uint64_t) override {
    ++entries;
    bytes += e.loc.size();
  }
  uint64_t entries = 0;
  uint64_t bytes = 0;
};

std::string hex32(uint64_t seed) {
  static const char* k = "0123456789abcdef";
  std::string s(32, '0');
  for (int i = 0; i < 32; ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    s[static_cast<size_t>(i)] = k[(seed >> 60) & 0xf];
  }
  return s;
}

const char* k_open =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" "
    "xmlns:rs=\"http://www.openarchives.org/rs/terms/\">\n"
    "<rs:ln rel=\"up\" href=\"http://example.com/dataset1/capabilitylist.xml\"/>\n";

void write_changelist(const fs::path& p, int n) {
  std::ofstream out(p, std::ios::binary);
  out << k_open << "<rs:md capability=\"changelist\" from=\"2013-01-01T00:00:00Z\"/>\n";
  static const char* changes[] = {"created", "updated", "deleted"};
  Timestamp t = *parse_w3c_datetime("2013-01-01T00:00:00Z");
  for (int i = 0; i < n; ++i) {
    t += std::chrono::seconds(7);
    std::string ts = format_w3c_datetime(t);
    out << "<url>\n  <loc>http://example.com/dataset1/resources/" << i << "/document-" << i * 7919 % 100000
        << ".html</loc>\n  <lastmod>" << ts << "</lastmod>\n  <rs:md change=\"" << changes[i % 3]
        << "\" datetime=\"" << ts << "\"\n         hash=\"md5:" << hex32(static_cast<uint64_t>(i))
        << "\" length=\"" << 1000 + i % 90000 << "\" type=\"text/html\"/>\n</url>\n";
  }
  out << "</urlset>\n";
}

void write_resourcelist(const fs::path& p, int n) {
  std::ofstream out(p, std::ios::binary);
  out << k_open << "<rs:md capability=\"resourcelist\" at=\"2013-01-03T09:00:00Z\" completed=\"2013-01-03T09:05:00Z\"/>\n";
  Timestamp t = *parse_w3c_datetime("2012-01-01T00:00:00Z");
  for (int i = 0; i < n; ++i) {
    t += std::chrono::seconds(13);
    out << "<url>\n  <loc>http://example.com/dataset1/resources/" << i << ".pdf</loc>\n  <lastmod>"
        << format_w3c_datetime(t) << "</lastmod>\n  <rs:md hash=\"md5:" << hex32(static_cast<uint64_t>(i))
        << "\" length=\"" << 1000 + i % 90000 << "\" type=\"application/pdf\"/>\n</url>\n";
  }
  out << "</urlset>\n";
}

// A resource list of the given size in bytes (well over 50,000 entries: it
// is invalid for that, but it is what a careless Source publishes).
void write_big(const fs::path& p, uint64_t bytes) {
  std::ofstream out(p, std::ios::binary);
  out << k_open << "<rs:md capability=\"resourcelist\" at=\"2013-01-03T09:00:00Z\"/>\n";
  uint64_t written = 200;
  for (int i = 0; written < bytes - 200; ++i) {
    std::string e = "<url><loc>http://example.com/dataset1/big/" + std::to_string(i) +
                    ".xml</loc><lastmod>2013-01-02T17:00:00Z</lastmod><rs:md hash=\"md5:" +
                    hex32(static_cast<uint64_t>(i)) + "\" length=\"4096\" type=\"application/xml\"/>" +
                    "<rs:ln rel=\"duplicate\" href=\"http://mirror.example.com/big/" + std::to_string(i) +
                    ".xml\" pri=\"1\"/></url>\n";
    out << e;
    written += e.size();
  }
  out << "</urlset>\n";
}

int child(const std::string& file, int repeat) {
  std::vector<double> times;
  uint64_t entries = 0;
  uint64_t bytes = 0;
  uint64_t errors = 0;
  ReaderOptions opt;
  for (int i = 0; i < repeat; ++i) {
    std::ifstream in(file, std::ios::binary);
    Counter c;
    auto start = std::chrono::steady_clock::now();
    auto s = read_document(in, c, opt);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    times.push_back(secs);
    entries = c.entries;
    bytes = s.bytes;
    errors = s.errors;
  }
  std::sort(times.begin(), times.end());
  double median = times[times.size() / 2];
  std::printf("%.6f %.6f %.6f %llu %llu %llu\n", median, times.front(), times.back(),
              static_cast<unsigned long long>(entries), static_cast<unsigned long long>(bytes),
              static_cast<unsigned long long>(errors));
  return 0;
}

struct Measured {
  double median = 0, min = 0, max = 0;
  uint64_t entries = 0, bytes = 0, errors = 0;
  long peak_rss_kb = 0;
};

Measured run_child(const std::string& self, const fs::path& file, int repeat) {
  int fds[2];
  if (pipe(fds) != 0) {
    std::perror("pipe");
    std::exit(2);
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  std::string r = std::to_string(repeat);
  std::string f = file.string();
  std::vector<char*> argv{const_cast<char*>(self.c_str()), const_cast<char*>("--read"), f.data(),
                          const_cast<char*>("--repeat"), r.data(), nullptr};
  pid_t pid;
  if (posix_spawn(&pid, self.c_str(), &fa, nullptr, argv.data(), environ) != 0) {
    std::perror("posix_spawn");
    std::exit(2);
  }
  close(fds[1]);
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) {
    out.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  struct rusage ru {};
  wait4(pid, &status, 0, &ru);
  Measured m;
  unsigned long long e, b, er;
  if (std::sscanf(out.c_str(), "%lf %lf %lf %llu %llu %llu", &m.median, &m.min, &m.max, &e, &b, &er) != 6) {
    std::fprintf(stderr, "child failed: %s\n", out.c_str());
    std::exit(2);
  }
  m.entries = e;
  m.bytes = b;
  m.errors = er;
  m.peak_rss_kb = ru.ru_maxrss;
  return m;
}

void report(const char* name, const Measured& m, const char* target) {
  const double mb = static_cast<double>(m.bytes) / 1e6;
  std::printf("%-22s %7.1f MB %8llu entries  median %.3f s (min %.3f, max %.3f)  %6.1f MB/s  %9.0f entries/s  "
              "peak RSS %5.1f MB  %s\n",
              name, mb, static_cast<unsigned long long>(m.entries), m.median, m.min, m.max, mb / m.median,
              static_cast<double>(m.entries) / m.median, static_cast<double>(m.peak_rss_kb) / 1024.0, target);
}

} // namespace

int main(int argc, char** argv) {
  int repeat = 11;
  std::string read_file;
  fs::path dir;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--read" && i + 1 < argc) {
      read_file = argv[++i];
    } else if (a == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else {
      std::fprintf(stderr, "usage: bench_parse [--repeat N] [--dir DIR]\n");
      return 2;
    }
  }
  if (!read_file.empty()) {
    return child(read_file, repeat);
  }
  const bool own_dir = dir.empty();
  if (own_dir) {
    dir = fs::temp_directory_path() / ("tributary-bench-parse-" + std::to_string(getpid()));
  }
  fs::create_directories(dir);
  const std::string self = fs::read_symlink("/proc/self/exe").string();

  std::printf("generating documents in %s\n", dir.c_str());
  write_changelist(dir / "changelist-50k.xml", 50000);
  write_resourcelist(dir / "resourcelist-50k.xml", 50000);
  write_big(dir / "document-50MB.xml", 50ull * 1000 * 1000);

  Measured cl = run_child(self, dir / "changelist-50k.xml", repeat);
  Measured rl = run_child(self, dir / "resourcelist-50k.xml", repeat);
  Measured big = run_child(self, dir / "document-50MB.xml", std::max(1, repeat / 3));

  // W3C datetime parsing alone (the reference Python client spends 78% of
  // its parse time here).
  {
    const char* samples[] = {"2013-01-03T11:00:00Z", "2013-01-03T11:00:00.123456Z", "2013-01-03T11:00:00+01:00",
                             "2013-01-03"};
    const int n = 2'000'000;
    int64_t sink = 0;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      sink += parse_w3c_datetime(samples[i & 3])->time_since_epoch().count() & 1;
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%-22s %d parses in %.3f s: %.0f ns each (checksum %lld)\n", "w3c datetime", n, secs,
                secs * 1e9 / n, static_cast<long long>(sink));
  }

  // OAI-PMH pages (#50): a MiB of a character XML forbids between two
  // records (the scan was quadratic: 49 s for 256 KiB), and a 60 MB page of
  // 3 KB records through the streaming reader.
  double junk_secs = 0;
  {
    auto record = [](int i, const std::string& text) {
      return "<record><header><identifier>oai:b:" + std::to_string(i) +
             "</identifier><datestamp>2024-05-01T10:00:00Z</datestamp></header><metadata><oai_dc:dc "
             "xmlns:oai_dc=\"http://www.openarchives.org/OAI/2.0/oai_dc/\" xmlns:dc=\"http://purl.org/dc/elements/1.1/\">"
             "<dc:description>" + text + "</dc:description></oai_dc:dc></metadata></record>";
    };
    const std::string head = "<?xml version=\"1.0\"?><OAI-PMH xmlns=\"http://www.openarchives.org/OAI/2.0/\">"
                             "<responseDate>2026-11-27T10:00:00Z</responseDate><ListRecords>";
    const std::string tail = "</ListRecords></OAI-PMH>";
    const std::string junk = head + record(1, "a") + std::string(1 << 20, '\x01') + record(2, "b") + tail;
    std::vector<double> t;
    for (int i = 0; i < repeat; ++i) {
      auto start = std::chrono::steady_clock::now();
      auto page = tributary::sync::oai::parse_list(junk);
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      if (!page || page->records.size() != 2) {
        std::printf("oai page of junk: unexpected result\n");
        return 1;
      }
    }
    std::sort(t.begin(), t.end());
    junk_secs = t[t.size() / 2];
    std::string page60 = head;
    const std::string text(3000, 'x');
    int n = 0;
    while (page60.size() < 60u * 1000 * 1000) {
      page60 += record(n++, text);
    }
    page60 += tail;
    auto start = std::chrono::steady_clock::now();
    auto page = tributary::sync::oai::parse_list(page60);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%-22s 1 MiB of 0x01 between 2 records: median %.4f s (min %.4f, max %.4f)  %s\n", "oai page of junk",
                junk_secs, t.front(), t.back(), junk_secs < 1.0 ? "[target < 1 s: PASS]" : "[target < 1 s: FAIL]");
    std::printf("%-22s %.1f MB, %d records: %.3f s, %.1f MB/s (%zu records read)\n", "oai page 60 MB",
                static_cast<double>(page60.size()) / 1e6, n, secs, static_cast<double>(page60.size()) / 1e6 / secs,
                page ? page->records.size() : 0);
  }

  const bool cl_ok = cl.median <= 0.2;
  const bool big_ok = big.peak_rss_kb <= 100 * 1024;
  report("changelist 50k", cl, cl_ok ? "[target <= 0.2 s: PASS]" : "[target <= 0.2 s: FAIL]");
  report("resourcelist 50k", rl, "");
  report("document 50 MB", big, big_ok ? "[target peak RSS <= 100 MB: PASS]" : "[target peak RSS <= 100 MB: FAIL]");
  if (cl.errors != 0 || rl.errors != 0) {
    std::printf("unexpected validation errors: changelist %llu, resourcelist %llu\n",
                static_cast<unsigned long long>(cl.errors), static_cast<unsigned long long>(rl.errors));
    return 1;
  }
  if (own_dir) {
    fs::remove_all(dir);
  }
  return cl_ok && big_ok && junk_secs < 1.0 ? 0 : 1;
}

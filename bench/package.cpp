// bench/package: how long the dump package writer takes for one Change
// Dump package shaped like those of a baseline of small resources: 10,000
// bitstreams of 256 bytes read from a pack file (as the blob store holds
// them) and a manifest of 10,000 entries (about 4 MB). Prints the median
// and the range of `--repeat` writes, and the package's size.
//
//   bench_package [--repeat N] [--entries N] [--size BYTES]
#include "republisher/package_writer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace tributary;

int main(int argc, char** argv) {
  int repeat = 15;
  size_t entries = 10000;
  size_t size = 256;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--repeat")) {
      repeat = std::atoi(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--entries")) {
      entries = std::strtoul(argv[i + 1], nullptr, 10);
    } else if (!std::strcmp(argv[i], "--size")) {
      size = std::strtoul(argv[i + 1], nullptr, 10);
    }
  }
  const fs::path dir = fs::temp_directory_path() / ("tributary-bench-package-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::mt19937_64 rng(42);
  std::string pack(entries * size, '\0');
  for (auto& c : pack) {
    c = static_cast<char>('a' + rng() % 26);
  }
  std::ofstream(dir / "1.pack", std::ios::binary) << pack;
  std::vector<pub::PackageFile> files;
  std::string manifest =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" "
      "xmlns:rs=\"http://www.openarchives.org/rs/terms/\"><rs:md capability=\"changedump-manifest\" "
      "from=\"2026-11-30T07:00:00Z\" until=\"2026-11-30T07:01:00Z\"/>";
  char line[1024];
  for (size_t i = 0; i < entries; ++i) {
    const std::string name = "changes/" + std::to_string(i + 1);
    files.push_back({name, std::nullopt, {dir / "1.pack", i * size, size}});
    std::snprintf(line, sizeof line,
                  "<url><loc>http://aggregator.example.org/sets/big/resources/%zu</loc>"
                  "<lastmod>2026-11-30T07:00:%02zu.%06zuZ</lastmod><rs:md change=\"created\" "
                  "datetime=\"2026-11-30T07:00:%02zu.%06zuZ\" hash=\"sha-256:%016llx%016llx%016llx%016llx\" "
                  "length=\"%zu\" type=\"application/octet-stream\" path=\"/%s\"/>"
                  "<rs:ln rel=\"via\" href=\"http://source.example.org/r/%07zu\"/></url>\n",
                  i, i % 60, i, i % 60, i, static_cast<unsigned long long>(rng()),
                  static_cast<unsigned long long>(rng()), static_cast<unsigned long long>(rng()),
                  static_cast<unsigned long long>(rng()), size, name.c_str(), i);
    manifest += line;
  }
  manifest += "</urlset>\n";
  std::vector<double> ms;
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    auto digest = pub::write_package(dir / "p.zip", manifest, files);
    const auto t1 = std::chrono::steady_clock::now();
    if (!digest) {
      std::fprintf(stderr, "write_package: %s\n", digest.error().message.c_str());
      return 1;
    }
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("package of %zu x %zu B and a %.1f MB manifest: %.1f ms median (%.1f-%.1f, %d writes), %.2f MB\n",
              entries, size, manifest.size() / 1e6, ms[ms.size() / 2], ms.front(), ms.back(), repeat,
              fs::file_size(dir / "p.zip") / 1e6);
  fs::remove_all(dir);
  return 0;
}

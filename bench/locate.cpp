// bench/locate: how long the blob store takes to locate a dump package's
// bitstreams in a store of N blobs (default a million, as after the
// million's baseline): 10,000 random names of it, located one by one in
// the package's order (locate) and at once (locate_many, sorted by name).
// Also how long a writer's question "stored already?" takes for new
// content: the index lookup, and the filter that answers first
// (may_contain). Prints the median of --repeat rounds of each; and first,
// how long building the index of N takes 2,500 names a transaction, as a
// dump baseline's committer builds it (the log's merges included), then a
// committer's add of 2,500 new names into N (median and mean of 40). The 100,000
// names it adds stay: what is timed after it reads an index of N + 100,000.
//
//   bench_locate [--blobs N] [--names N] [--repeat N]
#include "store/blob/blob_index.h"
#include "store/blob/blob_store.h"

#include "resourcesync/hash.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace tributary;
using store::blob_detail::BlobIndex;
using store::blob_detail::IndexValue;

namespace {

std::string name_of(uint64_t i) { return rs::hash_hex(rs::HashAlgorithm::sha256, "blob " + std::to_string(i)); }

template <typename F> double median_ms(int repeat, F&& f) {
  std::vector<double> ms;
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f(r);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
  uint64_t blobs = 1000000;
  size_t names = 10000;
  int repeat = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--blobs")) {
      blobs = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (!std::strcmp(argv[i], "--names")) {
      names = std::strtoul(argv[i + 1], nullptr, 10);
    } else if (!std::strcmp(argv[i], "--repeat")) {
      repeat = std::atoi(argv[i + 1]);
    }
  }
  const fs::path dir = fs::temp_directory_path() / ("tributary-bench-locate-" + std::to_string(::getpid()));
  fs::create_directories(dir / "index");
  {
    // The index alone, as a baseline leaves it: every name in pack 1.
    auto index = BlobIndex::open(dir / "index");
    if (!index) {
      std::fprintf(stderr, "index: %s\n", index.error().message.c_str());
      return 1;
    }
    // Built as a baseline's committer builds it: 2,500 names a
    // transaction, timed whole (the log's merges included).
    std::vector<std::pair<std::string, IndexValue>> batch;
    std::vector<double> built;
    const auto start = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < blobs; ++i) {
      batch.emplace_back(name_of(i), IndexValue{1, 0, i * 304, 256});
      if (batch.size() == 2500 || i + 1 == blobs) {
        const auto t0 = std::chrono::steady_clock::now();
        if (auto r = (*index)->add(batch); !r) {
          std::fprintf(stderr, "add: %s\n", r.error().message.c_str());
          return 1;
        }
        built.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        batch.clear();
      }
    }
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::sort(built.begin(), built.end());
    std::printf("%llu names added 2,500 a transaction: %.1f s in all; a transaction's median %.1f ms, slowest %.1f ms\n",
                static_cast<unsigned long long>(blobs), total, built[built.size() / 2], built.back());
    // A committer's batch: 2,500 new names added in one transaction (as a
    // dump baseline's slice publishes them), into the index of N.
    {
      std::vector<double> ms;
      for (int b = 0; b < 40; ++b) {
        std::vector<std::pair<std::string, IndexValue>> adds;
        for (uint64_t i = 0; i < 2500; ++i) {
          adds.emplace_back(name_of(blobs + 100000000 + static_cast<uint64_t>(b) * 2500 + i), IndexValue{2, 0, i * 304, 256});
        }
        const auto t0 = std::chrono::steady_clock::now();
        if (auto r = (*index)->add(adds); !r) {
          std::fprintf(stderr, "add: %s\n", r.error().message.c_str());
          return 1;
        }
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      const double mean = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
      std::sort(ms.begin(), ms.end());
      std::printf("2,500 new names added to %llu: median %.1f ms a transaction, mean %.1f ms (of 40)\n",
                  static_cast<unsigned long long>(blobs), ms[ms.size() / 2], mean);
    }
    // A writer's question for new content (a baseline's): stored already?
    std::vector<std::string> fresh;
    for (size_t i = 0; i < names * static_cast<size_t>(repeat); ++i) {
      fresh.push_back(name_of(blobs + i));
    }
    size_t maybe = 0;
    const double looked_up = median_ms(repeat, [&](int r) {
      for (size_t i = 0; i < names; ++i) {
        maybe += (*index)->lookup(fresh[static_cast<size_t>(r) * names + i]).value_or(std::nullopt) ? 1 : 0;
      }
    });
    (void)(*index)->may_contain(fresh[0]); // the filter built, once, before it is timed
    const double filtered = median_ms(repeat, [&](int r) {
      for (size_t i = 0; i < names; ++i) {
        maybe += (*index)->may_contain(fresh[static_cast<size_t>(r) * names + i]) ? 1 : 0;
      }
    });
    std::printf("%zu new names: index lookup %.1f ms, filter %.1f ms (%zu said maybe)\n", names, looked_up, filtered,
                maybe);
  }
  auto store = store::BlobStore::open(dir);
  if (!store) {
    std::fprintf(stderr, "store: %s\n", store.error().message.c_str());
    return 1;
  }
  std::mt19937_64 rng(45);
  std::vector<std::vector<std::string>> rounds(static_cast<size_t>(repeat));
  for (auto& round : rounds) {
    for (size_t i = 0; i < names; ++i) {
      round.push_back(name_of(rng() % blobs));
    }
  }
  size_t found = 0;
  const double one_by_one = median_ms(repeat, [&](int r) {
    for (const auto& n : rounds[static_cast<size_t>(r)]) {
      found += (*store)->locate(n).has_value() ? 1 : 0;
    }
  });
  const double at_once = median_ms(repeat, [&](int r) {
    for (const auto& l : (*store)->locate_many(rounds[static_cast<size_t>(r)])) {
      found += l.has_value() ? 1 : 0;
    }
  });
  std::printf("%zu names of %llu blobs: locate one by one %.1f ms, locate_many %.1f ms (%zu found of %zu)\n", names,
              static_cast<unsigned long long>(blobs), one_by_one, at_once, found,
              names * 2 * static_cast<size_t>(repeat));
  fs::remove_all(dir);
  return 0;
}

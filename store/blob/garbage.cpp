#include "store/blob/garbage.h"


#include <algorithm>
#include <functional>
#include <vector>

namespace tributary::store {

namespace {

bool named(const std::vector<BlobName>& sorted, const BlobName& n) {
  return std::binary_search(sorted.begin(), sorted.end(), n);
}

// The names one of the store's walks gives (`walk` calls its argument with
// each), sorted, each once.
using Walk = std::function<Result<void>(const std::function<void(const std::string&)>&)>;
Result<std::vector<BlobName>> sorted_names(const Walk& walk) {
  std::vector<BlobName> out;
  if (auto r = walk([&](const std::string& hex) {
        if (auto n = BlobStore::name_of(hex)) {
          out.push_back(*n);
        }
      });
      !r) {
    return tl::unexpected(r.error());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Copies of what the bucket holds (`placed`) that this node may give back,
// in the order named, until the cache is a tenth under `cache_bytes`: what
// was evicted.
Result<RemoveReport> evict_cached(BlobStore& blobs, const GcReport& out,
                              const std::vector<std::pair<BlobName, uint64_t>>& kept,
                              const std::vector<BlobName>& placed, uint64_t cache_bytes) {
  // (What the sweep removed above is not in stored_bytes.)
  uint64_t bytes = out.stored_bytes - std::min(out.stored_bytes, out.garbage_bytes);
  if (bytes > cache_bytes) {
    const uint64_t target = cache_bytes / 10 * 9;
    std::vector<BlobName> evict;
    for (const auto& [name, length] : kept) {
      if (bytes <= target) {
        break;
      }
      if (named(placed, name)) {
        evict.push_back(name);
        bytes -= std::min(bytes, length);
      }
    }
    auto e = blobs.evict(evict);
    if (!e) {
      return tl::unexpected(e.error());
    }
    return *e;
  }
  return RemoveReport{};
}

} // namespace

Result<GcReport> collect_garbage(BlobReferences& db, BlobStore& blobs, const GcOptions& options, int64_t now) {
  GcReport out;
  // 1. What was condemned before this collection (read before the
  //    database, so that a name committed in between is seen below).
  auto marked = blobs.condemned();
  if (!marked) {
    return tl::unexpected(marked.error());
  }
  // 2. What the database names now: 32 bytes a name, sorted (a million
  //    resources and their changes: some tens of MB, for this process).
  auto named_now = sorted_names([&](const auto& fn) { return db.for_each_referenced_blob(fn); });
  if (!named_now) {
    return tl::unexpected(named_now.error());
  }
  const std::vector<BlobName> referenced = std::move(*named_now);
  out.referenced = referenced.size();

  // 3. Sweep: marks named again are lifted; those due (marked longer ago
  //    than the grace period) and still not named go.
  std::vector<BlobName> pardon;
  std::vector<BlobName> due;
  std::vector<BlobName> already; // marked and not named: not marked again below
  for (const auto& [name, at] : *marked) {
    if (named(referenced, name)) {
      pardon.push_back(name);
    } else if (now - at >= options.grace.count()) {
      due.push_back(name);
    } else {
      already.push_back(name);
    }
  }
  if (!options.dry_run) {
    auto p = blobs.pardon(pardon);
    if (!p) {
      return tl::unexpected(p.error());
    }
    out.pardoned = *p;
    auto removed = blobs.remove_condemned(due);
    if (!removed) {
      return tl::unexpected(removed.error());
    }
    out.removed = *removed;
  }
  std::sort(already.begin(), already.end());
  std::sort(due.begin(), due.end());

  // 4. Mark: every stored blob the database does not name.
  std::vector<BlobName> stored;
  std::vector<std::pair<BlobName, uint64_t>> kept; // stored and named: what a cache may evict
  std::vector<BlobName> garbage;
  if (auto r = blobs.for_each_blob([&](const BlobName& name, uint64_t length) {
        stored.push_back(name);
        ++out.stored;
        out.stored_bytes += length;
        if (!named(referenced, name)) {
          ++out.garbage;
          out.garbage_bytes += length;
          if (!named(already, name) && !named(due, name)) {
            garbage.push_back(name);
          }
        } else {
          kept.emplace_back(name, length);
        }
      });
      !r) {
    return tl::unexpected(r.error());
  }
  std::sort(stored.begin(), stored.end());
  // What the shared bucket holds (none without one).
  std::vector<BlobName> placed;
  if (options.cache_bytes) {
    auto in_bucket = sorted_names([&](const auto& fn) { return db.for_each_placed_blob(fn); });
    if (!in_bucket) {
      return tl::unexpected(in_bucket.error());
    }
    placed = std::move(*in_bucket);
  }
  for (const auto& n : referenced) {
    if (!std::binary_search(stored.begin(), stored.end(), n)) {
      ++(named(placed, n) ? out.in_bucket : out.missing);
    }
  }
  out.waiting = already.size();
  if (options.dry_run) {
    out.condemned = garbage.size();
    return out;
  }
  auto c = blobs.condemn(garbage, now);
  if (!c) {
    return tl::unexpected(c.error());
  }
  out.condemned = *c;
  out.waiting += *c;
  // A cache past its size gives back copies of what the bucket holds (the
  // garbage goes by the grace period, as on one machine).
  if (options.cache_bytes) {
    auto e = evict_cached(blobs, out, kept, placed, *options.cache_bytes);
    if (!e) {
      return tl::unexpected(e.error());
    }
    out.evicted = *e;
  }

  // 5. Give disk space back.
  auto rp = blobs.repack(options.repack_below);
  if (!rp) {
    return tl::unexpected(rp.error());
  }
  out.repacked = *rp;
  return out;
}

} // namespace tributary::store

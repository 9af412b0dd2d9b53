// Fills a store for bench/serve: one source, one feed, 50,000 resources of
// 1 KB (one content blob), created as 50,000 changes: our Resource List has
// 50,000 entries and our Change List a full 50,000-entry part.
//   bench_serve_populate --pg CONNINFO --data DIR
#include "resourcesync/hash.h"
#include "store/blob/blob_store.h"
#include "store/pg/pg_store.h"

#include <cstdio>
#include <string>

using namespace tributary;

int main(int argc, char** argv) {
  std::string pg;
  std::string data;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--pg") {
      pg = argv[i + 1];
    } else if (a == "--data") {
      data = argv[i + 1];
    }
  }
  if (pg.empty() || data.empty()) {
    std::fprintf(stderr, "usage: bench_serve_populate --pg CONNINFO --data DIR\n");
    return 2;
  }
  auto st = store::PgStore::open(pg);
  auto blobs = store::BlobStore::open(data);
  if (!st || !blobs) {
    std::fprintf(stderr, "cannot open the store: %s\n", st ? "blob store" : st.error().message.c_str());
    return 1;
  }
  std::string content(1024, 'x');
  for (size_t i = 0; i < content.size(); ++i) {
    content[i] = static_cast<char>('a' + i % 26);
  }
  auto blob = (*blobs)->put(content, {rs::HashAlgorithm::md5});
  if (!blob) {
    std::fprintf(stderr, "%s\n", blob.error().message.c_str());
    return 1;
  }
  const int64_t source = *(*st)->ensure_source("bench", "http://upstream.example.org/");
  const int64_t feed = *(*st)->ensure_feed(source, "http://upstream.example.org/caps.xml");
  const rs::Timestamp t0 = *rs::parse_w3c_datetime("2026-01-01T00:00:00Z");
  for (int batch = 0; batch < 50; ++batch) {
    store::Batch b;
    b.feed_id = feed;
    for (int i = 0; i < 1000; ++i) {
      const int n = batch * 1000 + i;
      store::ResourceRecord r;
      r.uri = "http://upstream.example.org/records/" + std::to_string(n);
      r.lastmod = t0 + std::chrono::seconds(n);
      r.length = blob->length;
      r.hashes = blob->hashes;
      r.type = "text/plain";
      r.blob_sha256 = blob->sha256;
      b.changes.push_back(store::ChangeRecord{rs::Change::created, r.lastmod, r});
      b.upserts.push_back(r);
    }
    if (auto r = (*st)->apply(b); !r) {
      std::fprintf(stderr, "%s\n", r.error().message.c_str());
      return 1;
    }
  }
  std::printf("http://upstream.example.org/records/0\n");
  return 0;
}

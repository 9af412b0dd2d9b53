#include "sync_engine/document_fetch.h"

namespace tributary::sync {

Result<FetchedDocument> fetch_document(Fetcher& fetcher, const std::string& url, const FetchOptions& options,
                                       rs::DocumentHandler& handler, const std::function<void()>& reset_handler) {
  // The reader cannot rewind: a retried transfer starts a fresh one.
  // Relative references resolve against the URL asked for (a redirect is
  // known only at the end, and these are small documents).
  rs::ReaderOptions ro;
  ro.base_url = url;
  std::unique_ptr<rs::Reader> reader = std::make_unique<rs::Reader>(handler, ro);
  FetchedDocument out;
  FetchOptions o = options;
  o.restart = [&] {
    if (!reset_handler) {
      return false;
    }
    reset_handler();
    reader = std::make_unique<rs::Reader>(handler, ro);
    out.body_prefix.clear();
    return true;
  };
  auto r = fetcher.fetch(url, o, [&](const char* d, size_t n) {
    // Enough of the body to find <link rel="resourcesync"> in an HTML head.
    constexpr size_t k_prefix = 256 * 1024;
    if (out.body_prefix.size() < k_prefix) {
      out.body_prefix.append(d, std::min(n, k_prefix - out.body_prefix.size()));
    }
    reader->feed(d, n);
    return true; // keep reading even after the reader stopped: the prefix may be HTML
  });
  if (!r) {
    return tl::unexpected(r.error());
  }
  if (r->status < 200 || r->status > 299) {
    return tl::unexpected(status_error(url, r->status));
  }
  out.response = *r;
  out.summary = reader->finish();
  return out;
}

} // namespace tributary::sync

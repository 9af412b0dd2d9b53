#pragma once

// Room republisher/content_server: the resources we mirror, served by (set,
// original URI) from the blob store. What a request for one answers
// (status, validators, where its bytes are, small bytes themselves) is
// looked up in the store once and cached until the store moves on
// (store_moved, called by the document renderer before it publishes what
// the store now holds), so that a hot resource costs no query. Owns its
// cache and its lock; reads the sets' feeds as a snapshot it is handed.

#include "common/http/server.h"
#include "republisher/url_scheme.h"
#include "store/blob/blob_store.h"
#include "store/store_reader.h"

#include <cstdint>
#include <ctime>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace tributary::pub {

class ContentServer {
public:
  // Feeds by set name.
  using SetFeeds = std::map<std::string, std::vector<int64_t>>;

  // `urls` must outlive this (the republisher owns both).
  ContentServer(std::shared_ptr<store::StoreReader> lookups, std::shared_ptr<store::BlobStore> blobs,
                const UrlScheme& urls);

  // The store moved on: what was cached is forgotten, and lookups in
  // flight are not cached; `set_feeds` is what each set serves from now on.
  void store_moved(std::shared_ptr<const SetFeeds> set_feeds);

  // A GET or HEAD of the resource `uri` of `set`: 200 (conditional, with
  // ranges), 304, 404, 410 (deleted), 503 (the store or the blob store
  // unreachable). `blocking` when it must wait on the store or the disk
  // and `can_block` is false.
  http::Disposition serve(const http::Request& req, http::Response& res, const std::string& set,
                          const std::string& uri, bool can_block);

private:
  // What a content request answers, prepared once per state of the store.
  struct View {
    int status = 404;             // 200, 404 or 410
    std::string etag;
    std::string last_modified;    // HTTP date
    std::time_t modified = 0;
    std::string type;
    std::string path;             // the file holding the blob's bytes
    size_t offset = 0;            // where they start in it
    std::shared_ptr<const std::string> bytes; // small blobs, held in memory
    size_t size = 0;
    // The upstream's Signposting links of the resource, as Link header
    // values ("<href>; rel=\"cite-as\"", ...), those safe to send.
    std::string signposts;
  };
  // The view of (set, uri); a miss queries the store only where blocking
  // is allowed (can_block), else `miss` is set and nullptr returned;
  // nullptr without `miss`: the store is unreachable.
  std::shared_ptr<const View> view(const std::string& set, const std::string& uri, bool can_block, bool& miss);

  static constexpr size_t k_inline_max = 64 * 1024;
  static constexpr size_t k_inline_budget = 256ull * 1024 * 1024;

  std::shared_ptr<store::StoreReader> m_lookups;
  std::shared_ptr<store::BlobStore> m_blobs;
  const UrlScheme& m_urls;
  std::shared_mutex m_mutex; // guards what follows
  std::shared_ptr<const SetFeeds> m_set_feeds = std::make_shared<SetFeeds>();
  std::unordered_map<std::string, std::shared_ptr<const View>> m_cache;
  size_t m_cached_bytes = 0; // keys and inline bodies
  uint64_t m_epoch = 0;      // bumped by store_moved
};

} // namespace tributary::pub

#pragma once

// Room republisher/discovery: the aggregate as IIIF Change Discovery 1.0
// streams (#52), read from the change log on request: one per set and one of
// everything. Holds nothing of its own: the set's pages follow the Change
// List parts the document renderer put on the shelf, so the stream and the
// Change List are one history in two syntaxes.
//
// - A set's page n holds the changes of its Change List part n, in order,
//   each as an activity (Create, Update, Delete) whose endTime is the
//   entry's datetime in that part; a closed part's page never changes again
//   (it gains `next` when its part closes, once). The last page is the open
//   part's.
// - The stream of everything: page n holds the changes with change-log seq
//   in ((n-1)·k_everything_page, n·k_everything_page] of every published
//   feed, endTime the time we logged them. A page is closed once the log
//   passed its end (seq order is commit order), and never changes again.
// - An activity's object: `id` our copy (what a follower fetches),
//   `canonical` the original, `type` the IIIF type the upstream stream gave
//   (Manifest, Collection) where we know it, else "Document" (an
//   ActivityStreams document of any kind: honest for what we cannot tell).
// - Pages whose changes retention compacted answer 410 Gone; `first` is the
//   first page kept.

#include "common/http/server.h"
#include "republisher/shelf.h"
#include "republisher/url_scheme.h"
#include "store/store_reader.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tributary::pub {

class ChangeDiscovery {
public:
  static constexpr size_t k_everything_page = 1000; // change-log seqs a page of everything covers

  // `urls` and `shelf` must outlive this. `part_size`: the Change List's.
  ChangeDiscovery(std::shared_ptr<store::StoreReader> reader, const UrlScheme& urls, const Shelf& shelf,
                  size_t part_size);

  // A collection or a page (route kind activity_collection or
  // activity_page). Reads the database: call on a worker.
  http::Disposition serve(const http::Request& req, http::Response& res, const Route& route);

private:
  struct Page; // what one page holds
  Result<std::optional<std::string>> set_collection(const std::string& set);
  Result<std::optional<std::string>> everything_collection();
  // nullopt: no such page (404); a page whose changes are compacted away
  // has `gone`.
  Result<std::optional<Page>> set_page(const std::string& set, size_t n);
  Result<std::optional<Page>> everything_page(size_t n);
  // The stream of everything as of now: its feeds (each with its own set:
  // where our copy is), the log's last seq, its first and last pages.
  struct Everything {
    std::vector<int64_t> feeds;
    std::map<int64_t, std::string> source_set;
    int64_t last_seq = 0;
    size_t first_page = 1;
    size_t last_page = 1;
  };
  Result<Everything> everything();

  std::shared_ptr<store::StoreReader> m_reader;
  const UrlScheme& m_urls;
  const Shelf& m_shelf;
  size_t m_part_size;
};

} // namespace tributary::pub

#pragma once

#include "resourcesync/reader.h"
#include "sync_engine/fetcher.h"

#include <functional>

namespace tributary::sync {

// A ResourceSync document fetched and read in one stream.
struct FetchedDocument {
  FetchResponse response;
  rs::ReadSummary summary;
  std::string body_prefix; // the first 256 KiB, for HTML when it was not XML
};

// Fetches `url` and streams the body through the reader into `handler`.
// Fails for transport errors and non-2xx statuses (not_found for 404/410).
// A body that is not a valid document is not an error here: look at
// `summary` (stopped / valid()). A transfer cut off midway is retried only
// if `reset_handler` is given (it must forget what the handler received).
Result<FetchedDocument> fetch_document(Fetcher& fetcher, const std::string& url, const FetchOptions& options,
                                       rs::DocumentHandler& handler,
                                       const std::function<void()>& reset_handler = nullptr);

// Collects a whole (small) document in memory.
struct CollectingHandler : rs::DocumentHandler {
  rs::Document document;
  void reset() { document = rs::Document{}; }
  void on_header(const rs::DocumentHeader& h) override { document.header = h; }
  void on_entry(rs::Entry&& e, uint64_t) override { document.entries.push_back(std::move(e)); }
};

} // namespace tributary::sync

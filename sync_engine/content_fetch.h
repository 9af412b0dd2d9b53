#pragma once

#include "resourcesync/model.h"
#include "store/blob/blob_store.h"
#include "sync_engine/fetcher.h"

#include <functional>
#include <optional>
#include "common/blocking_semaphore.h"
#include <string>
#include <string_view>
#include <vector>

namespace tributary::sync {

// What a resource should be: the length and digests the document offered.
struct Expected {
  std::optional<uint64_t> length;
  std::vector<rs::HashValue> hashes;
};

struct FetchedContent {
  store::BlobInfo blob;
  // With `defer_publish`: the sealed bytes, to hand to store::BlobStore::publish().
  std::optional<store::BlobStore::Writer> sealed;
  std::string served_from; // which location the bytes came from
  std::optional<std::string> type; // Content-Type of the response
};

// Decides whether content may be fetched from a URL; sets `why` when not.
using HostPolicy = std::function<bool(const std::string& url, std::string& why)>;

// The locations to try for an entry: its rel="duplicate" links in pri order
// (lowest first, absent = 999999, ties in document order), then `loc`.
std::vector<std::string> candidate_locations(const std::string& loc, const std::vector<rs::Link>& links);

// Fetches a resource into the blob store, trying each candidate location in
// turn and verifying the bytes against `expected` (length, and the strongest
// hash offered). Fails with every location's reason when none delivers the
// right bytes: `not_found` if every location said 404/410, otherwise
// `invalid_document` for a mismatch or `transient`.
//
// `network_slots`, when given, bounds the requests in flight: a slot is held
// for the transfer only, not while the blob is fsynced and linked, so that
// slow disks do not hold the source's concurrency hostage.
// The digests a blob of `expected` keeps: the strongest offered (to check)
// and every other offered one we can store (for later audits).
std::vector<rs::HashAlgorithm> digests_to_keep(const Expected& expected);

// A whole 2xx body already received (the pipelined path), written and
// checked as fetch_content() checks what it fetches; sealed, for
// BlobStore::publish(). Fails `invalid_document` when the length or hash is
// not what the entry announced.
Result<FetchedContent> accept_content(store::BlobStore& blobs, const Expected& expected, const std::string& url,
                                      std::string_view body, const std::string& content_type);

Result<FetchedContent> fetch_content(Fetcher& fetcher, store::BlobStore& blobs, const FetchOptions& options,
                                     const std::string& loc, const std::vector<rs::Link>& links,
                                     const Expected& expected, const HostPolicy& allowed,
                                     BlockingSemaphore* network_slots = nullptr, bool defer_publish = false);

} // namespace tributary::sync

#pragma once

// Room republisher/change_lists: a set's change log published as our Change
// List: its parts (closed ones rendered once, the open one grown as the
// changes come) and its index. The document renderer keeps what it needs
// from one rendering to the next.

#include "republisher/cached_document.h"
#include "republisher/documents.h"
#include "resourcesync/growing_text.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tributary::pub {

// The set's change log in parts of `part_size` changes: every part but the
// last is full, closed (`until`), numbered (changelist-<n>.xml) and never
// changes again; the last is open and is changelist.xml, the URL the
// Capability List names, so that a client that reads only that document
// (py-resync's default) reads a Change List it understands. Every part links
// (`index`) to the Change List Index, changelist-index.xml, which lists the
// closed parts and then changelist.xml: a Destination whose last change is
// older than the open list's `from` finds the rest there (spec 12.1, 12.2).
// The result holds the parts in order, then the index. Each entry's `datetime` is ours,
// strictly increasing: the time we recorded it, nudged a microsecond past its
// predecessor when the clock did not move.
//
// Each entry as change_entry() gives it.
//
// Closed parts never change, so they are rendered once: with `closed`, the
// parts it already describes are neither read from the store nor returned
// (the caller keeps the XML it got the first time), and parts that close in
// this render are added to it. A `closed` made for other feeds or another
// part size is reset.
//
// With `compaction` (the change log's retention compacted this set's first
// parts; one for other feeds or another part size does not apply), those
// parts are dropped from `closed` and from the index, and numbering and
// time go on after them: the index's first part starts where the last
// compacted one ended, so a Destination that is behind it knows it must
// re-baseline (spec 12.1, and our own sync engine does).
struct ClosedParts {
  struct Part {
    size_t n = 0;         // its number: changelist-<n>.xml
    std::string url;
    rs::Timestamp from;
    rs::Timestamp until;
    int64_t last_seq = 0; // of the part's last change
  };
  std::vector<int64_t> feeds;
  size_t part_size = 0;
  std::vector<Part> parts;
  size_t compacted = 0;                   // parts 1..compacted are gone
  int64_t compacted_seq = 0;              // the last change of part `compacted`
  std::optional<rs::Timestamp> compacted_until; // its `until`
};
//
// With `open` (kept by the caller too), the open part is grown from where
// the last rendering left it: only the changes after it are read and
// rendered, and its gzip copy and digest come with it (OpenPart).
//
// With `closed_sink`, each part that closes goes there as soon as it is
// rendered, not into the result: a refresh that finds many parts closed at
// once (a baseline of millions) holds one of them at a time.
// The open part as last rendered, kept by the caller from one rendering to
// the next: a rendering then reads and renders only the changes after it,
// and its gzip copy and SHA-256 grow with it (rendered whole, a baseline of
// a million read, rendered, compressed and hashed its 50,000 entries, 14 MB,
// at every refresh). Like a closed part's, an entry is fixed once rendered:
// a describedby link to a resource the set did not hold yet keeps its
// upstream URL when the resource comes later. One made for other feeds,
// another part size, or a part that starts after another change is started
// again.
struct OpenPart {
  std::vector<int64_t> feeds;
  size_t part_size = 0;
  int64_t after_seq = -1;                 // the part starts after this change (-1: nothing kept)
  int64_t last_seq = 0;                   // its newest change
  std::optional<rs::Timestamp> from;      // once known, its header is in `text`
  std::optional<rs::Timestamp> last_time; // its newest entry's datetime
  size_t entries = 0;
  size_t head_size = 0; // the header's bytes at the start of `text`
  rs::GrowingText text{k_transient_gzip_level};
  // The last rendering's gzip copy and SHA-256 of the open part's XML
  // (both empty when it was rendered whole: no entry and no `from` yet).
  std::string gzipped;
  std::string sha256_hex;
};

Result<std::vector<rs::WrittenPart>> render_change_list(store::StoreReader& reader, const UrlScheme& urls,
                                                        const PublishedSet& set, size_t part_size = 10000,
                                                        ClosedParts* closed = nullptr,
                                                        const std::function<void(rs::WrittenPart&&)>& closed_sink = {},
                                                        const store::Compaction* compaction = nullptr,
                                                        OpenPart* open = nullptr);

} // namespace tributary::pub

#pragma once

#include "republisher/url_scheme.h"
#include "resourcesync/writer.h"
#include "store/store_reader.h"

#include <functional>
#include <string>
#include <vector>

// Tributary's own ResourceSync documents, rendered from the store (spec 14.8,
// "Republishing Resources"): every value from our perspective, each entry's
// loc our copy, the original kept in a rel="via" link.
namespace tributary::pub {

// The pieces every document of ours is made of: the time to the
// microsecond (as our documents carry it), a link, and a document of a
// capability with nothing else in its header yet.
rs::Timestamp now();
rs::Link link(std::string rel, std::string href);
rs::Document capability_document(const char* capability);

// A set we publish: one Capability List over one or more feeds.
struct PublishedSet {
  std::string name;
  std::vector<int64_t> feeds;
};

// A configured set merging the feeds of several sources.
struct NamedSet {
  std::string name;
  std::vector<std::string> sources;
};

// One set per feed (an upstream set), named after its source; a source
// followed through several Capability Lists gets "-2", "-3", ... Named sets
// follow, each over every feed of its sources (a named set whose name is
// taken by a default one is skipped).
std::vector<PublishedSet> published_sets(const std::vector<store::FeedInfo>& feeds,
                                         const std::vector<NamedSet>& named = {});
std::vector<PublishedSet> default_sets(const std::vector<store::FeedInfo>& feeds);

// The entry describing one resource we hold:
// - loc is our URL; md carries the hash, length and type of the bytes we hold;
// - rel="via" points at the original: the upstream's own via when it had one
//   (we are a second-level aggregator), else the URI we synced it from;
// - rel="duplicate": the location we synced from, then the upstream's own
//   mirrors in their relative pri order, after our copy (no rs:md-like
//   attributes on them, spec 14.2);
// - collection and canonical links are not inherited (they lose their meaning
//   on a copy); other links are kept.
// - describedby/describes links are rewritten to our URLs when we hold their
//   target in the same set (`held` says whether we do; may be empty).
// Whether the set holds `uri` live (for resource_entry's `held`); asks the
// store per call.
std::function<bool(const std::string& uri)> held_in(store::StoreReader& reader, const PublishedSet& set);

rs::Entry resource_entry(const UrlScheme& urls, const std::string& set, const store::ResourceRecord& r,
                         const std::function<bool(const std::string& uri)>& held = {});

// One change of the log as our Change List (and Change Dump manifests) show
// it: resource_entry() plus `change` and our `datetime`: the recorded time,
// nudged a microsecond past `previous` (the entry before it) when the clock
// did not move; a deletion carries no hash, length or type.
rs::Entry change_entry(const UrlScheme& urls, const std::string& set, const store::LoggedChange& c,
                       std::optional<rs::Timestamp> previous, const std::function<bool(const std::string& uri)>& held);

// Its header links our other faces: the API catalog (rel="api-catalog"),
// and as rel="alternate" the OAI-PMH base URL (when served) and the IIIF
// Change Discovery stream of everything.
std::string render_source_description(const UrlScheme& urls, const std::vector<PublishedSet>& sets,
                                      bool oai = true);
// Our API catalog (RFC 9727, a linkset in JSON, RFC 9264): an `item` for
// the ResourceSync Source Description, when served the OAI-PMH base URL,
// and the IIIF Change Discovery streams: of everything, then of each set.
std::string render_api_catalog(const UrlScheme& urls, bool oai, const std::vector<PublishedSet>& sets = {});
// `resource_dump`, `change_dump`: the set has them to offer;
// `hub`: the WebSub hub of the set's Change Notification channel (spec:
// Change Notification 1.0.1, section 5: the topic as an entry of capability
// "changelist-notification", the hub in its rel="hub" link); empty: none.
// `archives`: the set's Change List Archive and Resource List Archive, and
// with `change_dump_archive` (Change Dumps are built) its Change Dump Archive.
std::string render_capability_list(const UrlScheme& urls, const PublishedSet& set, bool resource_dump = false,
                                   bool change_dump = false, const std::string& hub = {}, bool archives = false,
                                   bool change_dump_archive = false);

// One list an archive names: its URL and span (Change Lists: from, until;
// Resource Lists: at, completed).
struct ArchivedList {
  std::string url;
  std::optional<rs::Timestamp> from;
  std::optional<rs::Timestamp> until;
  std::optional<rs::Timestamp> at;
  std::optional<rs::Timestamp> completed;
};
// A Change List Archive or Resource List Archive (ResourceSync Archives,
// sections 3 and 5): a urlset of capability "changelist-archive" or
// "resourcelist-archive" pointing up to the set's Capability List, one
// entry per list in the order given.
std::string render_archive(const UrlScheme& urls, const std::string& set, const char* capability,
                           const std::vector<ArchivedList>& lists);

// Every live resource of the set, in feed then URI order (stable, so parts do
// not reshuffle needlessly); one document, or parts and an index past the
// limits. `at` is when the snapshot began; `completed` is set when done.
Result<std::vector<rs::WrittenPart>> render_resource_list(store::StoreReader& reader, const UrlScheme& urls,
                                                          const PublishedSet& set, rs::Timestamp at,
                                                          const rs::PartitionLimits& limits = {});

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
// With `closed_sink`, each part that closes goes there as soon as it is
// rendered, not into the result: a refresh that finds many parts closed at
// once (a baseline of millions) holds one of them at a time.
Result<std::vector<rs::WrittenPart>> render_change_list(store::StoreReader& reader, const UrlScheme& urls,
                                                        const PublishedSet& set, size_t part_size = 10000,
                                                        ClosedParts* closed = nullptr,
                                                        const std::function<void(rs::WrittenPart&&)>& closed_sink = {},
                                                        const store::Compaction* compaction = nullptr);

} // namespace tributary::pub

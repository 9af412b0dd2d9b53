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
// An index's or archive's entry for one list: its URL and span.
rs::Entry list_entry(const ArchivedList& l);
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

} // namespace tributary::pub

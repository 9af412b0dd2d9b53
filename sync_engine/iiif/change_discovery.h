#pragma once

// IIIF Change Discovery API 1.0 as a Source (#36), the protocol half: an
// ActivityStreams OrderedCollection of activities (Create, Update, Delete,
// Move, Add, Remove, Refresh) in OrderedCollectionPages linked by prev and
// next, read with no I/O. Read liberally: an activity we cannot use costs
// that activity, with a warning naming it; the page is kept.

#include "common/result.h"
#include "resourcesync/datetime.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tributary::sync::iiif {

// The stream's entry point.
struct Collection {
  std::string id;
  std::string first; // a page URL; empty when none
  std::string last;
  std::optional<uint64_t> total_items;
};

struct Activity {
  std::string id;   // may be empty (not required by the spec)
  std::string type; // Create, Update, Delete, Move, Add, Remove, Refresh
  std::string object;      // the object's id (a Manifest or Collection)
  std::string object_type; // "Manifest", "Collection", ...
  std::string target;      // Move: where the object went
  std::optional<rs::Timestamp> end_time; // absent: a Level 0 stream
};

struct Page {
  std::string id;
  std::string prev; // the page of older activities; empty at the first
  std::string next;
  std::optional<uint64_t> start_index;
  std::vector<Activity> items; // in stream order: oldest first
  std::vector<std::string> warnings;
};

Result<Collection> parse_collection(std::string_view json);
Result<Page> parse_page(std::string_view json);

} // namespace tributary::sync::iiif

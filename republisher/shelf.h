#pragma once

// Room republisher/shelf: what the republisher's components have published,
// as immutable snapshots. Each component (the document renderer, the
// Resource List keeper, the dump builder) builds its view on its own thread
// and puts it here whole; the request path and the other components take
// the view as it stands, and never see one half-built. The shelf holds the
// pointers and one lock over them, taken for the swap or the copy of a
// pointer: nothing is rendered under it.

#include "republisher/cached_document.h"
#include "republisher/change_lists.h"
#include "republisher/dumps.h"

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

namespace tributary::pub {

// Every set published -> its feeds.
using SetFeeds = std::map<std::string, std::vector<int64_t>>;

// The document renderer's: every document but the Resource Lists, the sets
// it published, and their closed Change List parts.
struct RenderedView {
  DocumentMap documents; // by URL path
  // The same map the content server was handed with this view.
  std::shared_ptr<const SetFeeds> set_feeds = std::make_shared<const SetFeeds>();
  std::map<std::string, std::shared_ptr<const ClosedParts>> closed; // per set, as last rendered
  int64_t seq = -1;                                           // the change-log seq shown
};

// The Resource List keeper's: each set's Resource List (index and parts).
struct ListsView {
  struct Listed {
    std::string set;
    std::shared_ptr<const CachedDocument> document;
  };
  std::map<std::string, Listed> documents; // by URL path
  std::set<std::string> sets;              // the sets that have one
};

// The dump builder's: each set's Resource Dump and Change Dump packages,
// and the files this node serves for them.
struct DumpsView {
  std::map<std::string, std::string> resource_dumps;                     // set -> its Resource Dump (XML)
  std::map<std::string, std::vector<ChangePackage>> change_packages;     // set -> packages, by part
  std::map<std::string, std::filesystem::path> files;                    // URL path -> package or manifest
};

class Shelf {
public:
  std::shared_ptr<const RenderedView> rendered() const;
  std::shared_ptr<const ListsView> lists() const;
  std::shared_ptr<const DumpsView> dumps() const;

  void put(std::shared_ptr<const RenderedView> view);
  void put(std::shared_ptr<const ListsView> view);
  void put(std::shared_ptr<const DumpsView> view);

  // Sources removed from the configuration, kept until purged: their sets'
  // documents and resources answer 410 Gone.
  void put_removed_sources(std::set<std::string> names);
  // Whether `set` belongs to one of them (its first set NAME, or NAME-2, …).
  bool removed_set(const std::string& set) const;

  // The renderer's or the Resource List keeper's document at `path`;
  // nullptr when there is none. A Resource List is served while its set is
  // one the renderer publishes: a set removed goes whole, its list with its
  // other documents, whenever the keeper's next pass comes.
  std::shared_ptr<const CachedDocument> document(const std::string& path) const;

private:
  mutable std::shared_mutex m_mutex; // guards the pointers below
  std::shared_ptr<const RenderedView> m_rendered = std::make_shared<RenderedView>();
  std::shared_ptr<const ListsView> m_lists = std::make_shared<ListsView>();
  std::shared_ptr<const DumpsView> m_dumps = std::make_shared<DumpsView>();
  std::shared_ptr<const std::set<std::string>> m_removed = std::make_shared<std::set<std::string>>();
};

} // namespace tributary::pub

#pragma once

#include "republisher/cached_document.h"
#include "republisher/documents.h"
#include "republisher/url_scheme.h"
#include "resourcesync/writer.h"
#include "store/store_reader.h"

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

// A set's Resource List as parts in files, each part covering a range of
// the set's (feed, URI) order, rendered again only when the change log
// shows a change in its range. Entries are streamed from the store into
// the files (and their gzip copies): no part is ever held whole in memory,
// and a change to one resource of a million costs one part of at most
// twice `part_entries`, not the whole list.
//
// `at` and `completed` stay honest: a part says when it was rendered; the
// index (or the list, when it is one part) says when the update that last
// checked every part against the change log began, since every part it
// did not render again had no change in its range up to then.
namespace tributary::pub {

class ResourceListFiles {
public:
  struct Options {
    std::filesystem::path dir;   // this process's own folder for the files
    // A part is cut here when (re)partitioned, and split again past twice
    // this: a change costs one part of at most that many entries, and a
    // client reading the list (or a single part of it) gets documents of a
    // few MB, never the 30 MB of 50,000 entries in one.
    uint64_t part_entries = 10000;
    rs::PartitionLimits limits;  // never more than this in one part
    int gzip_level = 1;          // the .gz copies (level 1: a million entries in seconds)
    size_t change_page = 10000;  // change-log keys read at a time on an update
  };
  ResourceListFiles(UrlScheme urls, PublishedSet set, Options options);
  ~ResourceListFiles(); // removes its files
  ResourceListFiles(const ResourceListFiles&) = delete;
  ResourceListFiles& operator=(const ResourceListFiles&) = delete;

  struct Outcome {
    bool full = false;           // every part rendered anew
    size_t parts_rendered = 0;
    uint64_t entries_rendered = 0;
  };
  // Brings the list to the change log's `seq`, which was read at `at` or
  // later: the parts the change log names since the last update are
  // rendered again (all of them the first time). On failure the previous
  // parts stay as they were.
  Result<Outcome> update(store::StoreReader& reader, int64_t seq, rs::Timestamp at);

  // URL path -> document: resourcelist.xml (the index, or the only part),
  // then each part when there are several.
  std::vector<std::pair<std::string, std::shared_ptr<const CachedDocument>>> documents() const;
  const PublishedSet& set() const { return m_set; }
  int64_t seq() const { return m_seq; } // -1 before the first update
  uint64_t entries() const;
  size_t parts() const { return m_parts.size(); }

  // Where a part's entries start: after this (feed index in the set, URI);
  // the first part starts at {0, ""}, before everything.
  struct Key {
    size_t feed = 0;
    std::string uri;
    bool operator<(const Key& o) const { return feed != o.feed ? feed < o.feed : uri < o.uri; }
    bool operator==(const Key&) const = default;
  };

private:
  struct Part {
    uint64_t id = 0;             // its URL: resourcelist-<id>.xml
    Key after;
    uint64_t entries = 0;
    rs::Timestamp at{};
    rs::Timestamp completed{};
    bool indexed = false;        // links to an index (there were several parts)
    std::shared_ptr<const CachedDocument> doc;
  };
  struct Rendered;
  // Entries a piece of a range holds, for a range of about `estimate`
  // entries (0: a whole list).
  uint64_t entries_per_piece(uint64_t estimate) const;
  // A rendered piece as the document of `part`: header, body, footer, and
  // its gzip copy, in files; null when they cannot be written.
  std::shared_ptr<CachedDocument> write_part(const Rendered& piece, const Part& part);

  Result<Outcome> render_all(store::StoreReader& reader, rs::Timestamp at);
  // Renders [after of part i, after of part i+1) again, as one part or,
  // past the limits, several; `estimate` is how many entries it may hold.
  Result<std::vector<Part>> render_range(store::StoreReader& reader, const Key& after, const Key* until,
                                         uint64_t estimate, uint64_t first_id, bool others, uint64_t& entries);
  size_t part_of(const Key& k) const;
  void render_index(rs::Timestamp at);
  void retire(const std::shared_ptr<const CachedDocument>& doc);
  void remove_retired(bool all);

  UrlScheme m_urls;
  PublishedSet m_set;
  Options m_options;
  std::vector<Part> m_parts;
  std::shared_ptr<const CachedDocument> m_index; // when several parts
  int64_t m_seq = -1;
  uint64_t m_next_id = 1;
  uint64_t m_generation = 0;
  // Files of replaced parts, removed a while later (a request may have
  // picked the document up but not opened the file yet).
  std::vector<std::pair<std::chrono::steady_clock::time_point, std::shared_ptr<const CachedDocument>>> m_retired;
};

} // namespace tributary::pub

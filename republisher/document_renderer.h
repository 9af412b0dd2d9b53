#pragma once

// Room republisher/document_renderer: every document but the Resource
// Lists (the Source Description, Capability Lists, Change Lists, the dumps'
// documents, robots.txt), rendered from the store on a thread of its own
// when the store moved on, and put on the shelf whole with the sets it
// publishes and their closed Change List parts; what retention may
// compact. Closed parts are rendered once and kept (in files under
// document_dir). Owns its thread, its pace and what it rendered.

#include "republisher/change_lists.h"
#include "republisher/content_server.h"
#include "republisher/server.h"
#include "republisher/shelf.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace tributary::pub {

class DocumentRenderer {
public:
  // `options`, `urls`, `shelf` and `content` must outlive this (the
  // republisher owns them all). `wake_lister` is called when a set waits
  // for its first Resource List.
  DocumentRenderer(const PublishOptions& options, std::shared_ptr<store::StoreReader> reader, const UrlScheme& urls,
                   Shelf& shelf, ContentServer& content, std::function<void()> wake_lister);
  ~DocumentRenderer(); // stops
  DocumentRenderer(const DocumentRenderer&) = delete;
  DocumentRenderer& operator=(const DocumentRenderer&) = delete;

  // Renders every document when the store moved on since the last time
  // (`force`: whether or not it did). Only the sets over feeds that moved
  // are rendered again. Call it from one thread at a time (start() runs it
  // on the renderer's own after that).
  Result<void> refresh(bool force);

  // Refreshes on a thread of its own: at the poll interval, or sooner when
  // asked, and never spending more than a fifth of its processor time
  // rendering. What was asked before start() is taken as done.
  void start();
  // Render again soon: if the store moved on, or (`force`) every set.
  void request(bool force);
  void stop();

  // What retention may compact: for each set, its closed Change List parts
  // that ended before `cutoff` (all of them up to the newest such), from
  // what was last published.
  Republisher::Compactable compactable(rs::Timestamp cutoff) const;

private:
  void run();
  // One set's documents into `docs`: its Capability List, dumps' documents
  // and Change Lists.
  Result<void> render_set(const PublishedSet& s, const store::Compaction* compaction, DocumentMap& docs);
  // Its Change List (or index and parts): closed parts rendered once and
  // kept, the open one every time.
  Result<void> render_change_lists(const PublishedSet& s, const store::Compaction* compaction, DocumentMap& docs);
  // The feeds whose changes moved since the last refresh; nullopt: every
  // set is rendered (forced, the first, or retention compacted).
  Result<std::optional<std::set<int64_t>>> moved_feeds(bool force, int64_t seq,
      const std::vector<store::Compaction>& compactions);
  // Tells the hub what the Change Lists now show (not a failed set's).
  void announce(const std::vector<PublishedSet>& sets, const std::set<std::string>& failed, int64_t seq);
  // A conflict when retention compacted since `compactions` were read (the
  // refresh starts over; the closed parts of every set compacted are
  // forgotten).
  Result<void> not_compacted_since(const std::vector<store::Compaction>& compactions);
  // A document rendered now, under `url`'s path.
  void put_xml(DocumentMap& docs, const std::string& url, std::string body);
  // Forgets the closed parts of `set` that retention compacted (their files
  // go; another process serving them from the same folder finds them gone
  // once it learns of the compaction too, by the change notification).
  void drop_compacted(const std::string& set, const ClosedParts& known);

  const PublishOptions& m_options;
  std::shared_ptr<store::StoreReader> m_reader;
  const UrlScheme& m_urls;
  Shelf& m_shelf;
  ContentServer& m_content;
  std::function<void()> m_wake_lister;

  std::thread m_thread;
  std::mutex m_mutex;            // guards the three flags below
  std::condition_variable m_cv;
  bool m_stopping = false;
  bool m_requested = false;
  bool m_force = false;

  // The refreshes' own (one thread at a time):
  int64_t m_rendered_seq = -1;
  std::vector<store::Compaction> m_rendered_compactions;
  // Closed Change List parts per set as last rendered (published with the
  // documents; a compaction met mid-refresh forgets the sets it compacted),
  // and their documents by URL path.
  std::map<std::string, std::shared_ptr<const ClosedParts>> m_closed;
  std::map<std::string, std::shared_ptr<const CachedDocument>> m_closed_docs;
  // Each set's open Change List part, grown from one refresh to the next.
  std::map<std::string, OpenPart> m_open;
  std::string m_last_error;
  // Time the last refresh spent on Change List parts that closed: rendered
  // once, never again, so the pace leaves it out (a baseline of a million
  // closes a hundred parts at once).
  std::chrono::steady_clock::duration m_closing_time{};
  std::string m_set_failures;         // sets whose last rendering failed, as logged
  std::set<std::string> m_failed_sets; // their names: rendered again at every refresh
};

} // namespace tributary::pub

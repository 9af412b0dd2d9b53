#pragma once

// Room republisher/list_keeper: each set's Resource List, kept up to date in
// files by a thread of its own, so that bringing a list of a million up to
// date never delays the Change Lists. Reads the sets from what the document
// renderer published; puts the lists on the shelf; hands each list it
// publishes to the archive keeper (snapshots). Owns its thread, its files
// and the lists' state.

#include "republisher/archive_keeper.h"
#include "republisher/resource_list_files.h"
#include "republisher/server.h"
#include "republisher/shelf.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace tributary::pub {

class ListKeeper {
public:
  // `options`, `urls`, `shelf` and `archive` must outlive this (the
  // republisher owns them all). `first_list` is called when a set has its
  // first Resource List (the renderer shows the set from then on).
  ListKeeper(const PublishOptions& options, std::shared_ptr<store::StoreReader> lookups, const UrlScheme& urls,
             Shelf& shelf, ArchiveKeeper& archive, std::function<void()> first_list);
  ~ListKeeper(); // stops; the lists' files go
  ListKeeper(const ListKeeper&) = delete;
  ListKeeper& operator=(const ListKeeper&) = delete;

  // One pass: each set's Resource List that is due is brought to the
  // change log's seq (only the parts with changes are rendered again,
  // streamed into files) and published as it is done. A list is due when
  // its set is new, or when the store moved on and either went quiet (seq
  // unchanged since the previous pass, a second ago: the last changes are
  // shown within a pass of the store stopping) or four times what the last
  // update took has passed, and the configured interval. Call it from one
  // thread at a time (start() runs it on the keeper's own after that).
  struct Pass {
    bool settled = false;  // the store did not move, and every list shows it
    bool rendered = false; // some list was brought up to date
  };
  Pass pass();

  // Runs passes on a thread of its own: every second while the store
  // moves or a list is behind; once all is shown, at the poll interval or
  // when woken.
  void start();
  // Looks at the store now.
  void wake();
  void stop();

private:
  Result<void> update_list(const PublishedSet& s, int64_t seq, rs::Timestamp at);
  // Serves `docs` as the Resource List of `set` from now on, in place of
  // what was served for it (none: the set is no longer published). True
  // when the set had none.
  bool publish_list(const std::string& set,
      std::vector<std::pair<std::string, std::shared_ptr<const CachedDocument>>> docs);

  const PublishOptions& m_options;
  std::shared_ptr<store::StoreReader> m_lookups;
  const UrlScheme& m_urls;
  Shelf& m_shelf;
  ArchiveKeeper& m_archive;
  std::function<void()> m_first_list;

  std::thread m_thread;
  std::mutex m_mutex;            // guards the two flags below
  std::condition_variable m_cv;
  bool m_stopping = false;
  bool m_woken = false;

  // The passes' own (one thread at a time):
  struct ListState {
    std::unique_ptr<ResourceListFiles> files;
    std::chrono::steady_clock::time_point at;   // when it was last updated
    std::chrono::steady_clock::duration took{}; // what that took
  };
  std::map<std::string, ListState> m_lists;
  std::map<std::string, std::vector<std::pair<std::string, std::shared_ptr<const CachedDocument>>>> m_published;
  std::filesystem::path m_root; // this process's own folder for the lists' files
  int64_t m_last_seq = -1;      // the seq the previous pass saw
  std::string m_failures;       // as last logged
};

} // namespace tributary::pub

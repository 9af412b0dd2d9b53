#include "republisher/list_keeper.h"

#include "common/stop_and_join.h"

#include "common/log.h"
#include "common/thread_name.h"

#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <set>

namespace tributary::pub {

namespace {

// This process's own folder for Resource List files, under `document_dir`
// (several processes may serve one data_dir): lists-<host>-<pid>. Folders
// left by processes of this host that are gone are removed.
std::filesystem::path lists_folder(const std::filesystem::path& document_dir) {
  const std::filesystem::path base =
      document_dir.empty() ? std::filesystem::temp_directory_path() / "tributary-documents" : document_dir;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string mine = std::string("lists-") + host + "-";
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(base, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(mine, 0) != 0) {
      continue;
    }
    const long pid = std::strtol(name.c_str() + mine.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      std::error_code rm;
      std::filesystem::remove_all(it->path(), rm);
    }
  }
  const std::filesystem::path dir = base / (mine + std::to_string(::getpid()));
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  return dir;
}

} // namespace

ListKeeper::ListKeeper(const PublishOptions& options, std::shared_ptr<store::StoreReader> lookups,
                       const UrlScheme& urls, Shelf& shelf, ArchiveKeeper& archive, std::function<void()> first_list)
    : m_options(options), m_lookups(std::move(lookups)), m_urls(urls), m_shelf(shelf), m_archive(archive),
      m_first_list(std::move(first_list)), m_root(lists_folder(m_options.document_dir)) {}

ListKeeper::~ListKeeper() {
  stop();
  m_lists.clear(); // each removes its files
  std::error_code ec;
  std::filesystem::remove_all(m_root, ec);
}

void ListKeeper::start() {
  m_thread = std::thread([this] {
    name_thread("list keeper");
    std::unique_lock lock(m_mutex);
    while (!m_stopping) {
      // Cleared before the pass, not after: a wake (refresh_soon) that
      // comes while the pass runs is for changes it may not have seen, and
      // must start the next pass now rather than at the poll interval.
      m_woken = false;
      lock.unlock();
      const auto done = pass();
      if (done.rendered) {
        malloc_trim(0); // hand back what rendering freed, not every idle second
      }
      lock.lock();
      // Every second while the store moves or a list is behind (the pass
      // after the store went quiet brings the lists up to date); once all
      // is shown, at the poll interval or when woken (refresh_soon).
      m_cv.wait_for(lock, done.settled ? m_options.poll_interval : std::chrono::milliseconds(1000),
                    [this] { return m_stopping || m_woken; });
    }
  });
}

void ListKeeper::wake() {
  {
    std::lock_guard lock(m_mutex);
    m_woken = true;
  }
  m_cv.notify_all();
}

void ListKeeper::stop() {
  stop_and_join(m_mutex, m_stopping, m_cv, m_thread);
}

auto ListKeeper::pass() -> Pass {
  // Read before the seq: a list brought to that seq shows the store as it
  // was at this time at the latest.
  const rs::Timestamp at = now();
  auto seq = m_lookups->last_seq();
  std::vector<PublishedSet> sets; // as the renderer last published them
  // The view is held while it is read: the renderer may put a new one
  // meanwhile, and the shelf then drops this one.
  const auto rendered = m_shelf.rendered();
  for (const auto& [name, feeds] : *rendered->set_feeds) {
    sets.push_back(PublishedSet{name, feeds});
  }
  std::vector<std::string> failures;
  Pass pass;
  if (!seq) {
    failures.push_back(seq.error().message);
  } else {
    const bool quiet = *seq == m_last_seq;
    pass.settled = quiet;
    m_last_seq = *seq;
    std::set<std::string> names;
    for (const auto& s : sets) {
      names.insert(s.name);
      ListState& list = m_lists[s.name];
      const bool fresh = !list.files || list.files->set().feeds != s.feeds;
      const bool due =
          fresh || (list.files->seq() != *seq &&
                    (quiet || std::chrono::steady_clock::now() - list.at >=
                                  std::max<std::chrono::steady_clock::duration>(
                                      4 * list.took, m_options.resource_list_min_interval)));
      if (!due) {
        continue;
      }
      if (auto r = update_list(s, *seq, at); !r) {
        failures.push_back("set '" + s.name + "': " + r.error().message); // the previous list stays published
        pass.settled = false;
        continue;
      }
      pass.rendered = true;
      m_archive.snapshot_if_due(s.name, list.files->documents(), at);
      const bool first = publish_list(s.name, list.files->documents());
      notify_framework(m_options.hub, s.name, m_urls.resource_list(s.name), "resourcelist",
                       first ? "created" : "updated");
      if (first && m_first_list) {
        m_first_list();
      }
    }
    for (auto it = m_lists.begin(); it != m_lists.end();) {
      if (names.count(it->first)) {
        ++it;
        continue;
      }
      publish_list(it->first, {}); // a set no longer published
      it = m_lists.erase(it);
    }
  }
  log::failures_once(failures, m_failures, "Resource Lists not brought up to date (the previous ones are served): ",
                     "every Resource List is up to date again");
  return pass;
}

auto ListKeeper::update_list(const PublishedSet& s, int64_t seq, rs::Timestamp at) -> Result<void> {
  const auto start = std::chrono::steady_clock::now();
  ListState& list = m_lists[s.name];
  if (!list.files || list.files->set().feeds != s.feeds) {
    ResourceListFiles::Options o;
    o.dir = m_root / s.name;
    list.files = std::make_unique<ResourceListFiles>(m_urls, s, o);
  }
  auto r = list.files->update(*m_lookups, seq, at);
  if (!r) {
    return tl::unexpected(r.error());
  }
  list.at = start;
  list.took = std::chrono::steady_clock::now() - start;
  log::debug("", "Resource List of set '" + s.name + "' brought to change " + std::to_string(seq) + " in " +
                     std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(list.took).count()) +
                     " ms (" + std::to_string(r->parts_rendered) + " parts, " + std::to_string(r->entries_rendered) +
                     " entries rendered" + (r->full ? ", all of it" : "") + "; " +
                     std::to_string(list.files->parts()) + " parts)");
  return {};
}

auto ListKeeper::publish_list(const std::string& set,
    std::vector<std::pair<std::string, std::shared_ptr<const CachedDocument>>> docs) -> bool {
  const bool first = !m_published.count(set) && !docs.empty();
  if (docs.empty()) {
    m_published.erase(set);
  } else {
    m_published[set] = std::move(docs);
  }
  auto view = std::make_shared<ListsView>();
  for (const auto& [name, documents] : m_published) {
    view->sets.insert(name);
    for (const auto& [path, doc] : documents) {
      view->documents.emplace(path, ListsView::Listed{name, doc});
    }
  }
  m_shelf.put(std::shared_ptr<const ListsView>(std::move(view)));
  return first;
}

} // namespace tributary::pub

#include "republisher/server_impl.h"

namespace tributary::pub {

using namespace server_detail;

Republisher::Impl::~Impl() {
  resource_lists.clear(); // each removes its files
  std::error_code ec;
  std::filesystem::remove_all(list_root, ec);
}

namespace {

// Whether a kind's handler waits on the disk or the database whatever it
// finds: sent to a worker before anything else is done for it. (Documents
// and resources decide for themselves: most are answered from memory.)
// An archive or a document it names: read from the database.
bool is_archive(RouteKind kind) {
  switch (kind) {
  case RouteKind::change_list_archive:
  case RouteKind::resource_list_archive:
  case RouteKind::change_dump_archive:
  case RouteKind::archived_change_dump:
  case RouteKind::archived_resource_list:
  case RouteKind::archived_resource_list_part:
    return true;
  default:
    return false;
  }
}

// A dump package or manifest: a file opened, or a blob the database names.
bool is_dump_file(RouteKind kind) {
  return kind == RouteKind::resource_dump_package || kind == RouteKind::change_dump_package ||
         kind == RouteKind::change_dump_manifest;
}

bool needs_worker(RouteKind kind) { return is_archive(kind) || is_dump_file(kind); }

http::Disposition not_found(http::Response& res) {
  res.status = 404;
  return http::Disposition::done;
}

// What a handler that may find nothing answered, or 404.
http::Disposition or_not_found(std::optional<http::Disposition> d, http::Response& res) {
  return d ? *d : not_found(res);
}

} // namespace

auto Republisher::Impl::handle(const http::Request& req, http::Response& res, bool can_block) -> http::Disposition {
  const Route route = urls.route(req.path);
  // The hub and its topics (subscription requests are queued: nothing
  // here waits).
  if ((route.kind == RouteKind::hub || route.kind == RouteKind::change_notification ||
       route.kind == RouteKind::framework_notification) &&
      options.hub && options.hub->handle(req, res)) {
    return http::Disposition::done;
  }
  if (req.method != "GET" && req.method != "HEAD") {
    res.status = 405;
    res.set_header("Allow", "GET, HEAD");
    return http::Disposition::done;
  }
  if (route.kind == RouteKind::malformed) {
    res.status = 400;
    return http::Disposition::done;
  }
  if (!can_block && needs_worker(route.kind)) {
    return http::Disposition::blocking;
  }
  const http::Disposition d = serve_route(req, res, route, can_block);
  if (d == http::Disposition::done && res.status == 404 && !route.set.empty() && removed_set(route.set)) {
    // The source was removed from this aggregator: a follower is told it
    // is gone for good, not that it is missing for now.
    res.status = 410;
    res.set_body("This source was removed from the aggregator; its documents are gone.\n",
                 "text/plain; charset=utf-8");
  }
  return d;
}

auto Republisher::Impl::serve_route(const http::Request& req, http::Response& res, const Route& route,
    bool can_block) -> http::Disposition {
  if (is_archive(route.kind)) {
    return or_not_found(serve_archive(req, res, route, can_block), res);
  }
  switch (route.kind) {
  case RouteKind::resource:
    return content.serve(req, res, route.set, route.part, can_block);
  case RouteKind::source_description:
  case RouteKind::robots:
  case RouteKind::capability_list:
  case RouteKind::resource_list:
  case RouteKind::resource_list_part:
  case RouteKind::change_list:
  case RouteKind::change_list_index:
    return or_not_found(serve_rendered(req, res, route.path, can_block), res);
  case RouteKind::change_list_part:
    // Live, or archived once retention compacted it: the same URL.
    if (auto d = serve_rendered(req, res, route.path, can_block)) {
      return *d;
    }
    return or_not_found(serve_archive(req, res, route, can_block), res);
  case RouteKind::resource_dump:
  case RouteKind::change_dump:
    if (auto d = serve_rendered(req, res, route.path, can_block)) {
      return *d;
    }
    if (options.shared_dumps) {
      return or_not_found(serve_shared_dump_document(res, route, can_block), res);
    }
    return not_found(res);
  case RouteKind::change_dump_package:
  case RouteKind::change_dump_manifest:
    // A compacted part's package is archived, at the same URL.
    if (auto d = serve_archive(req, res, route, can_block)) {
      return *d;
    }
    return serve_dump_file(res, route, can_block);
  case RouteKind::resource_dump_package:
    return serve_dump_file(res, route, can_block);
  default: // the archives (above), the hub's kinds (answered by the hub), not ours
    break;
  }
  return not_found(res);
}

auto Republisher::Impl::serve_rendered(const http::Request& req, http::Response& res, const std::string& path,
    bool can_block) -> std::optional<http::Disposition> {
  std::shared_ptr<const DocumentMap> docs;
  {
    std::shared_lock lock(cache_mutex);
    docs = documents;
  }
  if (auto it = docs->find(path); it != docs->end()) {
    return serve_document(req, res, it->second, can_block);
  }
  return std::nullopt;
}

auto Republisher::Impl::serve_dump_file(http::Response& res, const Route& route, bool can_block) -> http::Disposition {
  std::shared_ptr<const std::map<std::string, std::filesystem::path>> files;
  {
    std::shared_lock lock(cache_mutex);
    files = dump_files;
  }
  if (auto it = files->find(route.path); it != files->end()) {
    if (!can_block) {
      return http::Disposition::blocking; // opening a file may wait on the disk
    }
    const int fd = ::open(it->second.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      return not_found(res); // replaced by a newer generation meanwhile
    }
    struct stat st{};
    ::fstat(fd, &st);
    return serve_file_bytes(res, fd, static_cast<size_t>(st.st_size), 0, it->second.extension() == ".xml");
  }
  if (options.shared_dumps) {
    return serve_shared_file(res, route.path, can_block);
  }
  return not_found(res);
}

bool Republisher::Impl::removed_set(const std::string& set) {
  std::shared_ptr<const std::set<std::string>> removed;
  {
    std::shared_lock lock(cache_mutex);
    removed = removed_sources;
  }
  if (removed->count(set)) {
    return true;
  }
  // A source's second and later sets: NAME-2, NAME-3, …
  const size_t dash = set.rfind('-');
  return dash != std::string::npos && dash + 1 < set.size() &&
         set.find_first_not_of("0123456789", dash + 1) == std::string::npos && removed->count(set.substr(0, dash));
}

Republisher::Republisher(std::shared_ptr<store::StoreReader> reader, std::shared_ptr<store::BlobStore> blobs,
                         PublishOptions options, std::shared_ptr<store::StoreReader> lookups)
    : m_impl(std::make_unique<Impl>(std::move(reader), std::move(blobs), std::move(options), std::move(lookups))) {}

Republisher::~Republisher() { stop(); }

Result<void> Republisher::start() {
  Impl& m = *m_impl;
  if (auto r = m.refresh(true); !r) {
    return r;
  }
  m.lists_pass(); // every set has its Resource List before the first request
  if (auto r = m.refresh(true); !r) { // and is shown with it
    return r;
  }
  {
    std::lock_guard lock(m.stop_mutex); // what the first pass asked for is done
    m.sets_listed = false;
    m.refresh_requested = false;
  }
  m.lister = std::thread([&m] {
    std::unique_lock lock(m.stop_mutex);
    while (!m.stopping) {
      // Cleared before the pass, not after: a wake (refresh_soon) that
      // comes while the pass runs is for changes it may not have seen, and
      // must start the next pass now rather than at the poll interval.
      m.lists_wake = false;
      lock.unlock();
      const auto pass = m.lists_pass();
      if (pass.rendered) {
        malloc_trim(0); // hand back what rendering freed, not every idle second
      }
      lock.lock();
      // Every second while the store moves or a list is behind (the pass
      // after the store went quiet brings the lists up to date); once all
      // is shown, at the poll interval or when woken (refresh_soon).
      m.stop_cv.wait_for(lock, pass.settled ? m.options.poll_interval : std::chrono::milliseconds(1000),
                         [&m] { return m.stopping || m.lists_wake; });
    }
  });
  m.refresher = std::thread([&m] {
    std::unique_lock lock(m.stop_mutex);
    // Re-render at most every second, and never spend more than a fifth of
    // the time rendering: a store of millions that changes all the time would
    // otherwise keep a core busy re-rendering its lists.
    auto pause = std::chrono::milliseconds(1000);
    auto busy = std::chrono::milliseconds(0);           // what the last refresh took
    auto last_end = std::chrono::steady_clock::now();
    for (;;) {
      m.stop_cv.wait_for(lock, pause, [&m] { return m.stopping || m.refresh_requested; });
      // A request (refresh_soon) comes early, but within the same budget.
      if (!m.stopping && m.refresh_requested) {
        m.stop_cv.wait_until(lock, last_end + 4 * busy, [&m] { return m.stopping; });
      }
      if (m.stopping) {
        break;
      }
      m.refresh_requested = false;
      const bool force = m.dumps_changed || m.sets_listed;
      m.dumps_changed = false;
      m.sets_listed = false;
      lock.unlock();
      const auto started = std::chrono::steady_clock::now();
      const auto cpu_started = thread_cpu_time();
      // A failed refresh keeps serving the last documents; say so once per
      // distinct reason, not every second.
      auto r = m.refresh(force);
      const auto cpu = thread_cpu_time() - cpu_started;
      const std::string reason = r ? std::string() : r.error().message;
      if (!reason.empty() && reason != m.last_refresh_error) {
        log::warn("", "documents not refreshed (still serving the last ones): " + reason);
      }
      m.last_refresh_error = reason;
      last_end = std::chrono::steady_clock::now();
      busy = std::chrono::duration_cast<std::chrono::milliseconds>(last_end - started);
      if (busy > std::chrono::milliseconds(200)) {
        log::debug("", "documents refreshed in " + std::to_string(busy.count()) + " ms");
      }
      // The budget is this thread's processor time, not the wall clock: a
      // refresh that waited for the database, or for a core the lister and
      // a sync run were using, spent nothing of it (paced on wall time, a
      // refresh slowed to 0.6 s by a busy machine held the next change
      // back 2.4 s).
      busy = std::max(std::chrono::milliseconds(0),
                      std::chrono::duration_cast<std::chrono::milliseconds>(cpu) -
                          std::chrono::duration_cast<std::chrono::milliseconds>(m.closing_time));
      pause = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(m.options.poll_interval), 4 * busy);
      // Rendering allocates and frees the whole document set: hand the
      // freed memory back rather than keep the peak resident.
      malloc_trim(0);
      lock.lock();
    }
  });
  if (!m.options.dump_dir.empty() && m.options.resource_dump_interval.count() > 0) {
    m.dumper = std::thread([&m] {
      std::unique_lock lock(m.stop_mutex);
      do {
        lock.unlock();
        m.build_due_dumps();
        lock.lock();
      } while (!m.stop_cv.wait_for(lock, std::chrono::seconds(2), [&m] { return m.stopping; }));
    });
  }
  return {};
}

http::Handler Republisher::handler() {
  Impl* m = m_impl.get();
  return [m](const http::Request& req, http::Response& res, bool can_block) { return m->handle(req, res, can_block); };
}

Result<void> Republisher::archive(const std::vector<store::Compaction>& plan) { return m_impl->archive_parts(plan); }

Republisher::Compactable Republisher::compactable(rs::Timestamp cutoff) {
  return m_impl->compactable(cutoff);
}

void Republisher::sources_changed() {
  {
    std::lock_guard lock(m_impl->stop_mutex);
    m_impl->sets_listed = true; // every set rendered again: the Source Description lists one less
    m_impl->refresh_requested = true;
    m_impl->lists_wake = true;
  }
  m_impl->stop_cv.notify_all();
}

void Republisher::refresh_soon() {
  {
    std::lock_guard lock(m_impl->stop_mutex);
    m_impl->refresh_requested = true;
    m_impl->lists_wake = true;
  }
  m_impl->stop_cv.notify_all();
}

void Republisher::stop() {
  Impl& m = *m_impl;
  {
    std::lock_guard lock(m.stop_mutex);
    if (m.stopping) {
      return;
    }
    m.stopping = true;
  }
  m.stop_cv.notify_all();
  if (m.refresher.joinable()) {
    m.refresher.join();
  }
  if (m.lister.joinable()) {
    m.lister.join();
  }
  if (m.dumper.joinable()) {
    m.dumper.join();
  }
}

} // namespace tributary::pub

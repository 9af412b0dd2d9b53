#include "republisher/document_renderer.h"

#include "common/stop_and_join.h"

#include "common/log.h"
#include "common/thread_name.h"

#include <malloc.h>
#include <time.h>

#include <algorithm>
#include <cstdio>

namespace tributary::pub {

namespace {

// Processor time this thread has used.
std::chrono::nanoseconds thread_cpu_time() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

} // namespace

DocumentRenderer::DocumentRenderer(const PublishOptions& options, std::shared_ptr<store::StoreReader> reader,
                                   const UrlScheme& urls, Shelf& shelf, ContentServer& content,
                                   std::function<void()> wake_lister)
    : m_options(options), m_reader(std::move(reader)), m_urls(urls), m_shelf(shelf), m_content(content),
      m_wake_lister(std::move(wake_lister)) {
  if (!m_options.document_dir.empty()) {
    remove_transient(m_options.document_dir);
  }
}

DocumentRenderer::~DocumentRenderer() { stop(); }

void DocumentRenderer::request(bool force) {
  {
    std::lock_guard lock(m_mutex);
    m_requested = true;
    m_force = m_force || force;
  }
  m_cv.notify_all();
}

void DocumentRenderer::stop() {
  stop_and_join(m_mutex, m_stopping, m_cv, m_thread);
}

void DocumentRenderer::start() {
  {
    std::lock_guard lock(m_mutex); // what was asked before is done
    m_requested = false;
    m_force = false;
  }
  m_thread = std::thread([this] {
    name_thread("renderer");
    run();
  });
}

void DocumentRenderer::run() {
  std::unique_lock lock(m_mutex);
  // Re-render at most every second, and never spend more than a fifth of
  // the time rendering: a store of millions that changes all the time would
  // otherwise keep a core busy re-rendering its lists.
  auto pause = std::chrono::milliseconds(1000);
  auto busy = std::chrono::milliseconds(0); // what the last refresh took
  auto last_end = std::chrono::steady_clock::now();
  for (;;) {
    m_cv.wait_for(lock, pause, [this] { return m_stopping || m_requested; });
    // A request (refresh_soon) comes early, but within the same budget.
    if (!m_stopping && m_requested) {
      m_cv.wait_until(lock, last_end + 4 * busy, [this] { return m_stopping; });
    }
    if (m_stopping) {
      break;
    }
    m_requested = false;
    const bool force = m_force;
    m_force = false;
    lock.unlock();
    const auto started = std::chrono::steady_clock::now();
    const auto cpu_started = thread_cpu_time();
    // A failed refresh keeps serving the last documents; say so once per
    // distinct reason, not every second.
    auto r = refresh(force);
    const auto cpu = thread_cpu_time() - cpu_started;
    const std::string reason = r ? std::string() : r.error().message;
    if (!reason.empty() && reason != m_last_error) {
      log::warn("", "documents not refreshed (still serving the last ones): " + reason);
    }
    m_last_error = reason;
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
                        std::chrono::duration_cast<std::chrono::milliseconds>(m_closing_time));
    pause = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(m_options.poll_interval), 4 * busy);
    // Rendering allocates and frees the whole document set: hand the
    // freed memory back rather than keep the peak resident.
    malloc_trim(0);
    lock.lock();
  }
}

auto DocumentRenderer::refresh(bool force) -> Result<void> {
  m_closing_time = {};
  auto seq = m_reader->last_seq();
  if (!seq) {
    return tl::unexpected(seq.error());
  }
  // Retention may compact the change log without moving its last seq.
  auto compactions = m_reader->compactions();
  if (!compactions) {
    return tl::unexpected(compactions.error());
  }
  if (!force && *seq == m_rendered_seq && *compactions == m_rendered_compactions) {
    return {};
  }
  auto moved = moved_feeds(force, *seq, *compactions);
  if (!moved) {
    return tl::unexpected(moved.error());
  }
  const auto before_view = m_shelf.rendered();
  const DocumentMap* before = &before_view->documents;
  std::map<std::string, const store::Compaction*> compaction_of;
  for (const auto& c : *compactions) {
    compaction_of[c.set_name] = &c;
  }
  auto feeds = m_reader->feeds();
  if (!feeds) {
    return tl::unexpected(feeds.error());
  }
  if (auto removed = m_reader->removed_sources()) {
    m_shelf.put_removed_sources(std::set<std::string>(removed->begin(), removed->end()));
  }
  // A set is shown whole or not at all: one whose Resource List the
  // lister has not published yet (a source's first changes, a new named
  // set) waits for it, so that no client reads a Capability List naming
  // a Resource List that answers 404 (the load bench met that).
  const auto all_sets = published_sets(*feeds, m_options.named_sets);
  std::vector<PublishedSet> sets;
  std::map<std::string, std::vector<int64_t>> feeds_of; // every set: the lister's work
  const auto listed = m_shelf.lists();
  for (const auto& s : all_sets) {
    feeds_of[s.name] = s.feeds;
    if (listed->sets.count(s.name)) {
      sets.push_back(s);
    }
  }
  std::vector<std::string> failures;      // sets whose documents were kept from before
  std::set<std::string> failed;
  auto view = std::make_shared<RenderedView>();
  DocumentMap& docs = view->documents;
  put_xml(docs, m_urls.source_description(), render_source_description(m_urls, sets, m_options.oai.enabled));
  std::string robots = "User-agent: *\nAllow: /\n";
  for (const auto& s : sets) {
    const std::string cap_path = m_urls.path_of(m_urls.capability_list(s.name));
    const std::string set_dir = cap_path.substr(0, cap_path.rfind('/') + 1);
    auto keep_previous = [&] {
      for (auto it = before->lower_bound(set_dir); it != before->end() && it->first.rfind(set_dir, 0) == 0; ++it) {
        docs.emplace(it->first, it->second);
      }
    };
    if (*moved && before->count(cap_path) && !m_failed_sets.count(s.name) &&
        std::none_of(s.feeds.begin(), s.feeds.end(), [&](int64_t f) { return (*moved)->count(f) > 0; })) {
      robots += "Sitemap: " + m_urls.resource_list(s.name) + "\n";
      keep_previous();
      continue;
    }
    robots += "Sitemap: " + m_urls.resource_list(s.name) + "\n";
    const auto ci = compaction_of.find(s.name);
    if (auto r = render_set(s, ci == compaction_of.end() ? nullptr : ci->second, docs); !r) {
      // One set's failure (a value its rows cannot be read back with, a
      // query that failed) keeps that set's previous documents; the other
      // sets move on.
      failures.push_back("set '" + s.name + "': " + r.error().message);
      failed.insert(s.name);
      keep_previous();
    }
  }
  if (auto r = not_compacted_since(*compactions); !r) {
    return r;
  }
  docs["/robots.txt"] = cached(robots, "text/plain");
  docs[m_urls.path_of(m_urls.api_catalog())] =
      cached(render_api_catalog(m_urls, m_options.oai.enabled, sets), "application/linkset+json");
  // The content cache forgets first: a resource is never answered from a
  // state older than the documents that name it.
  view->set_feeds = std::make_shared<const SetFeeds>(std::move(feeds_of));
  m_content.store_moved(view->set_feeds);
  view->closed = m_closed;
  view->seq = *seq;
  m_shelf.put(std::shared_ptr<const RenderedView>(std::move(view)));
  m_rendered_compactions = std::move(*compactions);
  m_rendered_seq = *seq;
  announce(sets, failed, *seq);
  m_failed_sets = std::move(failed);
  if (sets.size() < all_sets.size()) {
    m_wake_lister(); // a set waits for its Resource List
  }
  log::failures_once(failures, m_set_failures,
                     "documents of some sets could not be rendered (their previous ones are served): ",
                     "every set's documents are rendered again");
  return {};
}

auto DocumentRenderer::moved_feeds(bool force, int64_t seq, const std::vector<store::Compaction>& compactions)
    -> Result<std::optional<std::set<int64_t>>> {
  // Only the sets over feeds that changed are rendered again (200 sets
  // of which one changed cost one set's rendering, not 200); the others
  // keep their documents. All of them on a forced refresh, the first, or
  // when retention compacted.
  if (force || m_rendered_seq < 0 || seq < m_rendered_seq || compactions != m_rendered_compactions) {
    return std::optional<std::set<int64_t>>();
  }
  auto changed = m_reader->changed_feeds(m_rendered_seq, seq);
  if (!changed) {
    return tl::unexpected(changed.error());
  }
  return std::optional<std::set<int64_t>>(std::set<int64_t>(changed->begin(), changed->end()));
}

void DocumentRenderer::announce(const std::vector<PublishedSet>& sets, const std::set<std::string>& failed,
    int64_t seq) {
  if (!m_options.hub) {
    return;
  }
  // Subscribers get what the Change Lists now show (not a failed set's).
  std::vector<PublishedSet> shown;
  for (const auto& s : sets) {
    if (!failed.count(s.name)) {
      shown.push_back(s);
    }
  }
  m_options.hub->published(shown, seq);
}

auto DocumentRenderer::not_compacted_since(const std::vector<store::Compaction>& compactions) -> Result<void> {
  // Retention compacted while the Change Lists were read (a page may
  // have gone from under the reading): start over, rather than publish a
  // part that lacks changes; what is served stays as it was.
  auto again = m_reader->compactions();
  if (!again) {
    return tl::unexpected(again.error());
  }
  if (*again != compactions) {
    for (const auto& c : *again) {
      m_closed.erase(c.set_name);
    }
    return make_error(ErrorKind::conflict, "the change log was compacted while the Change Lists were read");
  }
  return {};
}

auto DocumentRenderer::render_set(const PublishedSet& s, const store::Compaction* compaction, DocumentMap& docs)
    -> Result<void> {
  std::optional<std::string> dump_document;
  std::optional<std::string> change_dump_document;
  const auto dumps = m_shelf.dumps();
  if (auto it = dumps->resource_dumps.find(s.name); it != dumps->resource_dumps.end()) {
    dump_document = it->second;
  }
  if (auto it = dumps->change_packages.find(s.name); it != dumps->change_packages.end() && !it->second.empty()) {
    change_dump_document = render_change_dump(m_urls, s, it->second);
  }
  put_xml(docs, m_urls.capability_list(s.name),
      render_capability_list(m_urls, s, dump_document.has_value(), change_dump_document.has_value(),
                             m_options.hub ? m_options.hub->advertised_hub() : std::string(),
                             m_options.archive != nullptr, !m_options.dump_dir.empty()));
  if (dump_document) {
    put_xml(docs, m_urls.resource_dump(s.name), std::move(*dump_document));
  }
  if (change_dump_document) {
    put_xml(docs, m_urls.change_dump(s.name), std::move(*change_dump_document));
  }
  // The Resource List is the list keeper's (list_keeper.h), served from
  // its own view.
  return render_change_lists(s, compaction, docs);
}

auto DocumentRenderer::render_change_lists(const PublishedSet& s, const store::Compaction* compaction,
    DocumentMap& docs) -> Result<void> {
  // Closed parts are rendered (and compressed) once and kept.
  const auto was = m_closed.find(s.name);
  ClosedParts known = was == m_closed.end() ? ClosedParts{} : *was->second;
  const size_t compacted_before = known.compacted;
  OpenPart& open = m_open[s.name];
  const auto cl_start = std::chrono::steady_clock::now();
  // Parts that close go to their files one at a time, as rendered.
  size_t closed_now = 0;
  auto mark = std::chrono::steady_clock::now();
  auto cl = render_change_list(*m_reader, m_urls, s, m_options.change_list_part, &known,
                               [&](rs::WrittenPart&& part) {
                                 const std::string path = m_urls.path_of(part.url);
                                 m_closed_docs[path] =
                                     m_options.document_dir.empty()
                                         ? cached(std::move(part.xml), "application/xml", true)
                                         : cached_on_disk(std::move(part.xml), m_options.document_dir / s.name,
                                                          std::filesystem::path(path).filename().string());
                                 notify_framework(m_options.hub, s.name, part.url, "changelist", "created");
                                 ++closed_now;
                                 const auto t = std::chrono::steady_clock::now();
                                 m_closing_time += t - mark; // this part's reading, rendering and writing
                                 mark = t;
                               },
                               compaction, &open);
  if (!cl) {
    return tl::unexpected(cl.error());
  }
  if (known.compacted > compacted_before) {
    drop_compacted(s.name, known);
  }
  // The open part and the index; the open part's gzip copy and digest came
  // grown with it.
  const std::filesystem::path dir =
      m_options.document_dir.empty() ? std::filesystem::path() : m_options.document_dir / s.name;
  for (auto& part : *cl) {
    docs[m_urls.path_of(part.url)] =
        part.is_index ? cached_transient(std::move(part.xml), dir, "application/xml")
                      : cached_transient(std::move(part.xml), std::move(open.gzipped), open.sha256_hex, dir,
                                         "application/xml");
  }
  for (const auto& part : known.parts) {
    const std::string path = m_urls.path_of(part.url);
    auto it = m_closed_docs.find(path);
    if (it == m_closed_docs.end()) {
      m_closed.erase(s.name); // cannot happen; start over next time rather than serve a gap
      return make_error(ErrorKind::conflict, "closed Change List part " + part.url + " is not cached");
    }
    docs[path] = it->second;
  }
  const auto cl_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - cl_start).count();
  if (cl_ms > 100) {
    log::debug("", "Change List of set '" + s.name + "' rendered in " + std::to_string(cl_ms) + " ms (" +
                       std::to_string(closed_now) + " parts closed)");
  }
  m_closed[s.name] = std::make_shared<const ClosedParts>(std::move(known));
  return {};
}

void DocumentRenderer::put_xml(DocumentMap& docs, const std::string& url, std::string body) {
  docs[m_urls.path_of(url)] = cached(std::move(body), "application/xml");
}

auto DocumentRenderer::drop_compacted(const std::string& set, const ClosedParts& known) -> void {
  const size_t first = known.compacted + 1;
  const std::string part_one = m_urls.path_of(m_urls.change_list_part(set, 1));
  const std::string stem = part_one.substr(0, part_one.rfind('-') + 1);
  for (auto it = m_closed_docs.begin(); it != m_closed_docs.end();) {
    size_t n = 0;
    if (it->first.rfind(stem, 0) == 0 && std::sscanf(it->first.c_str() + stem.size(), "%zu.xml", &n) == 1 &&
        n < first) {
      std::error_code ec;
      if (!it->second->file.empty()) {
        std::filesystem::remove(it->second->file, ec);
        std::filesystem::remove(it->second->gz_file, ec);
      }
      it = m_closed_docs.erase(it);
    } else {
      ++it;
    }
  }
}

auto DocumentRenderer::compactable(rs::Timestamp cutoff) const -> Republisher::Compactable {
  const auto view = m_shelf.rendered();
  Republisher::Compactable out;
  out.published = *view->set_feeds;
  for (const auto& [name, closed] : view->closed) {
    const ClosedParts& parts = *closed;
    const ClosedParts::Part* last = nullptr;
    for (const auto& p : parts.parts) {
      if (p.until >= cutoff) {
        break;
      }
      last = &p;
    }
    if (last && out.published.count(name) && out.published[name] == parts.feeds) {
      out.compact.push_back(
          store::Compaction{name, parts.feeds, parts.part_size, last->n, last->last_seq, last->until});
    }
  }
  return out;
}

} // namespace tributary::pub

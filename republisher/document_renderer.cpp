// The document renderer (the refresher thread's job): every document but
// the Resource Lists (the Source Description, Capability Lists, Change
// Lists, the dumps' documents) rendered from the store, and what
// compaction may drop.
#include "republisher/server_impl.h"

namespace tributary::pub {

using namespace server_detail;

auto Republisher::Impl::refresh(bool force) -> Result<void> {
  closing_time = {};
  auto seq = reader->last_seq();
  if (!seq) {
    return tl::unexpected(seq.error());
  }
  // Retention may compact the change log without moving its last seq.
  auto compactions = reader->compactions();
  if (!compactions) {
    return tl::unexpected(compactions.error());
  }
  if (!force && *seq == rendered_seq && *compactions == rendered_compactions) {
    return {};
  }
  auto moved = moved_feeds(force, *seq, *compactions);
  if (!moved) {
    return tl::unexpected(moved.error());
  }
  std::shared_ptr<const DocumentMap> before;
  {
    std::shared_lock lock(cache_mutex);
    before = documents;
  }
  std::map<std::string, const store::Compaction*> compaction_of;
  for (const auto& c : *compactions) {
    compaction_of[c.set_name] = &c;
  }
  auto feeds = reader->feeds();
  if (!feeds) {
    return tl::unexpected(feeds.error());
  }
  if (auto removed = reader->removed_sources()) {
    std::unique_lock lock(cache_mutex);
    removed_sources = std::make_shared<const std::set<std::string>>(removed->begin(), removed->end());
  }
  // A set is shown whole or not at all: one whose Resource List the
  // lister has not published yet (a source's first changes, a new named
  // set) waits for it, so that no client reads a Capability List naming
  // a Resource List that answers 404 (the load bench met that).
  const auto all_sets = published_sets(*feeds, options.named_sets);
  std::vector<PublishedSet> sets;
  std::map<std::string, std::vector<int64_t>> feeds_of; // every set: the lister's work
  {
    std::lock_guard lists(lists_mutex);
    for (const auto& s : all_sets) {
      feeds_of[s.name] = s.feeds;
      if (list_docs.count(s.name)) {
        sets.push_back(s);
      }
    }
  }
  std::vector<std::string> failures;      // sets whose documents were kept from before
  std::set<std::string> failed;
  auto docs = std::make_shared<DocumentMap>();
  put_xml(*docs, urls.source_description(), render_source_description(urls, sets));
  std::string robots = "User-agent: *\nAllow: /\n";
  for (const auto& s : sets) {
    const std::string cap_path = urls.path_of(urls.capability_list(s.name));
    const std::string set_dir = cap_path.substr(0, cap_path.rfind('/') + 1);
    auto keep_previous = [&] {
      for (auto it = before->lower_bound(set_dir); it != before->end() && it->first.rfind(set_dir, 0) == 0; ++it) {
        docs->emplace(it->first, it->second);
      }
    };
    if (*moved && before->count(cap_path) && !failed_sets.count(s.name) &&
        std::none_of(s.feeds.begin(), s.feeds.end(), [&](int64_t f) { return (*moved)->count(f) > 0; })) {
      robots += "Sitemap: " + urls.resource_list(s.name) + "\n";
      keep_previous();
      continue;
    }
    robots += "Sitemap: " + urls.resource_list(s.name) + "\n";
    const auto ci = compaction_of.find(s.name);
    if (auto r = render_set(s, ci == compaction_of.end() ? nullptr : ci->second, *docs); !r) {
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
  (*docs)["/robots.txt"] = cached(robots, "text/plain");
  {
    std::lock_guard lists(lists_mutex);
    for (const auto& s : sets) {
      if (auto it = list_docs.find(s.name); it != list_docs.end()) {
        for (const auto& [path, doc] : it->second) {
          (*docs)[path] = doc;
        }
      }
    }
    // The content cache forgets first: a resource is never answered from
    // a state older than the documents that name it.
    content.store_moved(std::make_shared<const ContentServer::SetFeeds>(feeds_of));
    std::unique_lock lock(cache_mutex);
    documents = docs;
    set_feeds = std::move(feeds_of);
    rendered_compactions = std::move(*compactions);
    rendered_seq = *seq;
  }
  announce(sets, failed, *seq);
  failed_sets = std::move(failed);
  if (sets.size() < all_sets.size()) {
    wake_lister(); // a set waits for its Resource List
  }
  report_failures(failures, set_failures,
                  "documents of some sets could not be rendered (their previous ones are served): ",
                  "every set's documents are rendered again");
  return {};
}

auto Republisher::Impl::moved_feeds(bool force, int64_t seq, const std::vector<store::Compaction>& compactions)
    -> Result<std::optional<std::set<int64_t>>> {
  // Only the sets over feeds that changed are rendered again (200 sets
  // of which one changed cost one set's rendering, not 200); the others
  // keep their documents. All of them on a forced refresh, the first, or
  // when retention compacted.
  if (force || rendered_seq < 0 || seq < rendered_seq || compactions != rendered_compactions) {
    return std::optional<std::set<int64_t>>();
  }
  auto changed = reader->changed_feeds(rendered_seq, seq);
  if (!changed) {
    return tl::unexpected(changed.error());
  }
  return std::optional<std::set<int64_t>>(std::set<int64_t>(changed->begin(), changed->end()));
}

void Republisher::Impl::announce(const std::vector<PublishedSet>& sets, const std::set<std::string>& failed,
    int64_t seq) {
  if (!options.hub) {
    return;
  }
  // Subscribers get what the Change Lists now show (not a failed set's).
  std::vector<PublishedSet> shown;
  for (const auto& s : sets) {
    if (!failed.count(s.name)) {
      shown.push_back(s);
    }
  }
  options.hub->published(shown, seq);
}

auto Republisher::Impl::not_compacted_since(const std::vector<store::Compaction>& compactions) -> Result<void> {
  // Retention compacted while the Change Lists were read (a page may
  // have gone from under the reading): start over, rather than publish a
  // part that lacks changes; what is served stays as it was.
  auto again = reader->compactions();
  if (!again) {
    return tl::unexpected(again.error());
  }
  if (*again != compactions) {
    for (const auto& c : *again) {
      closed_parts.erase(c.set_name);
    }
    return make_error(ErrorKind::conflict, "the change log was compacted while the Change Lists were read");
  }
  return {};
}

void Republisher::Impl::wake_lister() {
  {
    std::lock_guard lock(stop_mutex);
    lists_wake = true;
  }
  stop_cv.notify_all();
}

auto Republisher::Impl::render_set(const PublishedSet& s, const store::Compaction* compaction, DocumentMap& docs)
    -> Result<void> {
  std::optional<std::string> dump_document;
  std::optional<std::string> change_dump_document;
  {
    std::shared_lock lock(cache_mutex);
    if (auto it = dumps.find(s.name); it != dumps.end()) {
      dump_document = it->second.built.document;
    }
    if (auto it = change_packages.find(s.name); it != change_packages.end() && !it->second.empty()) {
      change_dump_document = render_change_dump(urls, s, it->second);
    }
  }
  put_xml(docs, urls.capability_list(s.name),
      render_capability_list(urls, s, dump_document.has_value(), change_dump_document.has_value(),
                             options.hub ? options.hub->advertised_hub() : std::string(),
                             options.archive != nullptr, !options.dump_dir.empty()));
  if (dump_document) {
    put_xml(docs, urls.resource_dump(s.name), std::move(*dump_document));
  }
  if (change_dump_document) {
    put_xml(docs, urls.change_dump(s.name), std::move(*change_dump_document));
  }
  // The Resource List is the lister's (see lists_pass): added at
  // publication.
  return render_change_lists(s, compaction, docs);
}

auto Republisher::Impl::render_change_lists(const PublishedSet& s, const store::Compaction* compaction,
    DocumentMap& docs) -> Result<void> {
  // Closed parts are rendered (and compressed) once and kept.
  ClosedParts known = closed_parts[s.name];
  const auto cl_start = std::chrono::steady_clock::now();
  // Parts that close go to their files one at a time, as rendered.
  size_t closed_now = 0;
  auto mark = std::chrono::steady_clock::now();
  auto cl = render_change_list(*reader, urls, s, options.change_list_part, &known,
                               [&](rs::WrittenPart&& part) {
                                 const std::string path = urls.path_of(part.url);
                                 closed_docs[path] =
                                     options.document_dir.empty()
                                         ? cached(std::move(part.xml), "application/xml", true)
                                         : cached_on_disk(std::move(part.xml), options.document_dir / s.name,
                                                          std::filesystem::path(path).filename().string());
                                 notify_framework(s.name, part.url, "changelist", "created");
                                 ++closed_now;
                                 const auto t = std::chrono::steady_clock::now();
                                 closing_time += t - mark; // this part's reading, rendering and writing
                                 mark = t;
                               },
                               compaction);
  if (!cl) {
    return tl::unexpected(cl.error());
  }
  if (known.compacted > closed_parts[s.name].compacted) {
    drop_compacted(s.name, known);
  }
  for (auto& part : *cl) {
    docs[urls.path_of(part.url)] =
        cached_transient(std::move(part.xml),
                         options.document_dir.empty() ? std::filesystem::path() : options.document_dir / s.name,
                         "application/xml");
  }
  for (const auto& part : known.parts) {
    const std::string path = urls.path_of(part.url);
    auto it = closed_docs.find(path);
    if (it == closed_docs.end()) {
      closed_parts.erase(s.name); // cannot happen; start over next time rather than serve a gap
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
  {
    std::unique_lock lock(cache_mutex);
    closed_meta[s.name] = known;
  }
  closed_parts[s.name] = std::move(known);
  return {};
}

void Republisher::Impl::put_xml(DocumentMap& docs, const std::string& url, std::string body) {
  docs[urls.path_of(url)] = cached(std::move(body), "application/xml");
}

auto Republisher::Impl::drop_compacted(const std::string& set, const ClosedParts& known) -> void {
  const size_t first = known.compacted + 1;
  const std::string part_one = urls.path_of(urls.change_list_part(set, 1));
  const std::string stem = part_one.substr(0, part_one.rfind('-') + 1);
  for (auto it = closed_docs.begin(); it != closed_docs.end();) {
    size_t n = 0;
    if (it->first.rfind(stem, 0) == 0 && std::sscanf(it->first.c_str() + stem.size(), "%zu.xml", &n) == 1 &&
        n < first) {
      std::error_code ec;
      if (!it->second->file.empty()) {
        std::filesystem::remove(it->second->file, ec);
        std::filesystem::remove(it->second->gz_file, ec);
      }
      it = closed_docs.erase(it);
    } else {
      ++it;
    }
  }
}

auto Republisher::Impl::compactable(rs::Timestamp cutoff) -> Republisher::Compactable {
  std::map<std::string, ClosedParts> meta;
  Republisher::Compactable out;
  {
    std::shared_lock lock(cache_mutex);
    meta = closed_meta;
    out.published = set_feeds;
  }
  for (const auto& [name, parts] : meta) {
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

auto Republisher::Impl::notify_framework(const std::string& set, const std::string& loc, const char* capability,
    const char* change) -> void {
  if (options.hub) {
    options.hub->framework(set, loc, capability, change);
  }
}

} // namespace tributary::pub

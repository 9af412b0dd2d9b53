#include "republisher/server.h"

#include "common/log.h"
#include "common/percent.h"
#include "republisher/cached_document.h"
#include "republisher/dumps.h"
#include "republisher/resource_list_files.h"
#include "common/http/server.h"

#include "resourcesync/reader.h"
#include "resourcesync/writer.h"

#include <malloc.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <fcntl.h>
#include <sys/stat.h>
#include <limits>
#include <map>
#include <set>
#include <shared_mutex>
#include <filesystem>
#include <thread>
#include <unordered_map>
#include <unistd.h>
#include <signal.h>
#include <cerrno>

namespace tributary::pub {

namespace {

// Processor time this thread has used.
std::chrono::nanoseconds thread_cpu_time() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

std::string http_date(rs::Timestamp t) {
  return http::http_date(
      std::chrono::system_clock::to_time_t(std::chrono::time_point_cast<std::chrono::seconds>(t)));
}

bool accepts_gzip(const http::Request& req) {
  const std::string* ae = req.header("accept-encoding");
  return ae && ae->find("gzip") != std::string::npos;
}

// If-None-Match: "*", or a list of entity tags one of which is ours (weak
// comparison, RFC 9110 13.1.2).
bool none_match(const http::Request& req, const std::string& etag) {
  const std::string* inm = req.header("if-none-match");
  if (!inm) {
    return false;
  }
  return *inm == "*" || inm->find(etag) != std::string::npos;
}


using DocumentMap = std::map<std::string, std::shared_ptr<const CachedDocument>>;


// Writes `bytes` to `path` through a temporary name of this process's own
// (a reader never sees a half-written file, and a second process writing
// the same document does not write into ours).
bool write_file(const std::filesystem::path& path, const std::string& bytes) {
  const std::filesystem::path tmp = path.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      return false;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  return !ec;
}

// A document in files under `dir`, `name` and its gzip copy `name`.gz;
// nullptr when they cannot be written.
std::unique_ptr<CachedDocument> in_files(const std::string& body, const std::filesystem::path& dir,
                                         const std::string& name, const std::string& type) {
  auto d = std::make_unique<CachedDocument>();
  d->content_type = type;
  d->etag = "\"" + rs::hash_hex(rs::HashAlgorithm::sha256, body).substr(0, 32) + "\"";
  const std::string gz = rs::gzip(body);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !write_file(dir / name, body) || !write_file(dir / (name + ".gz"), gz)) {
    std::filesystem::remove(dir / name, ec);
    return nullptr;
  }
  d->file = dir / name;
  d->gz_file = dir / (name + ".gz");
  d->size = body.size();
  d->gz_size = gz.size();
  return d;
}

// An immutable document kept on disk under `dir` as `name` (and its gzip
// copy as `name`.gz); in memory if the files cannot be written.
std::shared_ptr<const CachedDocument> cached_on_disk(std::string body, const std::filesystem::path& dir,
                                                     const std::string& name) {
  auto d = in_files(body, dir, name, "application/xml");
  if (!d) {
    return cached(std::move(body), "application/xml", true);
  }
  d->immutable = true;
  return d;
}

// A document that changes (the open Change List part), past k_file_min
// bytes, kept in files of its own under `dir` while it is served: the files
// go when the last reference does (a newer rendering replaced it and no
// response still reads it; a response already sending has its own open
// file). Small ones, or when the files cannot be written: in memory.
constexpr size_t k_file_min = 64 * 1024;

std::shared_ptr<const CachedDocument> cached_transient(std::string body, const std::filesystem::path& dir,
                                                       const std::string& type) {
  static std::atomic<uint64_t> generation{0};
  auto d = dir.empty() || body.size() < k_file_min
               ? nullptr
               : in_files(body, dir, "open-" + std::to_string(generation.fetch_add(1) + 1) + ".xml", type);
  if (!d) {
    return cached(std::move(body), type);
  }
  return std::shared_ptr<const CachedDocument>(d.release(), [](const CachedDocument* p) {
    std::error_code e;
    std::filesystem::remove(p->file, e);
    std::filesystem::remove(p->gz_file, e);
    delete p;
  });
}

// Removes what cached_transient() left under `dir` (a process that died
// before its documents were released).
void remove_transient(const std::filesystem::path& dir) {
  std::error_code ec;
  for (const auto& set : std::filesystem::directory_iterator(dir, ec)) {
    std::error_code e;
    for (const auto& f : std::filesystem::directory_iterator(set.path(), e)) {
      if (f.path().filename().string().rfind("open-", 0) == 0) {
        std::filesystem::remove(f.path(), e);
      }
    }
  }
}

// Logs `failures` when they differ from the `last` ones logged (an error
// line with `error` before them), or `recovered` when they are gone: once
// per distinct state, not on every refresh.
void report_failures(const std::vector<std::string>& failures, std::string& last, const std::string& error,
                     const char* recovered) {
  std::string all;
  for (const auto& f : failures) {
    all += (all.empty() ? "" : "; ") + f;
  }
  if (all == last) {
    return;
  }
  if (!all.empty()) {
    log::error("", error + all);
  } else {
    log::info("", recovered);
  }
  last = std::move(all);
}

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

struct Republisher::Impl {
  std::shared_ptr<store::StoreReader> reader;
  std::shared_ptr<store::StoreReader> lookups; // content requests
  std::shared_ptr<store::BlobStore> blobs;
  PublishOptions options;
  UrlScheme urls;
  std::string prefix; // the public URL's path, e.g. "/mirror"

  std::thread refresher;
  std::thread dumper;
  std::mutex stop_mutex;
  std::condition_variable stop_cv;
  bool stopping = false;
  bool refresh_requested = false;

  std::shared_mutex cache_mutex;
  std::shared_ptr<const DocumentMap> documents = std::make_shared<DocumentMap>();
  // What content requests need of a resource, cached until the store moves
  // on (a database round trip per request would cap the server far below
  // what serving a file costs).
  struct ContentView {
    int status = 404;             // 200, 404 or 410
    std::string etag;
    std::string last_modified;    // HTTP date
    std::time_t modified = 0;
    std::string type;
    std::string path;             // the file holding the blob's bytes
    size_t offset = 0;            // where they start in it
    std::shared_ptr<const std::string> bytes; // small blobs, held in memory
    size_t size = 0;
  };
  std::unordered_map<std::string, std::shared_ptr<const ContentView>> resource_cache;
  size_t cached_bytes = 0;   // keys and inline bodies
  uint64_t cache_epoch = 0;  // bumped whenever the store moved on and the cache was cleared
  static constexpr size_t k_inline_max = 64 * 1024;
  static constexpr size_t k_inline_budget = 256ull * 1024 * 1024;
  std::map<std::string, std::vector<int64_t>> set_feeds; // guarded by cache_mutex
  int64_t rendered_seq = -1;
  std::vector<store::Compaction> rendered_compactions; // refresher only
  // Resource Dumps per set (guarded by cache_mutex), and the package files
  // they name by URL path.
  struct SetDump {
    BuiltDump built;
    std::chrono::steady_clock::time_point built_at;
    int64_t seq = 0;
    std::string previous_generation;
  };
  std::map<std::string, SetDump> dumps;
  // Closed Change List parts as the refresher last saw them, and the Change
  // Dump packages built for them (both guarded by cache_mutex).
  std::map<std::string, ClosedParts> closed_meta;
  std::map<std::string, std::vector<ChangePackage>> change_packages;
  std::map<std::string, size_t> packages_compacted; // dumper only: package files of parts up to this are gone
  std::shared_ptr<const std::map<std::string, std::filesystem::path>> dump_files =
      std::make_shared<std::map<std::string, std::filesystem::path>>();
  bool dumps_changed = false; // under stop_mutex: render the capability lists again
  bool lists_wake = false;    // under stop_mutex: the lister looks at the store now
  bool sets_listed = false;   // under stop_mutex: a new set has its Resource List, show the set
  // Closed Change List parts per set, and their documents (refresher only).
  std::map<std::string, ClosedParts> closed_parts;
  std::map<std::string, std::shared_ptr<const CachedDocument>> closed_docs;
  std::string last_refresh_error; // refresher thread only
  // Time the last refresh spent on Change List parts that closed: rendered
  // once, never again, so the refresher's pace leaves it out (a baseline of
  // a million closes a hundred parts at once).
  std::chrono::steady_clock::duration closing_time{};
  std::string set_failures;       // sets whose last rendering failed (refresher only)
  std::set<std::string> failed_sets; // their names: rendered again at every refresh (refresher only)
  // Resource Lists are kept by a thread of their own (the lister), so that
  // bringing a list of a million up to date never delays the Change List.
  // lists_mutex guards list_docs, and is taken before
  // cache_mutex.
  std::thread lister;
  std::mutex lists_mutex;
  std::map<std::string, std::vector<std::pair<std::string, std::shared_ptr<const CachedDocument>>>> list_docs;
  int64_t lists_last_seq = -1; // lister only: the seq its previous pass saw
  std::string list_failures;   // lister only
  // Each set's Resource List, kept in files under list_root (lister only).
  struct ListState {
    std::unique_ptr<ResourceListFiles> files;
    std::chrono::steady_clock::time_point at;  // when it was last updated
    std::chrono::steady_clock::duration took{}; // what that took
  };
  std::map<std::string, ListState> resource_lists;
  std::filesystem::path list_root; // this process's own folder for them

  Impl(std::shared_ptr<store::StoreReader> r, std::shared_ptr<store::BlobStore> b, PublishOptions o,
       std::shared_ptr<store::StoreReader> l)
      : reader(std::move(r)), lookups(l ? std::move(l) : reader), blobs(std::move(b)), options(std::move(o)),
        urls(options.public_url) {
    prefix = urls.path_of(urls.base() + "/");
    prefix.pop_back();
    list_root = lists_folder(options.document_dir);
    if (!options.document_dir.empty()) {
      remove_transient(options.document_dir);
    }
  }

  ~Impl() {
    resource_lists.clear(); // each removes its files
    std::error_code ec;
    std::filesystem::remove_all(list_root, ec);
  }

  // Renders every document when the store moved on since the last time.
  Result<void> refresh(bool force) {
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
    // Only the sets over feeds that changed are rendered again (200 sets
    // of which one changed cost one set's rendering, not 200); the others
    // keep their documents. All of them on a forced refresh, the first, or
    // when retention compacted.
    std::optional<std::set<int64_t>> moved;
    if (!force && rendered_seq >= 0 && *seq >= rendered_seq && *compactions == rendered_compactions) {
      auto changed = reader->changed_feeds(rendered_seq, *seq);
      if (!changed) {
        return tl::unexpected(changed.error());
      }
      moved = std::set<int64_t>(changed->begin(), changed->end());
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
    auto put = [&](const std::string& url, std::string body, bool immutable = false) {
      (*docs)[urls.path_of(url)] = cached(std::move(body), "application/xml", immutable);
    };
    put(urls.source_description(), render_source_description(urls, sets));
    std::string robots = "User-agent: *\nAllow: /\n";
    for (const auto& s : sets) {
      const std::string cap_path = urls.path_of(urls.capability_list(s.name));
      const std::string set_dir = cap_path.substr(0, cap_path.rfind('/') + 1);
      auto keep_previous = [&] {
        for (auto it = before->lower_bound(set_dir); it != before->end() && it->first.rfind(set_dir, 0) == 0; ++it) {
          docs->emplace(it->first, it->second);
        }
      };
      if (moved && before->count(cap_path) && !failed_sets.count(s.name) &&
          std::none_of(s.feeds.begin(), s.feeds.end(), [&](int64_t f) { return moved->count(f) > 0; })) {
        robots += "Sitemap: " + urls.resource_list(s.name) + "\n";
        keep_previous();
        continue;
      }
      auto render_set = [&]() -> Result<void> {
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
        put(urls.capability_list(s.name),
            render_capability_list(urls, s, dump_document.has_value(), change_dump_document.has_value(),
                                   options.hub ? options.hub->advertised_hub() : std::string(),
                                   options.archive != nullptr, !options.dump_dir.empty()));
        if (dump_document) {
          put(urls.resource_dump(s.name), std::move(*dump_document));
        }
        if (change_dump_document) {
          put(urls.change_dump(s.name), std::move(*change_dump_document));
        }
        // The Resource List is the lister's (see lists_pass): added at
        // publication.
        robots += "Sitemap: " + urls.resource_list(s.name) + "\n";
        // Closed parts are rendered (and compressed) once and kept.
        ClosedParts known = closed_parts[s.name];
        const auto cl_start = std::chrono::steady_clock::now();
        // Parts that close go to their files one at a time, as rendered.
        size_t closed_now = 0;
        auto mark = std::chrono::steady_clock::now();
        const auto ci = compaction_of.find(s.name);
        const store::Compaction* compaction = ci == compaction_of.end() ? nullptr : ci->second;
        auto cl = render_change_list(*reader, urls, s, options.change_list_part, &known,
                                     [&](rs::WrittenPart&& part) {
                                       const std::string path = urls.path_of(part.url);
                                       closed_docs[path] =
                                           options.document_dir.empty()
                                               ? cached(std::move(part.xml), "application/xml", true)
                                               : cached_on_disk(std::move(part.xml), options.document_dir / s.name,
                                                                std::filesystem::path(path).filename().string());
                                       framework(s.name, part.url, "changelist", "created");
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
          (*docs)[urls.path_of(part.url)] =
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
          (*docs)[path] = it->second;
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
      };
      if (auto r = render_set(); !r) {
        // One set's failure (a value its rows cannot be read back with, a
        // query that failed) keeps that set's previous documents; the other
        // sets move on.
        failures.push_back("set '" + s.name + "': " + r.error().message);
        failed.insert(s.name);
        keep_previous();
      }
    }
    // Retention compacted while the Change Lists were read (a page may
    // have gone from under the reading): start over, rather than publish a
    // part that lacks changes; what is served stays as it was.
    auto again = reader->compactions();
    if (!again) {
      return tl::unexpected(again.error());
    }
    if (*again != *compactions) {
      for (const auto& c : *again) {
        closed_parts.erase(c.set_name);
      }
      return make_error(ErrorKind::conflict, "the change log was compacted while the Change Lists were read");
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
      std::unique_lock lock(cache_mutex);
      documents = docs;
      set_feeds = std::move(feeds_of);
      rendered_compactions = std::move(*compactions);
      resource_cache.clear();
      cached_bytes = 0;
      ++cache_epoch;
      rendered_seq = *seq;
    }
    if (options.hub) {
      // Subscribers get what the Change Lists now show (not a failed set's).
      std::vector<PublishedSet> shown;
      for (const auto& s : sets) {
        if (!failed.count(s.name)) {
          shown.push_back(s);
        }
      }
      options.hub->published(shown, *seq);
    }
    failed_sets = std::move(failed);
    if (sets.size() < all_sets.size()) {
      {
        std::lock_guard lock(stop_mutex);
        lists_wake = true;
      }
      stop_cv.notify_all();
    }
    report_failures(failures, set_failures,
                    "documents of some sets could not be rendered (their previous ones are served): ",
                    "every set's documents are rendered again");
    return {};
  }

  // Forgets the closed parts of `set` that retention compacted (their files
  // go; another process serving them from the same folder finds them gone
  // once it learns of the compaction too, by the change notification).
  void drop_compacted(const std::string& set, const ClosedParts& known) {
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

  // What retention may compact: for each set, its closed Change List parts
  // that ended before `cutoff` (all of them up to the newest such).
  Republisher::Compactable compactable(rs::Timestamp cutoff) {
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

  // One pass of the lister: each set's Resource List that is due is brought
  // to the change log's seq (only the parts with changes are rendered again,
  // streamed into files) and published as it is done. A list is due when
  // its set is new, or when the store moved on and either went quiet (seq
  // unchanged since the previous pass, a second ago: the last changes are
  // shown within a pass of the store stopping) or four times what the last
  // update took has passed, and the configured interval.
  struct ListsPass {
    bool settled = false;  // the store did not move, and every list shows it
    bool rendered = false; // some list was brought up to date
  };
  ListsPass lists_pass() {
    // Read before the seq: a list brought to that seq shows the store as it
    // was at this time at the latest.
    const rs::Timestamp at = now();
    auto seq = lookups->last_seq();
    std::vector<PublishedSet> sets; // as the refresher last published them
    {
      std::shared_lock lock(cache_mutex);
      for (const auto& [name, feeds] : set_feeds) {
        sets.push_back(PublishedSet{name, feeds});
      }
    }
    std::vector<std::string> failures;
    ListsPass pass;
    if (!seq) {
      failures.push_back(seq.error().message);
    } else {
      const bool quiet = *seq == lists_last_seq;
      pass.settled = quiet;
      lists_last_seq = *seq;
      std::set<std::string> names;
      for (const auto& s : sets) {
        names.insert(s.name);
        ListState& list = resource_lists[s.name];
        const bool fresh = !list.files || list.files->set().feeds != s.feeds;
        const bool due =
            fresh || (list.files->seq() != *seq &&
                      (quiet || std::chrono::steady_clock::now() - list.at >=
                                    std::max<std::chrono::steady_clock::duration>(
                                        4 * list.took, options.resource_list_min_interval)));
        if (!due) {
          continue;
        }
        if (auto r = update_list(s, *seq, at); !r) {
          failures.push_back("set '" + s.name + "': " + r.error().message); // the previous list stays published
          pass.settled = false;
          continue;
        }
        pass.rendered = true;
        snapshot_if_due(s.name, list.files->documents(), at);
        const bool first = publish_list(s.name, list.files->documents());
        framework(s.name, urls.resource_list(s.name), "resourcelist", first ? "created" : "updated");
        if (first) {
          {
            std::lock_guard lock(stop_mutex);
            sets_listed = true;
            refresh_requested = true;
          }
          stop_cv.notify_all();
        }
      }
      for (auto it = resource_lists.begin(); it != resource_lists.end();) {
        if (names.count(it->first)) {
          ++it;
          continue;
        }
        publish_list(it->first, {}); // a set no longer published
        it = resource_lists.erase(it);
      }
    }
    report_failures(failures, list_failures,
                    "Resource Lists not brought up to date (the previous ones are served): ",
                    "every Resource List is up to date again");
    return pass;
  }

  Result<void> update_list(const PublishedSet& s, int64_t seq, rs::Timestamp at) {
    const auto start = std::chrono::steady_clock::now();
    ListState& list = resource_lists[s.name];
    if (!list.files || list.files->set().feeds != s.feeds) {
      ResourceListFiles::Options o;
      o.dir = list_root / s.name;
      list.files = std::make_unique<ResourceListFiles>(urls, s, o);
    }
    auto r = list.files->update(*lookups, seq, at);
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

  // Serves `docs` as the Resource List of `set` from now on, in place of
  // what was served for it. True when the set had none.
  bool publish_list(const std::string& set,
                    std::vector<std::pair<std::string, std::shared_ptr<const CachedDocument>>> docs) {
    std::lock_guard lists(lists_mutex);
    const bool first = !list_docs.count(set);
    auto& old = list_docs[set];
    std::unique_lock lock(cache_mutex);
    auto updated = std::make_shared<DocumentMap>(*documents);
    for (const auto& [path, doc] : old) {
      updated->erase(path);
    }
    for (const auto& [path, doc] : docs) {
      (*updated)[path] = doc;
    }
    documents = std::move(updated);
    if (docs.empty()) {
      list_docs.erase(set);
    } else {
      old = std::move(docs);
    }
    return first && !list_docs.empty() && list_docs.count(set);
  }

  http::Disposition serve_document(const http::Request& req, http::Response& res,
                                   const std::shared_ptr<const CachedDocument>& doc, bool can_block) {
    const CachedDocument& d = *doc;
    const bool on_disk = !d.file.empty();
    if (on_disk && !none_match(req, d.etag) && !can_block) {
      return http::Disposition::blocking; // opening a file may wait on the disk
    }
    res.set_header("ETag", d.etag);
    res.set_header("Cache-Control", d.immutable ? "public, max-age=31536000, immutable" : "no-cache");
    res.set_header("Vary", "Accept-Encoding");
    if (none_match(req, d.etag)) {
      res.status = 304;
      return http::Disposition::done;
    }
    const bool gz = accepts_gzip(req) && (on_disk ? d.gz_size < d.size : d.gzipped.size() < d.body.size());
    if (gz) {
      res.set_header("Content-Encoding", "gzip");
    }
    if (on_disk) {
      const int fd = ::open((gz ? d.gz_file : d.file).c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        res.status = 500; // removed from under us: the next restart writes it again
        return http::Disposition::done;
      }
      res.set_file(std::make_shared<const http::OpenFile>(fd), gz ? d.gz_size : d.size, d.content_type);
      return http::Disposition::done;
    }
    // Served from the cache without a copy; the aliasing pointer keeps the
    // document alive past a cache refresh.
    res.set_shared(std::shared_ptr<const std::string>(doc, gz ? &d.gzipped : &d.body), d.content_type);
    return http::Disposition::done;
  }

  // What a content request for (set, uri) answers, prepared once per state
  // of the store: status, validators, and for small blobs the bytes.
  // A cache miss queries the store: only where blocking is allowed
  // (can_block), else `miss` is set and nullptr returned.
  std::shared_ptr<const ContentView> content_view(const std::string& set, const std::string& uri, bool can_block,
                                                  bool& miss) {
    if (uri.size() > rs::k_max_uri_bytes) {
      return std::make_shared<ContentView>(); // longer than any we store: 404 without a query
    }
    const std::string key = set + '\n' + uri;
    std::vector<int64_t> feeds;
    uint64_t epoch = 0;
    {
      std::shared_lock lock(cache_mutex);
      epoch = cache_epoch;
      if (auto it = resource_cache.find(key); it != resource_cache.end()) {
        return it->second;
      }
      if (!can_block) {
        miss = true;
        return nullptr;
      }
      auto sf = set_feeds.find(set);
      if (sf == set_feeds.end()) {
        return std::make_shared<ContentView>();
      }
      feeds = sf->second;
    }
    std::optional<store::ResourceRecord> found;
    for (int64_t f : feeds) {
      auto r = lookups->resource(f, uri);
      if (!r) {
        return nullptr; // the store is unreachable: 503, not cached
      }
      if (*r) {
        found = std::move(**r);
        break;
      }
    }
    auto v = std::make_shared<ContentView>();
    if (found && (found->state == store::ResourceState::deleted || !found->blob_sha256)) {
      v->status = 410;
    } else if (found) {
      auto where = blobs->locate(*found->blob_sha256);
      if (!where) {
        return nullptr; // not cached: 503, asked again next time
      }
      v->status = 200;
      v->etag = "\"" + *found->blob_sha256 + "\"";
      const rs::Timestamp modified = found->lastmod ? *found->lastmod : found->fetched_at.value_or(rs::Timestamp{});
      v->last_modified = http_date(modified);
      v->modified = std::chrono::system_clock::to_time_t(std::chrono::time_point_cast<std::chrono::seconds>(modified));
      v->type = found->type.value_or("application/octet-stream");
      v->path = where->file.string();
      v->offset = static_cast<size_t>(where->offset);
      v->size = static_cast<size_t>(where->length);
      if (v->size <= k_inline_max) {
        auto bytes = blobs->read(*found->blob_sha256);
        if (bytes) {
          v->bytes = std::make_shared<const std::string>(std::move(*bytes));
        }
      }
    }
    if (v->status == 404) {
      return v; // not cached: any URI can be asked for, and a flood of them must not fill memory
    }
    std::unique_lock lock(cache_mutex);
    if (epoch != cache_epoch) {
      return v; // read before the store moved on: answer this request, never cache it
    }
    if (resource_cache.size() >= 200000 || cached_bytes > k_inline_budget) {
      resource_cache.clear(); // bounded; a cold miss costs one query
      cached_bytes = 0;
    }
    cached_bytes += key.size() + sizeof(ContentView) + v->path.size() + (v->bytes ? v->bytes->size() : 0);
    resource_cache[key] = v;
    return v;
  }

  // The files the dumps name, by URL path (call with cache_mutex held).
  void publish_dump_files() {
    auto files = std::make_shared<std::map<std::string, std::filesystem::path>>();
    for (const auto& [name, dump] : dumps) {
      files->insert(dump.built.files.begin(), dump.built.files.end());
    }
    for (const auto& [name, packages] : change_packages) {
      for (const auto& p : packages) {
        if (p.file.empty()) {
          continue; // shared: served from the blob store
        }
        (*files)[urls.path_of(urls.change_dump_package(name, p.n))] = p.file;
        (*files)[urls.path_of(urls.change_dump_manifest(name, p.n))] = p.manifest_file;
      }
    }
    dump_files = std::move(files);
  }

  // A file this node built, stored as a blob (with a remote tier, in the
  // bucket before this returns), named as served under `url_path`.
  Result<store::SharedDumps::File> share_file(const std::filesystem::path& file, const std::string& url_path) {
    auto w = blobs->begin();
    if (!w) {
      return tl::unexpected(w.error());
    }
    std::ifstream in(file, std::ios::binary);
    std::vector<char> buf(1 << 20);
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      if (in.gcount() > 0) {
        if (auto r = w->write(buf.data(), static_cast<size_t>(in.gcount())); !r) {
          return tl::unexpected(r.error());
        }
      }
    }
    if (in.bad() || !std::filesystem::exists(file)) {
      return make_error(ErrorKind::io, file.string() + ": cannot be read");
    }
    auto info = w->commit();
    if (!info) {
      return tl::unexpected(info.error());
    }
    return store::SharedDumps::File{url_path, info->sha256, info->length};
  }

  // Shared dumps: each set's Resource Dump is the one the database names,
  // whichever node built it. One is built here when the set has none, or
  // when it is due (older than resource_dump_interval while the set
  // changed); its packages go into the blob store and the local files go.
  // Two nodes may build at once: the later seq wins, and the one it
  // replaces stays served. True when a set's dump changed here.
  bool adopt_shared_resource_dumps(const std::vector<store::FeedInfo>& feeds, int64_t seq, const DumpOptions& o) {
    auto& shared = *options.shared_dumps;
    auto listed = shared.resource_dumps();
    if (!listed) {
      log::warn("", "shared Resource Dumps not read: " + listed.error().message);
      return false;
    }
    std::map<std::string, store::SharedDumps::ResourceDump> current(listed->begin(), listed->end());
    const auto now = std::chrono::system_clock::now();
    bool changed = false;
    for (const auto& set : published_sets(feeds, options.named_sets)) {
      auto it = current.find(set.name);
      const store::SharedDumps::ResourceDump* theirs_now = it == current.end() ? nullptr : &it->second;
      if (shared_dump_due(theirs_now, seq, now) && build_shared_resource_dump(set, seq, o)) {
        // built and recorded here
      } else if (theirs_now) {
        std::shared_lock lock(cache_mutex);
        auto mine = dumps.find(set.name);
        if (mine != dumps.end() && mine->second.built.generation == theirs_now->generation) {
          continue; // served already
        }
      }
      auto theirs = shared.resource_dump(set.name);
      if (!theirs || !*theirs) {
        continue;
      }
      std::unique_lock lock(cache_mutex);
      SetDump& d = dumps[set.name];
      if (d.built.generation != (*theirs)->generation) {
        d.previous_generation = d.built.generation;
        d.built = BuiltDump{(*theirs)->generation, std::move((*theirs)->document), {}};
        d.seq = (*theirs)->seq;
        changed = true;
      }
    }
    return changed;
  }

  // Whether a set whose shared Resource Dump is `dump` (null: none) needs
  // a new one: none yet, or it is older than resource_dump_interval and
  // the store moved on since.
  bool shared_dump_due(const store::SharedDumps::ResourceDump* dump, int64_t seq,
                       std::chrono::system_clock::time_point now) const {
    return !dump || (dump->seq != seq && now - dump->built_at >= options.resource_dump_interval);
  }

  // Builds the set's Resource Dump and records it as the shared one, unless
  // another node is building it, or built it while this one looked (false
  // then).
  bool build_shared_resource_dump(const PublishedSet& set, int64_t seq, const DumpOptions& o) {
    auto& shared = *options.shared_dumps;
    auto claimed = shared.claim(set.name);
    if (!claimed || !*claimed) {
      return false;
    }
    struct Release {
      store::SharedDumps& shared;
      const std::string& set;
      ~Release() { (void)shared.release(set); }
    } release{shared, set.name};
    const auto now = std::chrono::system_clock::now();
    auto current = shared.resource_dump(set.name);
    if (!current || !shared_dump_due(current->has_value() ? &**current : nullptr, seq, now)) {
      return false; // built meanwhile
    }
    auto built = build_resource_dump(*reader, *blobs, urls, set, o, pub::now());
    if (!built) {
      log::warn("", "Resource Dump of set '" + set.name + "' not built: " + built.error().message);
      return false;
    }
    if (built->files.empty()) {
      remove_old_generations(o, set.name, {});
      return false; // nothing held yet: no dump to offer (a client would find no package in it)
    }
    std::vector<store::SharedDumps::File> files;
    for (const auto& [path, file] : built->files) {
      auto f = share_file(file, path);
      if (!f) {
        log::warn("", "Resource Dump of set '" + set.name + "' not stored: " + f.error().message);
        break;
      }
      files.push_back(std::move(*f));
    }
    remove_old_generations(o, set.name, {}); // the blob store holds the packages now
    if (files.size() != built->files.size()) {
      return false;
    }
    store::SharedDumps::ResourceDump d{built->generation, built->document, seq, now};
    if (auto put = shared.put_resource_dump(set.name, d, files); !put) {
      log::warn("", "Resource Dump of set '" + set.name + "' not recorded: " + put.error().message);
      return false;
    }
    return true;
  }

  // Shared dumps: Change Dump package `n` of the set as the database names
  // it, built here (and stored as blobs, the local files removed) when no
  // node has yet. Packages of a closed part hold the same changes
  // whichever node builds them; the first one named is the one served.
  Result<ChangePackage> shared_change_package(const PublishedSet& set, const DumpOptions& o, size_t n,
                                              const ClosedParts::Part& part, int64_t after_seq, size_t part_size) {
    auto& shared = *options.shared_dumps;
    const std::string zip_url = urls.change_dump_package(set.name, n);
    const std::string manifest_url = urls.change_dump_manifest(set.name, n);
    auto zip = shared.file(urls.path_of(zip_url));
    if (!zip) {
      return tl::unexpected(zip.error());
    }
    if (!*zip) {
      auto pkg = build_change_package(*reader, *blobs, urls, set, o, n, part, after_seq, part_size);
      if (!pkg) {
        return tl::unexpected(pkg.error());
      }
      auto zip_file = share_file(pkg->file, urls.path_of(zip_url));
      auto manifest_file = share_file(pkg->manifest_file, urls.path_of(manifest_url));
      std::error_code ec;
      std::filesystem::remove(pkg->file, ec);
      std::filesystem::remove(pkg->manifest_file, ec);
      if (!zip_file || !manifest_file) {
        return tl::unexpected(!zip_file ? zip_file.error() : manifest_file.error());
      }
      if (auto put = shared.put_change_package(set.name, {n, part.from, part.until, *zip_file, *manifest_file});
          !put) {
        return tl::unexpected(put.error());
      }
      zip = shared.file(urls.path_of(zip_url)); // ours, or the one another node named first
      if (!zip || !*zip) {
        return make_error(ErrorKind::io, zip_url + ": recorded, then not found");
      }
    }
    return offered_package(n, part.from, part.until, **zip);
  }

  // This node's own Resource Dumps (no shared bucket): built for each set
  // that has none, or whose dump is due; true when one changed.
  bool build_local_resource_dumps(const std::vector<store::FeedInfo>& feeds, int64_t seq, const DumpOptions& o) {
    const auto now = std::chrono::steady_clock::now();
    bool changed = false;
    for (const auto& set : published_sets(feeds, options.named_sets)) {
      std::string previous;
      {
        std::shared_lock lock(cache_mutex);
        if (auto it = dumps.find(set.name); it != dumps.end()) {
          if (it->second.seq == seq || now - it->second.built_at < options.resource_dump_interval) {
            continue;
          }
          previous = it->second.built.generation;
        }
      }
      const rs::Timestamp at = pub::now();
      auto built = build_resource_dump(*reader, *blobs, urls, set, o, at);
      if (!built) {
        log::warn("", "Resource Dump of set '" + set.name + "' not built: " + built.error().message);
        continue;
      }
      if (built->files.empty()) {
        // Nothing held (yet, or any more): no dump is offered, since a
        // client would find no package in it; tried again next time.
        remove_old_generations(o, set.name, {});
        std::unique_lock lock(cache_mutex);
        if (dumps.erase(set.name) > 0) {
          publish_dump_files();
          changed = true;
        }
        continue;
      }
      std::vector<std::string> keep{built->generation};
      if (!previous.empty()) {
        keep.push_back(previous); // downloads of the last one in progress may finish
      }
      {
        std::unique_lock lock(cache_mutex);
        SetDump& d = dumps[set.name];
        d.previous_generation = previous;
        d.built = std::move(*built);
        d.built_at = now;
        d.seq = seq;
        publish_dump_files();
      }
      remove_old_generations(o, set.name, keep);
      framework(set.name, urls.resource_dump(set.name), "resourcedump", previous.empty() ? "created" : "updated");
      changed = true;
    }
    return changed;
  }

  // Builds the Resource Dumps that are missing or due; tells the refresher
  // to publish them.
  void build_due_dumps() {
    auto seq = reader->last_seq();
    auto feeds = reader->feeds();
    if (!seq || !feeds) {
      return;
    }
    DumpOptions o;
    o.dir = options.dump_dir;
    o.package_entries = options.dump_package_entries;
    o.package_bytes = options.dump_package_bytes;
    bool changed = options.shared_dumps ? adopt_shared_resource_dumps(*feeds, *seq, o)
                                        : build_local_resource_dumps(*feeds, *seq, o);
    // Change Dump: a package for every closed Change List part not yet packed.
    std::map<std::string, ClosedParts> meta;
    {
      std::shared_lock lock(cache_mutex);
      meta = closed_meta;
    }
    for (const auto& set : published_sets(*feeds, options.named_sets)) {
      auto it = meta.find(set.name);
      if (it == meta.end()) {
        continue;
      }
      const ClosedParts& parts = it->second;
      size_t have = 0;
      {
        std::unique_lock lock(cache_mutex);
        auto& built = change_packages[set.name];
        // Packages of parts that retention compacted go with them: the
        // content of changes behind the horizon is no longer offered.
        if (options.shared_dumps && !built.empty() && built.front().n <= parts.compacted) {
          if (auto r = options.shared_dumps->drop_change_packages(set.name, parts.compacted); !r) {
            log::warn("", "Change Dump packages of set '" + set.name + "' not dropped: " + r.error().message);
          }
        }
        while (!built.empty() && built.front().n <= parts.compacted) {
          std::error_code ec;
          std::filesystem::remove(built.front().file, ec);
          std::filesystem::remove(built.front().manifest_file, ec);
          built.erase(built.begin());
          publish_dump_files();
          changed = true;
        }
        if (!built.empty() && (built.size() > parts.parts.size() || built.front().n != parts.parts.front().n ||
                               built.back().until != parts.parts[built.size() - 1].until)) {
          built.clear(); // the parts were renumbered (other feeds or part size): pack again
          std::error_code ec;
          std::filesystem::remove_all(o.dir / set.name / "changes", ec);
          if (options.shared_dumps) {
            (void)options.shared_dumps->drop_change_packages(set.name, std::numeric_limits<int32_t>::max());
          }
        }
        have = built.size();
      }
      if (parts.compacted > packages_compacted[set.name]) {
        // Packages of compacted parts that an earlier process left.
        std::error_code ec;
        for (const auto& f : std::filesystem::directory_iterator(o.dir / set.name / "changes", ec)) {
          size_t n = 0;
          if (std::sscanf(f.path().filename().c_str(), "%zu", &n) == 1 && n <= parts.compacted) {
            std::filesystem::remove(f.path(), ec);
          }
        }
        packages_compacted[set.name] = parts.compacted;
      }
      for (size_t i = have; i < parts.parts.size(); ++i) {
        const size_t n = parts.parts[i].n;
        const int64_t after = i == 0 ? parts.compacted_seq : parts.parts[i - 1].last_seq;
        auto pkg = options.shared_dumps
                       ? shared_change_package(set, o, n, parts.parts[i], after, parts.part_size)
                       : build_change_package(*reader, *blobs, urls, set, o, n, parts.parts[i], after,
                                              parts.part_size);
        if (!pkg) {
          log::warn("", "Change Dump package " + std::to_string(n) + " of set '" + set.name +
                            "' not built: " + pkg.error().message);
          break;
        }
        std::unique_lock lock(cache_mutex);
        change_packages[set.name].push_back(std::move(*pkg));
        publish_dump_files();
        changed = true;
      }
    }
    if (changed) {
      std::lock_guard lock(stop_mutex);
      dumps_changed = true;
      refresh_requested = true;
      stop_cv.notify_all();
    }
  }

  // The Resource Dump or Change Dump of a set when another node's
  // Capability List offered it and this one has not taken it up yet (its
  // dumper looks every 2 s): read from the database, so that a client
  // behind a load balancer finds what one node offered on any other.
  // nullopt: `path` is neither.
  std::optional<http::Disposition> serve_shared_dump_document(http::Response& res, const std::string& path,
                                                              bool can_block) {
    auto under = in_set(path);
    if (!under || (under->second != "/resourcedump.xml" && under->second != "/changedump.xml")) {
      return std::nullopt;
    }
    const std::string& set = under->first;
    const bool resource = under->second == "/resourcedump.xml";
    if (!can_block) {
      return http::Disposition::blocking; // asks the database
    }
    std::optional<std::string> document;
    if (resource) {
      auto d = options.shared_dumps->resource_dump(set);
      if (!d) {
        res.status = 503;
        res.set_header("Retry-After", "5");
        return http::Disposition::done;
      }
      if (*d) {
        document = std::move((*d)->document);
      }
    } else {
      auto named = options.shared_dumps->change_packages(set);
      if (!named) {
        res.status = 503;
        res.set_header("Retry-After", "5");
        return http::Disposition::done;
      }
      if (!named->empty()) {
        std::vector<ChangePackage> packages;
        for (const auto& p : *named) {
          packages.push_back(offered_package(p.part, p.from, p.until, p.zip));
        }
        document = render_change_dump(urls, PublishedSet{set, {}}, packages);
      }
    }
    if (!document) {
      res.status = 404;
      return http::Disposition::done;
    }
    res.set_shared(std::make_shared<const std::string>(std::move(*document)), "application/xml");
    return http::Disposition::done;
  }

  // A decoded path under <prefix>/sets/<set>/: the set, and the rest from
  // the slash after it (nullopt: not under a set).
  std::optional<std::pair<std::string, std::string>> in_set(const std::string& path) const {
    const std::string sets = prefix + "/sets/";
    if (path.compare(0, sets.size(), sets) != 0) {
      return std::nullopt;
    }
    const auto slash = path.find('/', sets.size());
    if (slash == std::string::npos || slash == sets.size()) {
      return std::nullopt;
    }
    return std::pair{path.substr(sets.size(), slash - sets.size()), path.substr(slash)};
  }

  // Whether `path` (decoded) is under <prefix>/sets/<set>/resourcedump/ or
  // .../changedump/: a dump package or manifest, never a resource (whose
  // decoded original URI may hold those words too).
  bool is_dump_file_path(const std::string& path) const {
    auto under = in_set(path);
    return under && (under->second.rfind("/resourcedump/", 0) == 0 || under->second.rfind("/changedump/", 0) == 0);
  }

  // A package as our Change Dump lists it, from its part and the blob
  // holding its ZIP.
  static ChangePackage offered_package(size_t n, rs::Timestamp from, rs::Timestamp until,
                                       const store::SharedDumps::File& zip) {
    ChangePackage p;
    p.n = n;
    p.from = from;
    p.until = until;
    p.hash = rs::HashValue{"sha-256", zip.sha256};
    p.length = zip.length;
    return p;
  }

  // Serves an open dump file (a package or a manifest; a region of it when
  // it is a blob in a pack): immutable, with ranges.
  static http::Disposition serve_dump_bytes(http::Response& res, int fd, size_t length, uint64_t offset,
                                            bool xml) {
    res.set_header("Cache-Control", "public, max-age=31536000, immutable");
    res.ranges = true;
    res.set_file(std::make_shared<const http::OpenFile>(fd), length, xml ? "application/xml" : "application/zip",
                 offset);
    return http::Disposition::done;
  }

  // A dump package (or Change Dump manifest) another node may have built:
  // named in the database, its bytes in the blob store (fetched from the
  // bucket when this node lacks them).
  http::Disposition serve_shared_file(http::Response& res, const std::string& path, bool can_block) {
    if (!can_block) {
      return http::Disposition::blocking; // asks the database, may fetch from the bucket
    }
    auto named = options.shared_dumps->file(path);
    if (!named) {
      res.status = 503;
      res.set_header("Retry-After", "5");
      return http::Disposition::done;
    }
    if (!*named) {
      res.status = 404;
      return http::Disposition::done;
    }
    return serve_blob(res, path, (*named)->sha256);
  }

  // A document or package kept as a blob, under `path`.
  http::Disposition serve_blob(http::Response& res, const std::string& path, const std::string& sha256) {
    auto where = blobs->locate(sha256);
    if (!where) {
      log::warn("", path + ": blob " + sha256 + " not readable: " + where.error().message);
      res.status = 503;
      res.set_header("Retry-After", "5");
      return http::Disposition::done;
    }
    const int fd = ::open(where->file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      res.status = 503; // garbage collection moved it meanwhile
      res.set_header("Retry-After", "1");
      return http::Disposition::done;
    }
    const bool xml = path.size() > 4 && path.compare(path.size() - 4, 4, ".xml") == 0;
    return serve_dump_bytes(res, fd, where->length, where->offset, xml);
  }

  http::Disposition serve_resource(const http::Request& req, http::Response& res, const std::string& set,
                                   const std::string& uri, bool can_block) {
    bool miss = false;
    auto v = content_view(set, uri, can_block, miss);
    if (miss) {
      return http::Disposition::blocking;
    }
    if (!v) {
      res.status = 503;
      res.set_header("Retry-After", "5");
      return http::Disposition::done;
    }
    if (v->status != 404) {
      res.set_header("Link", "<" + urls.capability_list(set) + ">; rel=\"resourcesync\"");
    }
    if (v->status != 200) {
      res.status = v->status;
      return http::Disposition::done;
    }
    res.set_header("ETag", v->etag);
    res.set_header("Last-Modified", v->last_modified);
    res.set_header("Accept-Ranges", "bytes");
    // Mirrored bytes are an upstream's, served from our origin (beside
    // /status and /api): never sniffed into something else, and any HTML or
    // SVG among them runs sandboxed, as an opaque origin with no script
    // that could read our answers (#35).
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Content-Security-Policy", "sandbox");
    bool not_modified = none_match(req, v->etag);
    if (!req.header("if-none-match")) {
      if (const std::string* ims = req.header("if-modified-since")) {
        auto since = http::parse_http_date(*ims);
        not_modified = since && v->modified <= *since;
      }
    }
    if (not_modified) {
      res.status = 304;
      return http::Disposition::done;
    }
    res.ranges = true;
    if (v->bytes) {
      res.set_shared(std::shared_ptr<const std::string>(v, v->bytes.get()), v->type);
      return http::Disposition::done;
    }
    if (!can_block) {
      return http::Disposition::blocking; // opening a file may wait on the disk
    }
    int fd = ::open(v->path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
      // Garbage collection rewrote the pack this view was read from: the
      // blob lives on elsewhere. Locate it again, once.
      {
        std::unique_lock lock(cache_mutex);
        resource_cache.erase(set + '\n' + uri);
      }
      const std::string etag = v->etag;
      v = content_view(set, uri, true, miss);
      if (!v || v->status != 200 || v->etag != etag) {
        res.status = 503; // the resource changed meanwhile: its headers are gone
        res.set_header("Retry-After", "1");
        return http::Disposition::done;
      }
      if (v->bytes) {
        res.set_shared(std::shared_ptr<const std::string>(v, v->bytes.get()), v->type);
        return http::Disposition::done;
      }
      fd = ::open(v->path.c_str(), O_RDONLY | O_CLOEXEC);
    }
    if (fd < 0) {
      res.status = 500;
      return http::Disposition::done;
    }
    res.set_file(std::make_shared<const http::OpenFile>(fd), v->size, v->type, v->offset);
    return http::Disposition::done;
  }

  // Framework Notification: one of our documents changed.
  void framework(const std::string& set, const std::string& loc, const char* capability, const char* change) {
    if (options.hub) {
      options.hub->framework(set, loc, capability, change);
    }
  }

  // ---- archives --------------------------------------------------------------

  // The bytes of a document we serve.
  static Result<std::string> bytes_of(const CachedDocument& doc) {
    if (doc.file.empty()) {
      return doc.body;
    }
    std::ifstream in(doc.file, std::ios::binary);
    std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      return make_error(ErrorKind::io, doc.file.string() + ": cannot be read");
    }
    return out;
  }

  // Stores a document's bytes as a blob (in the bucket too, with one).
  Result<store::BlobInfo> keep(const std::string& bytes) {
    auto info = blobs->put(bytes);
    if (!info) {
      return info;
    }
    if (auto r = blobs->upload({info->sha256}); !r) {
      return tl::unexpected(r.error());
    }
    return info;
  }

  // Stores a file's bytes as a blob, streamed (a Change Dump package may be
  // as large as dump_package_bytes), and in the bucket too, with one.
  Result<store::BlobInfo> keep_file(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      return make_error(ErrorKind::io, file.string() + ": cannot be read");
    }
    auto w = blobs->begin();
    if (!w) {
      return tl::unexpected(w.error());
    }
    std::vector<char> chunk(1 << 20);
    while (in) {
      in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      if (auto r = w->write(chunk.data(), static_cast<size_t>(in.gcount())); !r) {
        return tl::unexpected(r.error());
      }
    }
    if (in.bad()) {
      return make_error(ErrorKind::io, file.string() + ": cannot be read");
    }
    auto info = w->commit();
    if (!info) {
      return info;
    }
    if (auto r = blobs->upload({info->sha256}); !r) {
      return tl::unexpected(r.error());
    }
    return info;
  }

  // The parts of a set already archived as `kind`.
  Result<std::set<size_t>> archived_parts(const std::string& set, const char* kind) {
    auto have = options.archive->archived(set, kind);
    if (!have) {
      return tl::unexpected(have.error());
    }
    std::set<size_t> done;
    for (const auto& d : *have) {
      done.insert(d.part);
    }
    return done;
  }

  Result<void> archive_parts(const std::vector<store::Compaction>& plan) {
    if (!options.archive) {
      return {};
    }
    for (const auto& c : plan) {
      ClosedParts meta;
      std::shared_ptr<const DocumentMap> docs;
      {
        std::shared_lock lock(cache_mutex);
        auto it = closed_meta.find(c.set_name);
        if (it == closed_meta.end()) {
          continue;
        }
        meta = it->second;
        docs = documents;
      }
      auto done = archived_parts(c.set_name, "changelist");
      if (!done) {
        return tl::unexpected(done.error());
      }
      for (const auto& p : meta.parts) {
        if (p.n > c.parts || done->count(p.n)) {
          continue;
        }
        const std::string path = urls.path_of(p.url);
        auto it = docs->find(path);
        if (it == docs->end()) {
          return make_error(ErrorKind::conflict, "closed Change List part " + p.url + " is not at hand to archive");
        }
        auto bytes = bytes_of(*it->second);
        if (!bytes) {
          return tl::unexpected(bytes.error());
        }
        auto blob = keep(*bytes);
        if (!blob) {
          return tl::unexpected(blob.error());
        }
        store::ArchivedDocument d;
        d.url_path = path;
        d.set_name = c.set_name;
        d.kind = "changelist";
        d.part = p.n;
        d.from = p.from;
        d.until = p.until;
        d.sha256 = blob->sha256;
        d.length = blob->length;
        if (auto r = options.archive->put_archived({d}); !r) {
          return tl::unexpected(r.error());
        }
        framework(c.set_name, urls.change_list_archive(c.set_name), "changelist-archive", "updated");
      }
      if (auto r = archive_change_packages(c, meta); !r) {
        return r;
      }
    }
    return {};
  }

  // The blob holding a Change Dump file (package or manifest) of ours:
  // named in the database with shared dumps, else this node's file, kept.
  Result<store::SharedDumps::File> dump_file_blob(const std::string& url, const std::filesystem::path& local) {
    if (options.shared_dumps) {
      auto named = options.shared_dumps->file(urls.path_of(url));
      if (!named) {
        return tl::unexpected(named.error());
      }
      if (!*named) {
        return make_error(ErrorKind::conflict, url + " is not built yet: nothing archived, nothing compacted");
      }
      return **named;
    }
    std::error_code ec;
    if (local.empty() || !std::filesystem::exists(local, ec)) {
      return make_error(ErrorKind::conflict, url + " is not built yet: nothing archived, nothing compacted");
    }
    auto blob = keep_file(local);
    if (!blob) {
      return tl::unexpected(blob.error());
    }
    return store::SharedDumps::File{urls.path_of(url), blob->sha256, blob->length};
  }

  // With Change Dumps: the package of each part about to be compacted
  // stays at its URL, kept as a blob with its manifest, and an archived
  // Change Dump of that one package (archive/changedump-<n>.xml) is listed
  // by the set's Change Dump Archive. A package not yet built holds the
  // compaction back (the dumper builds it within seconds).
  Result<void> archive_change_packages(const store::Compaction& c, const ClosedParts& meta) {
    if (options.dump_dir.empty()) {
      return {};
    }
    auto done = archived_parts(c.set_name, "changedump");
    if (!done) {
      return tl::unexpected(done.error());
    }
    std::map<size_t, ChangePackage> built;
    {
      std::shared_lock lock(cache_mutex);
      if (auto it = change_packages.find(c.set_name); it != change_packages.end()) {
        for (const auto& p : it->second) {
          built[p.n] = p;
        }
      }
    }
    for (const auto& p : meta.parts) {
      if (p.n > c.parts || done->count(p.n)) {
        continue;
      }
      const std::string zip_url = urls.change_dump_package(c.set_name, p.n);
      const std::string manifest_url = urls.change_dump_manifest(c.set_name, p.n);
      const auto local = built.find(p.n);
      auto zip = dump_file_blob(zip_url, local == built.end() ? std::filesystem::path() : local->second.file);
      if (!zip) {
        return tl::unexpected(zip.error());
      }
      auto manifest =
          dump_file_blob(manifest_url, local == built.end() ? std::filesystem::path() : local->second.manifest_file);
      if (!manifest) {
        return tl::unexpected(manifest.error());
      }
      auto doc = keep(render_change_dump(urls, PublishedSet{c.set_name, {}}, {offered_package(p.n, p.from, p.until, *zip)},
                                         p.until));
      if (!doc) {
        return tl::unexpected(doc.error());
      }
      auto row = [&](const std::string& path, const char* kind, const std::string& sha256, uint64_t length) {
        store::ArchivedDocument d;
        d.url_path = path;
        d.set_name = c.set_name;
        d.kind = kind;
        d.part = p.n;
        d.from = p.from;
        d.until = p.until;
        d.sha256 = sha256;
        d.length = length;
        return d;
      };
      // The archived Change Dump last: the archive lists it only once its
      // package is there.
      if (auto r = options.archive->put_archived(
              {row(urls.path_of(zip_url), "changedump-package", zip->sha256, zip->length),
               row(urls.path_of(manifest_url), "changedump-package", manifest->sha256, manifest->length),
               row(urls.path_of(urls.archived_change_dump(c.set_name, p.n)), "changedump", doc->sha256, doc->length)});
          !r) {
        return tl::unexpected(r.error());
      }
      framework(c.set_name, urls.change_dump_archive(c.set_name), "changedump-archive", "updated");
    }
    return {};
  }

  // The lister: a snapshot of the set's Resource List into the archive
  // when the last one is older than the interval. The documents are those
  // just published, their URLs moved under archive/<snapshot>/.
  std::map<std::string, std::optional<rs::Timestamp>> last_snapshot; // lister only

  void snapshot_if_due(const std::string& set,
                       const std::vector<std::pair<std::string, std::shared_ptr<const CachedDocument>>>& docs,
                       rs::Timestamp at) {
    if (!options.archive || options.resource_list_archive_interval.count() == 0 || docs.empty()) {
      return;
    }
    auto known = last_snapshot.find(set);
    if (known == last_snapshot.end()) {
      auto have = options.archive->archived(set, "resourcelist");
      if (!have) {
        return; // asked again next pass
      }
      std::optional<rs::Timestamp> newest;
      for (const auto& d : *have) {
        if (d.is_index && d.at && (!newest || *d.at > *newest)) {
          newest = d.at;
        }
      }
      known = last_snapshot.emplace(set, newest).first;
    }
    if (known->second && at - *known->second < options.resource_list_archive_interval) {
      return;
    }
    // Named after its time: two nodes taking one in the same second write
    // the same names, and the second's is refused whole.
    std::string name = rs::format_w3c_datetime(std::chrono::time_point_cast<std::chrono::seconds>(at));
    name.erase(std::remove_if(name.begin(), name.end(), [](char ch) { return ch == '-' || ch == ':'; }), name.end());
    const std::string live_index = urls.resource_list(set);
    const std::string live_part_stem = urls.resource_list_part(set, 0);
    const std::string stem = live_part_stem.substr(0, live_part_stem.size() - 5); // ".../resourcelist-"
    std::vector<store::ArchivedDocument> out;
    for (const auto& [path, doc] : docs) {
      auto bytes = bytes_of(*doc);
      if (!bytes) {
        return;
      }
      // Every URL of the live list in its documents (the index naming its
      // parts, the parts their index) becomes the snapshot's.
      std::string text = std::move(*bytes);
      const std::string archived_stem = urls.archived_resource_list_part(set, name, 0);
      const std::string new_stem = archived_stem.substr(0, archived_stem.size() - 5);
      for (size_t pos = 0; (pos = text.find(stem, pos)) != std::string::npos;) {
        text.replace(pos, stem.size(), new_stem);
        pos += new_stem.size();
      }
      for (size_t pos = 0; (pos = text.find(live_index, pos)) != std::string::npos;) {
        const std::string to = urls.archived_resource_list(set, name);
        text.replace(pos, live_index.size(), to);
        pos += to.size();
      }
      auto blob = keep(text);
      if (!blob) {
        log::warn("", "Resource List of set '" + set + "' not archived: " + blob.error().message);
        return;
      }
      const bool index = path == urls.path_of(live_index);
      std::string archived_path = urls.path_of(urls.archived_resource_list(set, name));
      if (!index) {
        const size_t n = std::strtoul(path.c_str() + path.rfind('-') + 1, nullptr, 10);
        archived_path = urls.path_of(urls.archived_resource_list_part(set, name, n));
      }
      store::ArchivedDocument d;
      d.url_path = archived_path;
      d.set_name = set;
      d.kind = "resourcelist";
      d.snapshot = name;
      d.at = at;
      d.completed = now();
      d.is_index = index;
      d.sha256 = blob->sha256;
      d.length = blob->length;
      out.push_back(std::move(d));
    }
    // The list (or index) last: the archive names a snapshot only once
    // all of it is there.
    std::stable_partition(out.begin(), out.end(), [](const store::ArchivedDocument& d) { return !d.is_index; });
    if (auto r = options.archive->put_archived(out); !r) {
      log::warn("", "Resource List of set '" + set + "' not archived: " + r.error().message);
      return;
    }
    known->second = at;
    framework(set, urls.resource_list_archive(set), "resourcelist-archive", "updated");
    log::info("", "Resource List archived", {{"set", set}, {"snapshot", name}, {"documents", std::to_string(out.size())}});
  }

  // The set a path of ours is under ("/sets/<set>/..."), if any.
  std::optional<std::string> set_of_path(const std::string& path) const {
    const std::string head = prefix + "/sets/";
    if (path.compare(0, head.size(), head) != 0) {
      return std::nullopt;
    }
    const size_t slash = path.find('/', head.size());
    if (slash == std::string::npos) {
      return std::nullopt;
    }
    return path.substr(head.size(), slash - head.size());
  }

  // The archives of a set, and the documents they name: from the database
  // (any node archived them), the bytes from the blob store.
  std::optional<http::Disposition> serve_archive(const http::Request& req, http::Response& res,
                                                 const std::string& path, bool can_block) {
    auto set = set_of_path(path);
    if (!options.archive || !set) {
      return std::nullopt;
    }
    const bool cl_archive = path == urls.path_of(urls.change_list_archive(*set));
    const bool rl_archive = path == urls.path_of(urls.resource_list_archive(*set));
    const bool cd_archive = path == urls.path_of(urls.change_dump_archive(*set));
    const bool any_archive = cl_archive || rl_archive || cd_archive;
    const bool maybe_package = !any_archive && is_dump_file_path(path) && path.find("/changedump/") != std::string::npos;
    const bool archived_doc = !any_archive && (path.find("/changelist-") != std::string::npos ||
                                               path.find("/archive/") != std::string::npos || maybe_package);
    if (!any_archive && !archived_doc) {
      return std::nullopt;
    }
    {
      std::shared_lock lock(cache_mutex);
      if (!set_feeds.count(*set)) {
        return std::nullopt;
      }
      if (maybe_package) {
        // Only the packages of compacted parts are archived; the others are
        // this node's files or the shared dumps'.
        auto it = closed_meta.find(*set);
        size_t n = 0;
        if (it == closed_meta.end() ||
            std::sscanf(path.c_str() + path.rfind('/') + 1, "%zu", &n) != 1 || n > it->second.compacted) {
          return std::nullopt;
        }
      }
    }
    if (!can_block) {
      return http::Disposition::blocking; // the database
    }
    if (archived_doc) {
      auto d = options.archive->archived_document(path);
      if (!d) {
        res.status = 503;
        res.set_header("Retry-After", "5");
        return http::Disposition::done;
      }
      if (!*d) {
        return std::nullopt;
      }
      return serve_blob(res, path, (*d)->sha256);
    }
    auto rows = options.archive->archived(*set, cl_archive ? "changelist" : cd_archive ? "changedump" : "resourcelist");
    if (!rows) {
      res.status = 503;
      res.set_header("Retry-After", "5");
      return http::Disposition::done;
    }
    std::vector<ArchivedList> lists;
    if (cd_archive) {
      if (options.dump_dir.empty()) {
        return std::nullopt;
      }
      // An archived Change Dump per compacted part, then the live Change
      // Dump over the packages still published.
      for (const auto& r : *rows) {
        lists.push_back(ArchivedList{urls.archived_change_dump(*set, r.part), r.from, r.until, {}, {}});
      }
      std::shared_lock lock(cache_mutex);
      if (auto it = closed_meta.find(*set); it != closed_meta.end()) {
        const auto& parts = it->second.parts;
        if (!parts.empty()) {
          lists.push_back(ArchivedList{urls.change_dump(*set), parts.front().from, parts.back().until, {}, {}});
        }
      }
    } else if (cl_archive) {
      // The compacted parts, then the closed ones still published.
      size_t last = 0;
      for (const auto& r : *rows) {
        lists.push_back(ArchivedList{urls.change_list_part(*set, r.part), r.from, r.until, {}, {}});
        last = std::max(last, r.part);
      }
      std::shared_lock lock(cache_mutex);
      if (auto it = closed_meta.find(*set); it != closed_meta.end()) {
        for (const auto& p : it->second.parts) {
          if (p.n > last) {
            lists.push_back(ArchivedList{p.url, p.from, p.until, {}, {}});
          }
        }
      }
    } else {
      for (const auto& r : *rows) {
        if (r.is_index) {
          lists.push_back(ArchivedList{urls.archived_resource_list(*set, r.snapshot), {}, {}, r.at, r.completed});
        }
      }
    }
    const char* capability = cl_archive ? "changelist-archive" : cd_archive ? "changedump-archive" : "resourcelist-archive";
    auto doc = cached(render_archive(urls, *set, capability, lists), "application/xml");
    return serve_document(req, res, doc, can_block);
  }

  http::Disposition handle(const http::Request& req, http::Response& res, bool can_block) {
    // The hub and its topics (subscription requests are queued: nothing
    // here waits).
    if (options.hub && options.hub->handle(req, res)) {
      return http::Disposition::done;
    }
    if (req.method != "GET" && req.method != "HEAD") {
      res.status = 405;
      res.set_header("Allow", "GET, HEAD");
      return http::Disposition::done;
    }
    std::shared_ptr<const DocumentMap> docs;
    {
      std::shared_lock lock(cache_mutex);
      docs = documents;
    }
    auto path = percent_decode(req.path);
    if (!path) {
      res.status = 400;
      return http::Disposition::done;
    }
    if (auto it = docs->find(*path); it != docs->end()) {
      return serve_document(req, res, it->second, can_block);
    }
    if (options.shared_dumps) {
      if (auto d = serve_shared_dump_document(res, *path, can_block)) {
        return *d;
      }
    }
    if (auto d = serve_archive(req, res, *path, can_block)) {
      return *d;
    }
    std::shared_ptr<const std::map<std::string, std::filesystem::path>> files;
    {
      std::shared_lock lock(cache_mutex);
      files = dump_files;
    }
    if (auto it = files->find(*path); it != files->end()) {
      if (!can_block) {
        return http::Disposition::blocking; // opening a file may wait on the disk
      }
      const int fd = ::open(it->second.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        res.status = 404; // replaced by a newer generation meanwhile
        return http::Disposition::done;
      }
      struct stat st{};
      ::fstat(fd, &st);
      return serve_dump_bytes(res, fd, static_cast<size_t>(st.st_size), 0, it->second.extension() == ".xml");
    }
    if (options.shared_dumps && is_dump_file_path(*path)) {
      return serve_shared_file(res, *path, can_block);
    }
    // Resource paths carry a percent-encoded URI: parse the raw path.
    if (auto r = UrlScheme::parse_resource_path(req.path); r && req.path.compare(0, prefix.size(), prefix) == 0) {
      return serve_resource(req, res, r->first, r->second, can_block);
    }
    res.status = 404;
    return http::Disposition::done;
  }
};

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

#pragma once

// Republisher::Impl: the state the republisher's jobs share, and what each
// job does, defined in a file of its own:
//   document_renderer.cpp  the refresher: Source Description, capability lists,
//                          Change Lists, compaction
//   lister.cpp             Resource Lists, kept by the lister thread
//   dump_publisher.cpp     Resource and Change Dumps: building, sharing, serving
//   archives.cpp           the archives of Change Lists, Resource Lists and Change Dumps
//   server.cpp             the wiring: threads, start and stop, one handler per route
// The content server (content_server.h) and the stateless answers
// (responses.h) are components of their own. Not for use outside
// republisher/.

#include "republisher/server.h"

#include "common/log.h"
#include "common/percent.h"
#include "republisher/cached_document.h"
#include "republisher/content_server.h"
#include "republisher/dumps.h"
#include "republisher/resource_list_files.h"
#include "republisher/responses.h"
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

namespace server_detail {

// Processor time this thread has used.
inline std::chrono::nanoseconds thread_cpu_time() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

using DocumentMap = std::map<std::string, std::shared_ptr<const CachedDocument>>;


// Writes `bytes` to `path` through a temporary name of this process's own
// (a reader never sees a half-written file, and a second process writing
// the same document does not write into ours).
inline bool write_file(const std::filesystem::path& path, const std::string& bytes) {
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
inline std::unique_ptr<CachedDocument> in_files(const std::string& body, const std::filesystem::path& dir,
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
inline std::shared_ptr<const CachedDocument> cached_on_disk(std::string body, const std::filesystem::path& dir,
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

inline std::shared_ptr<const CachedDocument> cached_transient(std::string body, const std::filesystem::path& dir,
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
inline void remove_transient(const std::filesystem::path& dir) {
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
inline void report_failures(const std::vector<std::string>& failures, std::string& last, const std::string& error,
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
inline std::filesystem::path lists_folder(const std::filesystem::path& document_dir) {
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


} // namespace server_detail

// The names of server_detail the class below uses.
using server_detail::DocumentMap;
using server_detail::lists_folder;
using server_detail::remove_transient;

struct Republisher::Impl {
  std::shared_ptr<store::StoreReader> reader;
  std::shared_ptr<store::StoreReader> lookups; // content requests
  std::shared_ptr<store::BlobStore> blobs;
  PublishOptions options;
  UrlScheme urls;
  ContentServer content; // the resources we mirror (content_server.h)

  std::thread refresher;
  std::thread dumper;
  std::mutex stop_mutex;
  std::condition_variable stop_cv;
  bool stopping = false;
  bool refresh_requested = false;

  std::shared_mutex cache_mutex;
  std::shared_ptr<const DocumentMap> documents = std::make_shared<DocumentMap>();
  // Sources removed from the configuration, kept until purged: their sets'
  // documents and resources answer 410 Gone (under cache_mutex).
  std::shared_ptr<const std::set<std::string>> removed_sources = std::make_shared<std::set<std::string>>();
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
        urls(options.public_url), content(lookups, blobs, urls) {
    list_root = lists_folder(options.document_dir);
    if (!options.document_dir.empty()) {
      remove_transient(options.document_dir);
    }
  }

  ~Impl();

  // Renders every document when the store moved on since the last time.
  Result<void> refresh(bool force);
  // One set's documents into `docs`: its Capability List, dumps' documents
  // and Change Lists (refresher only).
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
  // The lister looks at the store now.
  void wake_lister();
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

  // What retention may compact: for each set, its closed Change List parts
  // that ended before `cutoff` (all of them up to the newest such).
  Republisher::Compactable compactable(rs::Timestamp cutoff);

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
  ListsPass lists_pass();

  Result<void> update_list(const PublishedSet& s, int64_t seq, rs::Timestamp at);

  // Serves `docs` as the Resource List of `set` from now on, in place of
  // what was served for it. True when the set had none.
  bool publish_list(const std::string& set,
      std::vector<std::pair<std::string, std::shared_ptr<const CachedDocument>>> docs);

  // The files the dumps name, by URL path (call with cache_mutex held).
  void publish_dump_files();

  // A file this node built, stored as a blob (with a remote tier, in the
  // bucket before this returns), named as served under `url_path`.
  Result<store::SharedDumps::File> share_file(const std::filesystem::path& file, const std::string& url_path);

  // Shared dumps: each set's Resource Dump is the one the database names,
  // whichever node built it. One is built here when the set has none, or
  // when it is due (older than resource_dump_interval while the set
  // changed); its packages go into the blob store and the local files go.
  // Two nodes may build at once: the later seq wins, and the one it
  // replaces stays served. True when a set's dump changed here.
  bool adopt_shared_resource_dumps(const std::vector<store::FeedInfo>& feeds, int64_t seq, const DumpOptions& o);

  // Whether a set whose shared Resource Dump is `dump` (null: none) needs
  // a new one: none yet, or it is older than resource_dump_interval and
  // the store moved on since.
  bool shared_dump_due(const store::SharedDumps::ResourceDump* dump, int64_t seq,
      std::chrono::system_clock::time_point now) const;

  // Builds the set's Resource Dump and records it as the shared one, unless
  // another node is building it, or built it while this one looked (false
  // then).
  bool build_shared_resource_dump(const PublishedSet& set, int64_t seq, const DumpOptions& o);

  // Shared dumps: Change Dump package `n` of the set as the database names
  // it, built here (and stored as blobs, the local files removed) when no
  // node has yet. Packages of a closed part hold the same changes
  // whichever node builds them; the first one named is the one served.
  Result<ChangePackage> shared_change_package(const PublishedSet& set, const DumpOptions& o, size_t n,
      const ClosedParts::Part& part, int64_t after_seq, size_t part_size);

  // This node's own Resource Dumps (no shared bucket): built for each set
  // that has none, or whose dump is due; true when one changed.
  bool build_local_resource_dumps(const std::vector<store::FeedInfo>& feeds, int64_t seq, const DumpOptions& o);

  // Builds the Resource Dumps that are missing or due; tells the refresher
  // to publish them.
  void build_due_dumps();

  // The Resource Dump or Change Dump of a set when another node's
  // Capability List offered it and this one has not taken it up yet (its
  // dumper looks every 2 s): read from the database, so that a client
  // behind a load balancer finds what one node offered on any other.
  // nullopt: `path` is neither.
  std::optional<http::Disposition> serve_shared_dump_document(http::Response& res, const Route& route,
      bool can_block);

  // A package as our Change Dump lists it, from its part and the blob
  // holding its ZIP.
  static ChangePackage offered_package(size_t n, rs::Timestamp from, rs::Timestamp until,
      const store::SharedDumps::File& zip);

  // A dump package (or Change Dump manifest) another node may have built:
  // named in the database, its bytes in the blob store (fetched from the
  // bucket when this node lacks them).
  http::Disposition serve_shared_file(http::Response& res, const std::string& path, bool can_block);


  // Framework Notification: one of our documents changed.
  void notify_framework(const std::string& set, const std::string& loc, const char* capability, const char* change);

  // ---- archives --------------------------------------------------------------

  // The bytes of a document we serve.
  static Result<std::string> bytes_of(const CachedDocument& doc);

  // Stores a document's bytes as a blob (in the bucket too, with one).
  Result<store::BlobInfo> keep_as_blob(const std::string& bytes);

  // Stores a file's bytes as a blob, streamed (a Change Dump package may be
  // as large as dump_package_bytes), and in the bucket too, with one.
  Result<store::BlobInfo> keep_file(const std::filesystem::path& file);

  // The parts of a set already archived as `kind`.
  Result<std::set<size_t>> archived_parts(const std::string& set, const char* kind);

  Result<void> archive_parts(const std::vector<store::Compaction>& plan);

  // The blob holding a Change Dump file (package or manifest) of ours:
  // named in the database with shared dumps, else this node's file, kept.
  Result<store::SharedDumps::File> dump_file_blob(const std::string& url, const std::filesystem::path& local);

  // With Change Dumps: the package of each part about to be compacted
  // stays at its URL, kept as a blob with its manifest, and an archived
  // Change Dump of that one package (archive/changedump-<n>.xml) is listed
  // by the set's Change Dump Archive. A package not yet built holds the
  // compaction back (the dumper builds it within seconds).
  Result<void> archive_change_packages(const store::Compaction& c, const ClosedParts& meta);

  // The lister: a snapshot of the set's Resource List into the archive
  // when the last one is older than the interval. The documents are those
  // just published, their URLs moved under archive/<snapshot>/.
  std::map<std::string, std::optional<rs::Timestamp>> last_snapshot; // lister only

  void snapshot_if_due(const std::string& set,
      const std::vector<std::pair<std::string, std::shared_ptr<const CachedDocument>>>& docs, rs::Timestamp at);

  // The archives of a set, and the documents they name: from the database
  // (any node archived them), the bytes from the blob store.
  std::optional<http::Disposition> serve_archive(const http::Request& req, http::Response& res, const Route& route,
      bool can_block);

  // ---- the request path --------------------------------------------------------

  // A request: its path routed once (UrlScheme::route), the hub's kinds to
  // the hub, the kinds that wait on the disk or the database to a worker at
  // once, then one handler per kind; a 404 under a removed set becomes 410.
  http::Disposition handle(const http::Request& req, http::Response& res, bool can_block);
  http::Disposition serve_route(const http::Request& req, http::Response& res, const Route& route, bool can_block);
  // A document of the rendered set (the refresher's and the lister's), by
  // decoded path; nullopt when there is none.
  std::optional<http::Disposition> serve_rendered(const http::Request& req, http::Response& res,
      const std::string& path, bool can_block);
  // A dump package or manifest: this node's file, else (with shared dumps)
  // the one another node built.
  http::Disposition serve_dump_file(http::Response& res, const Route& route, bool can_block);
  // Whether `set` belongs to a source removed from this aggregator.
  bool removed_set(const std::string& set);
};

} // namespace tributary::pub

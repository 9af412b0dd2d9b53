#include "republisher/dump_builder.h"

#include "common/stop_and_join.h"

#include "common/log.h"
#include "common/thread_name.h"
#include "common/thread_priority.h"
#include "republisher/responses.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cstdio>
#include <limits>

namespace tributary::pub {

DumpBuilder::DumpBuilder(const PublishOptions& options, std::shared_ptr<store::StoreReader> reader,
                         std::shared_ptr<store::BlobStore> blobs, const UrlScheme& urls, Shelf& shelf,
                         std::function<void()> changed)
    : m_options(options), m_reader(std::move(reader)), m_blobs(std::move(blobs)), m_urls(urls), m_shelf(shelf),
      m_changed(std::move(changed)) {}

DumpBuilder::~DumpBuilder() { stop(); }

void DumpBuilder::start() {
  if (m_options.dump_dir.empty() || m_options.resource_dump_interval.count() <= 0) {
    return;
  }
  m_thread = std::thread([this] {
    name_thread("dump builder");
    // Packing our dumps may wait for a busy machine (a baseline of a million
    // wants both cores): the syncs and the other documents go first, and the
    // Change Dump catches up once they leave the processor free.
    yield_to_foreground();
    std::unique_lock lock(m_mutex);
    do {
      lock.unlock();
      build_due();
      lock.lock();
    } while (!m_cv.wait_for(lock, std::chrono::seconds(2), [this] { return m_stopping; }));
  });
}

void DumpBuilder::stop() {
  stop_and_join(m_mutex, m_stopping, m_cv, m_thread);
}

auto DumpBuilder::publish() -> void {
  auto view = std::make_shared<DumpsView>();
  for (const auto& [name, dump] : m_dumps) {
    view->resource_dumps[name] = dump.built.document;
    view->files.insert(dump.built.files.begin(), dump.built.files.end());
  }
  for (const auto& [name, packages] : m_change_packages) {
    view->change_packages[name] = packages;
    for (const auto& p : packages) {
      if (p.file.empty()) {
        continue; // shared: served from the blob store
      }
      view->files[m_urls.path_of(m_urls.change_dump_package(name, p.n))] = p.file;
      view->files[m_urls.path_of(m_urls.change_dump_manifest(name, p.n))] = p.manifest_file;
    }
  }
  m_shelf.put(std::shared_ptr<const DumpsView>(std::move(view)));
}

auto DumpBuilder::share_file(const std::filesystem::path& file,
    const std::string& url_path) -> Result<store::SharedDumps::File> {
  auto info = m_blobs->put_file(file);
  if (!info) {
    return tl::unexpected(info.error());
  }
  return store::SharedDumps::File{url_path, info->sha256, info->length};
}

auto DumpBuilder::adopt_shared_resource_dumps(const std::vector<store::FeedInfo>& feeds, int64_t seq,
    const DumpOptions& o) -> bool {
  auto& shared = *m_options.shared_dumps;
  auto listed = shared.resource_dumps();
  if (!listed) {
    m_warnings.warn("", "shared Resource Dumps not read: " + listed.error().message);
    return false;
  }
  std::map<std::string, store::SharedDumps::ResourceDump> current(listed->begin(), listed->end());
  const auto now = std::chrono::system_clock::now();
  bool changed = false;
  for (const auto& set : published_sets(feeds, m_options.named_sets)) {
    auto it = current.find(set.name);
    const store::SharedDumps::ResourceDump* theirs_now = it == current.end() ? nullptr : &it->second;
    if (shared_dump_due(theirs_now, seq, now) && build_shared_resource_dump(set, seq, o)) {
      // built and recorded here
    } else if (theirs_now) {
      auto mine = m_dumps.find(set.name);
      if (mine != m_dumps.end() && mine->second.built.generation == theirs_now->generation) {
        continue; // served already
      }
    }
    auto theirs = shared.resource_dump(set.name);
    if (!theirs || !*theirs) {
      continue;
    }
    SetDump& d = m_dumps[set.name];
    if (d.built.generation != (*theirs)->generation) {
      d.previous_generation = d.built.generation;
      d.built = BuiltDump{(*theirs)->generation, std::move((*theirs)->document), {}};
      d.seq = (*theirs)->seq;
      changed = true;
    }
  }
  if (changed) {
    publish();
  }
  return changed;
}

auto DumpBuilder::shared_dump_due(const store::SharedDumps::ResourceDump* dump, int64_t seq,
    std::chrono::system_clock::time_point now) const -> bool {
  return !dump || (dump->seq != seq && now - dump->built_at >= m_options.resource_dump_interval);
}

auto DumpBuilder::build_shared_resource_dump(const PublishedSet& set, int64_t seq, const DumpOptions& o) -> bool {
  auto& shared = *m_options.shared_dumps;
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
  auto built = build_resource_dump(*m_reader, *m_blobs, m_urls, set, o, pub::now());
  if (!built) {
    m_warnings.warn("", "Resource Dump of set '" + set.name + "' not built: " + built.error().message);
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
      m_warnings.warn("", "Resource Dump of set '" + set.name + "' not stored: " + f.error().message);
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
    m_warnings.warn("", "Resource Dump of set '" + set.name + "' not recorded: " + put.error().message);
    return false;
  }
  return true;
}

auto DumpBuilder::shared_change_package(const PublishedSet& set, const DumpOptions& o, size_t n,
    const ClosedParts::Part& part, int64_t after_seq, size_t part_size) -> Result<ChangePackage> {
  auto& shared = *m_options.shared_dumps;
  const std::string zip_url = m_urls.change_dump_package(set.name, n);
  const std::string manifest_url = m_urls.change_dump_manifest(set.name, n);
  auto zip = shared.file(m_urls.path_of(zip_url));
  if (!zip) {
    return tl::unexpected(zip.error());
  }
  if (!*zip) {
    auto pkg = build_change_package(*m_reader, *m_blobs, m_urls, set, o, n, part, after_seq, part_size);
    if (!pkg) {
      return tl::unexpected(pkg.error());
    }
    auto zip_file = share_file(pkg->file, m_urls.path_of(zip_url));
    auto manifest_file = share_file(pkg->manifest_file, m_urls.path_of(manifest_url));
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
    zip = shared.file(m_urls.path_of(zip_url)); // ours, or the one another node named first
    if (!zip || !*zip) {
      return make_error(ErrorKind::io, zip_url + ": recorded, then not found");
    }
  }
  return offered_change_package(n, part.from, part.until, **zip);
}

auto DumpBuilder::build_local_resource_dumps(const std::vector<store::FeedInfo>& feeds, int64_t seq,
    const DumpOptions& o) -> bool {
  const auto now = std::chrono::steady_clock::now();
  bool changed = false;
  for (const auto& set : published_sets(feeds, m_options.named_sets)) {
    std::string previous;
    if (auto it = m_dumps.find(set.name); it != m_dumps.end()) {
      if (it->second.seq == seq || now - it->second.built_at < m_options.resource_dump_interval) {
        continue;
      }
      previous = it->second.built.generation;
    }
    const rs::Timestamp at = pub::now();
    auto built = build_resource_dump(*m_reader, *m_blobs, m_urls, set, o, at);
    if (!built) {
      m_warnings.warn("", "Resource Dump of set '" + set.name + "' not built: " + built.error().message);
      continue;
    }
    if (built->files.empty()) {
      // Nothing held (yet, or any more): no dump is offered, since a
      // client would find no package in it; tried again next time.
      remove_old_generations(o, set.name, {});
      if (m_dumps.erase(set.name) > 0) {
        publish();
        changed = true;
      }
      continue;
    }
    std::vector<std::string> keep{built->generation};
    if (!previous.empty()) {
      keep.push_back(previous); // downloads of the last one in progress may finish
    }
    SetDump& d = m_dumps[set.name];
    d.previous_generation = previous;
    d.built = std::move(*built);
    d.built_at = now;
    d.seq = seq;
    publish(); // before the older generations go
    remove_old_generations(o, set.name, keep);
    notify_framework(m_options.hub, set.name, m_urls.resource_dump(set.name), "resourcedump",
                     previous.empty() ? "created" : "updated");
    changed = true;
  }
  return changed;
}

auto DumpBuilder::build_due() -> void {
  auto seq = m_reader->last_seq();
  auto feeds = m_reader->feeds();
  if (!seq || !feeds) {
    return;
  }
  DumpOptions o;
  o.dir = m_options.dump_dir;
  o.package_entries = m_options.dump_package_entries;
  o.package_bytes = m_options.dump_package_bytes;
  bool changed = m_options.shared_dumps ? adopt_shared_resource_dumps(*feeds, *seq, o)
                                      : build_local_resource_dumps(*feeds, *seq, o);
  // Change Dump: a package for every closed Change List part not yet packed.
  const auto rendered = m_shelf.rendered();
  const auto& meta = rendered->closed;
  for (const auto& set : published_sets(*feeds, m_options.named_sets)) {
    auto it = meta.find(set.name);
    if (it == meta.end()) {
      continue;
    }
    const ClosedParts& parts = *it->second;
    size_t have = 0;
    {
      auto& built = m_change_packages[set.name];
      // Packages of parts that retention compacted go with them: the
      // content of changes behind the horizon is no longer offered.
      if (m_options.shared_dumps && !built.empty() && built.front().n <= parts.compacted) {
        if (auto r = m_options.shared_dumps->drop_change_packages(set.name, parts.compacted); !r) {
          m_warnings.warn("", "Change Dump packages of set '" + set.name + "' not dropped: " + r.error().message);
        }
      }
      while (!built.empty() && built.front().n <= parts.compacted) {
        std::error_code ec;
        std::filesystem::remove(built.front().file, ec);
        std::filesystem::remove(built.front().manifest_file, ec);
        built.erase(built.begin());
        publish();
        changed = true;
      }
      if (!built.empty() && (built.size() > parts.parts.size() || built.front().n != parts.parts.front().n ||
                             built.back().until != parts.parts[built.size() - 1].until)) {
        built.clear(); // the parts were renumbered (other feeds or part size): pack again
        std::error_code ec;
        std::filesystem::remove_all(o.dir / set.name / "changes", ec);
        if (m_options.shared_dumps) {
          (void)m_options.shared_dumps->drop_change_packages(set.name, std::numeric_limits<int32_t>::max());
        }
        publish();
      }
      have = built.size();
    }
    if (parts.compacted > m_packages_compacted[set.name]) {
      // Packages of compacted parts that an earlier process left.
      std::error_code ec;
      for (const auto& f : std::filesystem::directory_iterator(o.dir / set.name / "changes", ec)) {
        size_t n = 0;
        if (std::sscanf(f.path().filename().c_str(), "%zu", &n) == 1 && n <= parts.compacted) {
          std::filesystem::remove(f.path(), ec);
        }
      }
      m_packages_compacted[set.name] = parts.compacted;
    }
    for (size_t i = have; i < parts.parts.size(); ++i) {
      const size_t n = parts.parts[i].n;
      const int64_t after = i == 0 ? parts.compacted_seq : parts.parts[i - 1].last_seq;
      auto pkg = m_options.shared_dumps
                     ? shared_change_package(set, o, n, parts.parts[i], after, parts.part_size)
                     : build_change_package(*m_reader, *m_blobs, m_urls, set, o, n, parts.parts[i], after,
                                            parts.part_size);
      if (!pkg) {
        m_warnings.warn("", "Change Dump package " + std::to_string(n) + " of set '" + set.name +
                          "' not built: " + pkg.error().message);
        break;
      }
      m_change_packages[set.name].push_back(std::move(*pkg));
      publish();
      changed = true;
    }
  }
  if (changed && m_changed) {
    m_changed(); // the Capability Lists offer what changed
  }
}

auto DumpBuilder::serve_shared_document(http::Response& res, const Route& route,
    bool can_block) const -> std::optional<http::Disposition> {
  if (route.kind != RouteKind::resource_dump && route.kind != RouteKind::change_dump) {
    return std::nullopt;
  }
  const std::string& set = route.set;
  const bool resource = route.kind == RouteKind::resource_dump;
  if (!can_block) {
    return http::Disposition::blocking; // asks the database
  }
  std::optional<std::string> document;
  if (resource) {
    auto d = m_options.shared_dumps->resource_dump(set);
    if (!d) {
      return unavailable(res);
    }
    if (*d) {
      document = std::move((*d)->document);
    }
  } else {
    auto named = m_options.shared_dumps->change_packages(set);
    if (!named) {
      return unavailable(res);
    }
    if (!named->empty()) {
      std::vector<ChangePackage> packages;
      for (const auto& p : *named) {
        packages.push_back(offered_change_package(p.part, p.from, p.until, p.zip));
      }
      document = render_change_dump(m_urls, PublishedSet{set, {}}, packages);
    }
  }
  if (!document) {
    res.status = 404;
    return http::Disposition::done;
  }
  res.set_shared(std::make_shared<const std::string>(std::move(*document)), "application/xml");
  return http::Disposition::done;
}

auto DumpBuilder::serve_shared_file(http::Response& res, const std::string& path,
    bool can_block) const -> http::Disposition {
  if (!can_block) {
    return http::Disposition::blocking; // asks the database, may fetch from the bucket
  }
  auto named = m_options.shared_dumps->file(path);
  if (!named) {
    return unavailable(res);
  }
  if (!*named) {
    res.status = 404;
    return http::Disposition::done;
  }
  return serve_blob(res, *m_blobs, path, (*named)->sha256);
}

auto DumpBuilder::serve_file(http::Response& res, const Route& route, bool can_block) const -> http::Disposition {
  const auto dumps = m_shelf.dumps();
  if (auto it = dumps->files.find(route.path); it != dumps->files.end()) {
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
    return serve_file_bytes(res, fd, static_cast<size_t>(st.st_size), 0, it->second.extension() == ".xml");
  }
  if (m_options.shared_dumps) {
    return serve_shared_file(res, route.path, can_block);
  }
  res.status = 404;
  return http::Disposition::done;
}

} // namespace tributary::pub

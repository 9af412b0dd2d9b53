#include "republisher/archive_keeper.h"

#include "common/log.h"
#include "republisher/responses.h"

#include <algorithm>
#include <cstdio>

namespace tributary::pub {

auto ArchiveKeeper::archived_parts(const std::string& set, const char* kind) -> Result<std::set<size_t>> {
  auto have = m_options.archive->archived(set, kind);
  if (!have) {
    return tl::unexpected(have.error());
  }
  std::set<size_t> done;
  for (const auto& d : *have) {
    done.insert(d.part);
  }
  return done;
}

auto ArchiveKeeper::archive_parts(const std::vector<store::Compaction>& plan) -> Result<void> {
  if (!m_options.archive) {
    return {};
  }
  for (const auto& c : plan) {
    const auto view = m_shelf.rendered();
    auto closed = view->closed.find(c.set_name);
    if (closed == view->closed.end()) {
      continue;
    }
    const ClosedParts& meta = *closed->second;
    const DocumentMap* docs = &view->documents;
    auto done = archived_parts(c.set_name, "changelist");
    if (!done) {
      return tl::unexpected(done.error());
    }
    for (const auto& p : meta.parts) {
      if (p.n > c.parts || done->count(p.n)) {
        continue;
      }
      const std::string path = m_urls.path_of(p.url);
      auto it = docs->find(path);
      if (it == docs->end()) {
        return make_error(ErrorKind::conflict, "closed Change List part " + p.url + " is not at hand to archive");
      }
      auto bytes = bytes_of(*it->second);
      if (!bytes) {
        return tl::unexpected(bytes.error());
      }
      auto blob = m_blobs->put(*bytes);
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
      if (auto r = m_options.archive->put_archived({d}); !r) {
        return tl::unexpected(r.error());
      }
      notify_framework(m_options.hub, c.set_name, m_urls.change_list_archive(c.set_name), "changelist-archive",
                       "updated");
    }
    if (auto r = archive_change_packages(c, meta); !r) {
      return r;
    }
  }
  return {};
}

auto ArchiveKeeper::dump_file_blob(const std::string& url,
    const std::filesystem::path& local) -> Result<store::SharedDumps::File> {
  if (m_options.shared_dumps) {
    auto named = m_options.shared_dumps->file(m_urls.path_of(url));
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
  auto blob = m_blobs->put_file(local);
  if (!blob) {
    return tl::unexpected(blob.error());
  }
  return store::SharedDumps::File{m_urls.path_of(url), blob->sha256, blob->length};
}

auto ArchiveKeeper::archive_change_packages(const store::Compaction& c, const ClosedParts& meta) -> Result<void> {
  if (m_options.dump_dir.empty()) {
    return {};
  }
  auto done = archived_parts(c.set_name, "changedump");
  if (!done) {
    return tl::unexpected(done.error());
  }
  std::map<size_t, ChangePackage> built;
  const auto dumps = m_shelf.dumps();
  if (auto it = dumps->change_packages.find(c.set_name); it != dumps->change_packages.end()) {
    for (const auto& p : it->second) {
      built[p.n] = p;
    }
  }
  for (const auto& p : meta.parts) {
    if (p.n > c.parts || done->count(p.n)) {
      continue;
    }
    const std::string zip_url = m_urls.change_dump_package(c.set_name, p.n);
    const std::string manifest_url = m_urls.change_dump_manifest(c.set_name, p.n);
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
    auto doc = m_blobs->put(render_change_dump(m_urls, PublishedSet{c.set_name, {}},
                                               {offered_change_package(p.n, p.from, p.until, *zip)}, p.until));
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
    if (auto r = m_options.archive->put_archived(
            {row(m_urls.path_of(zip_url), "changedump-package", zip->sha256, zip->length),
             row(m_urls.path_of(manifest_url), "changedump-package", manifest->sha256, manifest->length),
             row(m_urls.path_of(m_urls.archived_change_dump(c.set_name, p.n)), "changedump", doc->sha256, doc->length)});
        !r) {
      return tl::unexpected(r.error());
    }
    notify_framework(m_options.hub, c.set_name, m_urls.change_dump_archive(c.set_name), "changedump-archive",
                     "updated");
  }
  return {};
}

auto ArchiveKeeper::snapshot_if_due(const std::string& set,
    const std::vector<std::pair<std::string, std::shared_ptr<const CachedDocument>>>& docs, rs::Timestamp at) -> void {
  if (!m_options.archive || m_options.resource_list_archive_interval.count() == 0 || docs.empty()) {
    return;
  }
  auto known = m_last_snapshot.find(set);
  if (known == m_last_snapshot.end()) {
    auto have = m_options.archive->archived(set, "resourcelist");
    if (!have) {
      return; // asked again next pass
    }
    std::optional<rs::Timestamp> newest;
    for (const auto& d : *have) {
      if (d.is_index && d.at && (!newest || *d.at > *newest)) {
        newest = d.at;
      }
    }
    known = m_last_snapshot.emplace(set, newest).first;
  }
  if (known->second && at - *known->second < m_options.resource_list_archive_interval) {
    return;
  }
  // Named after its time: two nodes taking one in the same second write
  // the same names, and the second's is refused whole.
  std::string name = rs::format_w3c_datetime(std::chrono::time_point_cast<std::chrono::seconds>(at));
  name.erase(std::remove_if(name.begin(), name.end(), [](char ch) { return ch == '-' || ch == ':'; }), name.end());
  const std::string live_index = m_urls.resource_list(set);
  const std::string live_part_stem = m_urls.resource_list_part(set, 0);
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
    const std::string archived_stem = m_urls.archived_resource_list_part(set, name, 0);
    const std::string new_stem = archived_stem.substr(0, archived_stem.size() - 5);
    for (size_t pos = 0; (pos = text.find(stem, pos)) != std::string::npos;) {
      text.replace(pos, stem.size(), new_stem);
      pos += new_stem.size();
    }
    for (size_t pos = 0; (pos = text.find(live_index, pos)) != std::string::npos;) {
      const std::string to = m_urls.archived_resource_list(set, name);
      text.replace(pos, live_index.size(), to);
      pos += to.size();
    }
    auto blob = m_blobs->put(text);
    if (!blob) {
      log::warn("", "Resource List of set '" + set + "' not archived: " + blob.error().message);
      return;
    }
    const bool index = path == m_urls.path_of(live_index);
    std::string archived_path = m_urls.path_of(m_urls.archived_resource_list(set, name));
    if (!index) {
      const size_t n = std::strtoul(path.c_str() + path.rfind('-') + 1, nullptr, 10);
      archived_path = m_urls.path_of(m_urls.archived_resource_list_part(set, name, n));
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
  if (auto r = m_options.archive->put_archived(out); !r) {
    log::warn("", "Resource List of set '" + set + "' not archived: " + r.error().message);
    return;
  }
  known->second = at;
  notify_framework(m_options.hub, set, m_urls.resource_list_archive(set), "resourcelist-archive", "updated");
  log::info("", "Resource List archived", {{"set", set}, {"snapshot", name}, {"documents", std::to_string(out.size())}});
}

auto ArchiveKeeper::serve(const http::Request& req, http::Response& res, const Route& route,
    bool can_block) const -> std::optional<http::Disposition> {
  if (!m_options.archive || route.set.empty()) {
    return std::nullopt;
  }
  const std::string& path = route.path;
  const std::string* set = &route.set;
  const bool cl_archive = route.kind == RouteKind::change_list_archive;
  const bool rl_archive = route.kind == RouteKind::resource_list_archive;
  const bool cd_archive = route.kind == RouteKind::change_dump_archive;
  const bool maybe_package =
      route.kind == RouteKind::change_dump_package || route.kind == RouteKind::change_dump_manifest;
  const bool archived_doc = route.kind == RouteKind::change_list_part ||
                            route.kind == RouteKind::archived_change_dump ||
                            route.kind == RouteKind::archived_resource_list ||
                            route.kind == RouteKind::archived_resource_list_part || maybe_package;
  if (!cl_archive && !rl_archive && !cd_archive && !archived_doc) {
    return std::nullopt;
  }
  const auto view = m_shelf.rendered();
  if (!view->set_feeds->count(*set)) {
    return std::nullopt;
  }
  const auto closed = view->closed.find(*set);
  if (maybe_package) {
    // Only the packages of compacted parts are archived; the others are
    // this node's files or the shared dumps'.
    size_t n = 0;
    if (closed == view->closed.end() || std::sscanf(route.part.c_str(), "%zu", &n) != 1 ||
        n > closed->second->compacted) {
      return std::nullopt;
    }
  }
  if (!can_block) {
    return http::Disposition::blocking; // the database
  }
  if (archived_doc) {
    auto d = m_options.archive->archived_document(path);
    if (!d) {
      return unavailable(res);
    }
    if (!*d) {
      return std::nullopt;
    }
    return serve_blob(res, *m_blobs, path, (*d)->sha256);
  }
  auto rows = m_options.archive->archived(*set, cl_archive ? "changelist" : cd_archive ? "changedump" : "resourcelist");
  if (!rows) {
    return unavailable(res);
  }
  std::vector<ArchivedList> lists;
  if (cd_archive) {
    if (m_options.dump_dir.empty()) {
      return std::nullopt;
    }
    // An archived Change Dump per compacted part, then the live Change
    // Dump over the packages still published.
    for (const auto& r : *rows) {
      lists.push_back(ArchivedList{m_urls.archived_change_dump(*set, r.part), r.from, r.until, {}, {}});
    }
    if (closed != view->closed.end()) {
      const auto& parts = closed->second->parts;
      if (!parts.empty()) {
        lists.push_back(ArchivedList{m_urls.change_dump(*set), parts.front().from, parts.back().until, {}, {}});
      }
    }
  } else if (cl_archive) {
    // The compacted parts, then the closed ones still published.
    size_t last = 0;
    for (const auto& r : *rows) {
      lists.push_back(ArchivedList{m_urls.change_list_part(*set, r.part), r.from, r.until, {}, {}});
      last = std::max(last, r.part);
    }
    if (closed != view->closed.end()) {
      for (const auto& p : closed->second->parts) {
        if (p.n > last) {
          lists.push_back(ArchivedList{p.url, p.from, p.until, {}, {}});
        }
      }
    }
  } else {
    for (const auto& r : *rows) {
      if (r.is_index) {
        lists.push_back(ArchivedList{m_urls.archived_resource_list(*set, r.snapshot), {}, {}, r.at, r.completed});
      }
    }
  }
  const char* capability = cl_archive ? "changelist-archive" : cd_archive ? "changedump-archive" : "resourcelist-archive";
  auto doc = cached(render_archive(m_urls, *set, capability, lists), "application/xml");
  return serve_document(req, res, doc, can_block);
}

} // namespace tributary::pub

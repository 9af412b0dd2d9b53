// The simulated Source's resources and documents: its changes, Resource
// List, Change Lists, Resource Dump and Change Dumps, rendered from memory.
#include "tools/simulate/simulator_impl.h"

namespace tributary::agg {

using namespace simulate_detail;

auto Simulator::Impl::content(uint64_t id, uint32_t version) const -> std::string {
  std::string s = "resource " + std::to_string(id) + " version " + std::to_string(version) + "\n";
  uint64_t x = splitmix(options.seed ^ (id << 20) ^ version);
  while (s.size() < options.size) {
    x = splitmix(x);
    for (int i = 0; i < 8 && s.size() < options.size; ++i) {
      s.push_back(static_cast<char>('a' + ((x >> (i * 8)) & 0xff) % 26));
    }
  }
  s.resize(std::max<size_t>(options.size, 1));
  return s;
}

auto Simulator::Impl::next_time() -> rs::Timestamp {
  rs::Timestamp t = now_us();
  if (t <= last_time) {
    t = last_time + std::chrono::microseconds(1);
  }
  last_time = t;
  return t;
}

auto Simulator::Impl::set_live(uint64_t id, bool live) -> void {
  if (live && live_pos[id] == k_none) {
    live_pos[id] = live_ids.size();
    live_ids.push_back(id);
  } else if (!live && live_pos[id] != k_none) {
    const uint64_t last = live_ids.back();
    live_ids[live_pos[id]] = last;
    live_pos[last] = live_pos[id];
    live_ids.pop_back();
    live_pos[id] = k_none;
  }
  resources[id].live = live;
}

auto Simulator::Impl::write_version(uint64_t id, rs::Timestamp at) -> void {
  Resource& r = resources[id];
  ++r.version;
  r.lastmod = at;
  r.md5 = rs::hash_hex(rs::HashAlgorithm::md5, content(id, r.version));
}

auto Simulator::Impl::change_one() -> void {
  const double r = std::uniform_real_distribution<double>(0, 1)(rng);
  const rs::Timestamp at = next_time();
  if (r < 0.2 || live_ids.empty()) {
    const uint64_t id = resources.size();
    resources.emplace_back();
    live_pos.push_back(k_none);
    write_version(id, at);
    set_live(id, true);
    log.push_back({id, resources[id].version, rs::Change::created, at});
    return;
  }
  const uint64_t id = live_ids[std::uniform_int_distribution<size_t>(0, live_ids.size() - 1)(rng)];
  if (r < 0.35 && live_ids.size() > 1) {
    set_live(id, false);
    resources[id].lastmod = at;
    log.push_back({id, resources[id].version, rs::Change::deleted, at});
    return;
  }
  write_version(id, at);
  log.push_back({id, resources[id].version, rs::Change::updated, at});
}

auto Simulator::Impl::entry_of(uint64_t id, const Resource& r) const -> rs::Entry {
  rs::Entry e;
  e.loc = url("/res/" + std::to_string(id));
  e.lastmod = r.lastmod;
  e.md = rs::Metadata{};
  e.md->hash = {rs::HashValue{"md5", r.md5}};
  e.md->length = options.size;
  e.md->type = "text/plain";
  if (options.mirror) {
    e.links.push_back(rs::Link{.rel = "duplicate", .href = url("/mirror/res/" + std::to_string(id)), .pri = 1});
  }
  return e;
}

auto Simulator::Impl::header(const char* capability, rs::RootElement root) const -> rs::DocumentHeader {
  rs::DocumentHeader h;
  h.root = root;
  h.md = rs::Metadata{};
  h.md->capability = capability;
  return h;
}

auto Simulator::Impl::source_description() const -> std::string {
  rs::Document d;
  d.header = header("description");
  d.header.links.push_back(rs::Link{.rel = "describedby", .href = url("/about")});
  rs::Entry e;
  e.loc = url("/capabilitylist.xml");
  e.md = rs::Metadata{};
  e.md->capability = "capabilitylist";
  d.entries.push_back(e);
  return rs::write_document(d);
}

auto Simulator::Impl::capability_list() const -> std::string {
  rs::Document d;
  d.header = header("capabilitylist");
  d.header.links.push_back(rs::Link{.rel = "up", .href = url("/.well-known/resourcesync")});
  for (const char* cap : {"resourcelist", "resourcedump", "changelist", "changedump"}) {
    rs::Entry e;
    e.loc = url("/" + std::string(cap) + ".xml");
    e.md = rs::Metadata{};
    e.md->capability = cap;
    d.entries.push_back(e);
  }
  if (options.hub) {
    rs::Entry e;
    e.loc = topic();
    e.md = rs::Metadata{};
    e.md->capability = "changelist-notification";
    e.links.push_back(rs::Link{.rel = "hub", .href = url("/hub")});
    d.entries.push_back(e);
  }
  return rs::write_document(d);
}

auto Simulator::Impl::render_resource_list() -> void {
  auto docs = std::map<std::string, std::shared_ptr<const std::string>>();
  rs::DocumentHeader h = header("resourcelist");
  h.md->at = now_us();
  h.links.push_back(rs::Link{.rel = "up", .href = url("/capabilitylist.xml")});
  rs::PartitionedWriter w(
      h, url("/resourcelist.xml"), [this](size_t n) { return url("/resourcelist-" + std::to_string(n) + ".xml"); },
      [&docs, this](rs::WrittenPart&& p) {
        docs[p.url.substr(base.size())] = std::make_shared<const std::string>(std::move(p.xml));
      });
  for (uint64_t id = 0; id < resources.size(); ++id) {
    if (resources[id].live) {
      w.add(entry_of(id, resources[id]));
    }
  }
  w.update_header([](rs::DocumentHeader& hd) { hd.md->completed = now_us(); });
  w.finish();
  resource_list_docs = std::move(docs);
  resource_list_stamp = log.size();
  resource_list_rendered = std::chrono::steady_clock::now();
}

auto Simulator::Impl::part_from(size_t k) const -> rs::Timestamp {
  return k == 0 ? started : log[k * options.part_size - 1].at;
}

auto Simulator::Impl::change_part(size_t k) const -> std::string {
  const size_t first = k * options.part_size;
  const size_t last = std::min(log.size(), first + options.part_size);
  const bool closed = last - first == options.part_size;
  rs::DocumentHeader h = header("changelist");
  h.md->from = part_from(k);
  if (closed) {
    h.md->until = log[last - 1].at;
  }
  h.links.push_back(rs::Link{.rel = "up", .href = url("/capabilitylist.xml")});
  h.links.push_back(rs::Link{.rel = "index", .href = url("/changelist.xml")});
  std::string out;
  rs::DocumentWriter w(out);
  w.begin(h);
  for (size_t i = first; i < last; ++i) {
    w.entry(change_entry(log[i]));
  }
  w.end();
  return out;
}

auto Simulator::Impl::change_entry(const ChangeRecord& c) const -> rs::Entry {
  rs::Entry e;
  if (c.kind == rs::Change::deleted) {
    e.loc = url("/res/" + std::to_string(c.id));
    e.md = rs::Metadata{};
  } else {
    Resource r;
    r.version = c.version;
    r.lastmod = c.at;
    r.md5 = rs::hash_hex(rs::HashAlgorithm::md5, content(c.id, c.version));
    e = entry_of(c.id, r);
  }
  e.lastmod = c.at;
  e.md->change = c.kind;
  e.md->datetime = c.at;
  return e;
}

auto Simulator::Impl::change_index() const -> std::string {
  rs::DocumentHeader h = header("changelist", rs::RootElement::sitemapindex);
  h.md->from = started;
  h.links.push_back(rs::Link{.rel = "up", .href = url("/capabilitylist.xml")});
  std::string out;
  rs::DocumentWriter w(out);
  w.begin(h);
  const size_t parts = log.size() / options.part_size + 1;
  for (size_t k = 0; k < parts; ++k) {
    rs::Entry e;
    e.loc = url("/changelist-" + std::to_string(k + 1) + ".xml");
    e.md = rs::Metadata{};
    e.md->from = part_from(k);
    if ((k + 1) * options.part_size <= log.size()) {
      e.md->until = log[(k + 1) * options.part_size - 1].at;
    }
    w.entry(e);
  }
  w.end();
  return out;
}

auto Simulator::Impl::zip_of(const std::string& manifest,
    const std::vector<std::pair<std::string, std::string>>& files) -> std::string {
  std::vector<pub::PackageFile> entries;
  entries.reserve(files.size());
  for (const auto& [name, bytes] : files) {
    entries.push_back(pub::PackageFile{name, std::string_view(bytes), {}});
  }
  return pub::package_bytes(manifest, entries).value_or(std::string()); // in memory: cannot fail but for memory
}

auto Simulator::Impl::package_entry(const std::string& path, const std::string& zip) const -> rs::Entry {
  rs::Entry e;
  e.loc = url(path);
  e.md = rs::Metadata{};
  e.md->hash = {rs::HashValue{"md5", rs::hash_hex(rs::HashAlgorithm::md5, zip)}};
  e.md->length = zip.size();
  e.md->type = "application/zip";
  return e;
}

auto Simulator::Impl::render_resource_dump() -> void {
  previous_dump_docs = std::move(resource_dump_docs);
  resource_dump_docs.clear();
  const rs::Timestamp at = now_us();
  rs::Document dump;
  dump.header = header("resourcedump");
  dump.header.md->at = at;
  dump.header.links.push_back(rs::Link{.rel = "up", .href = url("/capabilitylist.xml")});
  const std::string gen = std::to_string(at.time_since_epoch().count());
  std::vector<uint64_t> ids;
  for (uint64_t id = 0; id < resources.size(); ++id) {
    if (resources[id].live) {
      ids.push_back(id);
    }
  }
  for (size_t first = 0; first < ids.size(); first += 10000) {
    rs::Document manifest;
    manifest.header = header("resourcedump-manifest");
    manifest.header.md->at = at;
    std::vector<std::pair<std::string, std::string>> files;
    for (size_t k = first; k < std::min(ids.size(), first + 10000); ++k) {
      rs::Entry e = entry_of(ids[k], resources[ids[k]]);
      e.md->path = "/res/" + std::to_string(ids[k]);
      manifest.entries.push_back(e);
      files.emplace_back("res/" + std::to_string(ids[k]), content(ids[k], resources[ids[k]].version));
    }
    const std::string path = "/resourcedump-" + gen + "-" + std::to_string(first / 10000 + 1) + ".zip";
    auto zip = std::make_shared<const std::string>(zip_of(rs::write_document(manifest), files));
    rs::Entry pkg = package_entry(path, *zip);
    pkg.md->at = at;
    dump.entries.push_back(pkg);
    resource_dump_docs[path] = std::move(zip);
  }
  resource_dump_docs["/resourcedump.xml"] = std::make_shared<const std::string>(rs::write_document(dump));
  resource_dump_stamp = log.size();
  resource_dump_built = std::chrono::steady_clock::now();
}

auto Simulator::Impl::render_change_package(size_t k) -> void {
  const std::string part = change_part(k);
  auto parsed = rs::parse_document(part);
  rs::Document manifest;
  manifest.header = header("changedump-manifest");
  manifest.header.md->from = parsed.document.header.md->from;
  manifest.header.md->until = parsed.document.header.md->until;
  std::vector<std::pair<std::string, std::string>> files;
  for (size_t i = 0; i < parsed.document.entries.size(); ++i) {
    rs::Entry e = parsed.document.entries[i];
    const ChangeRecord& c = log[k * options.part_size + i];
    if (c.kind != rs::Change::deleted) {
      const std::string name = "changes/" + std::to_string(i + 1);
      e.md->path = "/" + name;
      files.emplace_back(name, content(c.id, c.version));
    }
    manifest.entries.push_back(std::move(e));
  }
  const std::string xml = rs::write_document(manifest);
  change_manifests[k] = std::make_shared<const std::string>(xml);
  change_packages[k] = std::make_shared<const std::string>(zip_of(xml, files));
}

auto Simulator::Impl::change_dump() -> std::string {
  rs::Document d;
  d.header = header("changedump");
  d.header.md->from = started;
  d.header.links.push_back(rs::Link{.rel = "up", .href = url("/capabilitylist.xml")});
  for (size_t k = 0; (k + 1) * options.part_size <= log.size(); ++k) {
    if (!change_packages.count(k)) {
      render_change_package(k);
    }
    rs::Entry e = package_entry("/changedump-" + std::to_string(k + 1) + ".zip", *change_packages[k]);
    e.md->from = part_from(k);
    e.md->until = log[(k + 1) * options.part_size - 1].at;
    e.links.push_back(rs::Link{.rel = "contents", .href = url("/changedump-" + std::to_string(k + 1) +
                                                               "-manifest.xml")});
    d.entries.push_back(std::move(e));
  }
  return rs::write_document(d);
}

auto Simulator::Impl::document(const std::string& path) -> std::shared_ptr<const std::string> {
  std::lock_guard lock(mutex);
  if (path == "/.well-known/resourcesync") {
    return std::make_shared<const std::string>(source_description());
  }
  if (path == "/capabilitylist.xml") {
    return std::make_shared<const std::string>(capability_list());
  }
  if (path == "/changelist.xml") {
    return std::make_shared<const std::string>(change_index());
  }
  if (path.rfind("/changelist-", 0) == 0) {
    size_t k = 0;
    try {
      k = std::stoul(path.substr(12)) - 1;
    } catch (const std::exception&) {
      return nullptr;
    }
    if (k > log.size() / options.part_size) {
      return nullptr;
    }
    const bool closed = (k + 1) * options.part_size <= log.size();
    if (!closed) {
      return std::make_shared<const std::string>(change_part(k));
    }
    auto& slot = closed_parts[k];
    if (!slot) {
      slot = std::make_shared<const std::string>(change_part(k));
    }
    return slot;
  }
  if (path == "/changedump.xml") {
    return std::make_shared<const std::string>(change_dump());
  }
  if (path.rfind("/changedump-", 0) == 0) {
    const bool manifest = path.size() > 13 && path.compare(path.size() - 13, 13, "-manifest.xml") == 0;
    size_t k = 0;
    try {
      k = std::stoul(path.substr(12)) - 1;
    } catch (const std::exception&) {
      return nullptr;
    }
    if ((k + 1) * options.part_size > log.size()) {
      return nullptr; // not closed (yet)
    }
    if (!change_packages.count(k)) {
      render_change_package(k);
    }
    return manifest ? change_manifests[k] : change_packages[k];
  }
  if (path.rfind("/resourcedump", 0) == 0) {
    if (resource_dump_docs.empty() ||
        (resource_dump_stamp != log.size() &&
         std::chrono::steady_clock::now() - resource_dump_built >= std::chrono::seconds(30))) {
      if (path == "/resourcedump.xml") {
        render_resource_dump();
      }
    }
    if (auto it = resource_dump_docs.find(path); it != resource_dump_docs.end()) {
      return it->second;
    }
    auto it = previous_dump_docs.find(path);
    return it == previous_dump_docs.end() ? nullptr : it->second;
  }
  if (path.rfind("/resourcelist", 0) == 0) {
    if (resource_list_stamp != log.size() &&
        std::chrono::steady_clock::now() - resource_list_rendered >= std::chrono::seconds(1)) {
      render_resource_list();
    }
    auto it = resource_list_docs.find(path);
    return it == resource_list_docs.end() ? nullptr : it->second;
  }
  return nullptr;
}

} // namespace tributary::agg

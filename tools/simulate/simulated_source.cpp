#include "tools/simulate/simulated_source.h"

#include "republisher/package_writer.h"
#include "resourcesync/hash.h"
#include "resourcesync/reader.h"
#include "resourcesync/writer.h"

#include <algorithm>

namespace tributary::agg {

using namespace simulate_detail;

auto SimulatedSource::content(uint64_t id, uint32_t version) const -> std::string {
  std::string s = "resource " + std::to_string(id) + " version " + std::to_string(version) + "\n";
  uint64_t x = splitmix(m_options.seed ^ (id << 20) ^ version);
  while (s.size() < m_options.size) {
    x = splitmix(x);
    for (int i = 0; i < 8 && s.size() < m_options.size; ++i) {
      s.push_back(static_cast<char>('a' + ((x >> (i * 8)) & 0xff) % 26));
    }
  }
  s.resize(std::max<size_t>(m_options.size, 1));
  return s;
}

auto SimulatedSource::next_time() -> rs::Timestamp {
  rs::Timestamp t = now_us();
  if (t <= m_last_time) {
    t = m_last_time + std::chrono::microseconds(1);
  }
  m_last_time = t;
  return t;
}

auto SimulatedSource::set_live(uint64_t id, bool live) -> void {
  if (live && m_live_pos[id] == k_none) {
    m_live_pos[id] = m_live_ids.size();
    m_live_ids.push_back(id);
  } else if (!live && m_live_pos[id] != k_none) {
    const uint64_t last = m_live_ids.back();
    m_live_ids[m_live_pos[id]] = last;
    m_live_pos[last] = m_live_pos[id];
    m_live_ids.pop_back();
    m_live_pos[id] = k_none;
  }
  m_resources[id].live = live;
}

auto SimulatedSource::write_version(uint64_t id, rs::Timestamp at) -> void {
  Resource& r = m_resources[id];
  ++r.version;
  r.lastmod = at;
  r.md5 = rs::hash_hex(rs::HashAlgorithm::md5, content(id, r.version));
}

auto SimulatedSource::change_one() -> void {
  const double r = std::uniform_real_distribution<double>(0, 1)(m_rng);
  const rs::Timestamp at = next_time();
  if (r < 0.2 || m_live_ids.empty()) {
    const uint64_t id = m_resources.size();
    m_resources.emplace_back();
    m_live_pos.push_back(k_none);
    write_version(id, at);
    set_live(id, true);
    m_log.push_back({id, m_resources[id].version, rs::Change::created, at});
    return;
  }
  const uint64_t id = m_live_ids[std::uniform_int_distribution<size_t>(0, m_live_ids.size() - 1)(m_rng)];
  if (r < 0.35 && m_live_ids.size() > 1) {
    set_live(id, false);
    m_resources[id].lastmod = at;
    m_log.push_back({id, m_resources[id].version, rs::Change::deleted, at});
    return;
  }
  write_version(id, at);
  m_log.push_back({id, m_resources[id].version, rs::Change::updated, at});
}

auto SimulatedSource::entry_of(uint64_t id, const Resource& r) const -> rs::Entry {
  rs::Entry e;
  e.loc = url("/res/" + std::to_string(id));
  e.lastmod = r.lastmod;
  e.md = rs::Metadata{};
  e.md->hash = {rs::HashValue{"md5", r.md5}};
  e.md->length = m_options.size;
  e.md->type = "text/plain";
  if (m_options.mirror) {
    e.links.push_back(rs::Link{.rel = "duplicate", .href = url("/mirror/res/" + std::to_string(id)), .pri = 1});
  }
  return e;
}

auto SimulatedSource::header(const char* capability, rs::RootElement root) const -> rs::DocumentHeader {
  rs::DocumentHeader h;
  h.root = root;
  h.md = rs::Metadata{};
  h.md->capability = capability;
  return h;
}

auto SimulatedSource::source_description() const -> std::string {
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

auto SimulatedSource::capability_list() const -> std::string {
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
  if (m_options.hub) {
    rs::Entry e;
    e.loc = topic();
    e.md = rs::Metadata{};
    e.md->capability = "changelist-notification";
    e.links.push_back(rs::Link{.rel = "hub", .href = url("/hub")});
    d.entries.push_back(e);
  }
  return rs::write_document(d);
}

auto SimulatedSource::render_resource_list() -> void {
  auto docs = std::map<std::string, std::shared_ptr<const std::string>>();
  rs::DocumentHeader h = header("resourcelist");
  h.md->at = now_us();
  h.links.push_back(rs::Link{.rel = "up", .href = url("/capabilitylist.xml")});
  rs::PartitionedWriter w(
      h, url("/resourcelist.xml"), [this](size_t n) { return url("/resourcelist-" + std::to_string(n) + ".xml"); },
      [&docs, this](rs::WrittenPart&& p) {
        docs[p.url.substr(m_base.size())] = std::make_shared<const std::string>(std::move(p.xml));
      });
  for (uint64_t id = 0; id < m_resources.size(); ++id) {
    if (m_resources[id].live) {
      w.add(entry_of(id, m_resources[id]));
    }
  }
  w.update_header([](rs::DocumentHeader& hd) { hd.md->completed = now_us(); });
  w.finish();
  m_resource_list_docs = std::move(docs);
  m_resource_list_stamp = m_log.size();
  m_resource_list_rendered = std::chrono::steady_clock::now();
}

auto SimulatedSource::part_from(size_t k) const -> rs::Timestamp {
  return k == 0 ? m_started : m_log[k * m_options.part_size - 1].at;
}

auto SimulatedSource::change_part(size_t k) const -> std::string {
  const size_t first = k * m_options.part_size;
  const size_t last = std::min(m_log.size(), first + m_options.part_size);
  const bool closed = last - first == m_options.part_size;
  rs::DocumentHeader h = header("changelist");
  h.md->from = part_from(k);
  if (closed) {
    h.md->until = m_log[last - 1].at;
  }
  h.links.push_back(rs::Link{.rel = "up", .href = url("/capabilitylist.xml")});
  h.links.push_back(rs::Link{.rel = "index", .href = url("/changelist.xml")});
  std::string out;
  rs::DocumentWriter w(out);
  w.begin(h);
  for (size_t i = first; i < last; ++i) {
    w.entry(change_entry(m_log[i]));
  }
  w.end();
  return out;
}

auto SimulatedSource::change_entry(const ChangeRecord& c) const -> rs::Entry {
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

auto SimulatedSource::change_index() const -> std::string {
  rs::DocumentHeader h = header("changelist", rs::RootElement::sitemapindex);
  h.md->from = m_started;
  h.links.push_back(rs::Link{.rel = "up", .href = url("/capabilitylist.xml")});
  std::string out;
  rs::DocumentWriter w(out);
  w.begin(h);
  const size_t parts = m_log.size() / m_options.part_size + 1;
  for (size_t k = 0; k < parts; ++k) {
    rs::Entry e;
    e.loc = url("/changelist-" + std::to_string(k + 1) + ".xml");
    e.md = rs::Metadata{};
    e.md->from = part_from(k);
    if ((k + 1) * m_options.part_size <= m_log.size()) {
      e.md->until = m_log[(k + 1) * m_options.part_size - 1].at;
    }
    w.entry(e);
  }
  w.end();
  return out;
}

auto SimulatedSource::zip_of(const std::string& manifest,
    const std::vector<std::pair<std::string, std::string>>& files) -> std::string {
  std::vector<pub::PackageFile> entries;
  entries.reserve(files.size());
  for (const auto& [name, bytes] : files) {
    entries.push_back(pub::PackageFile{name, std::string_view(bytes), {}});
  }
  return pub::package_bytes(manifest, entries).value_or(std::string()); // in memory: cannot fail but for memory
}

auto SimulatedSource::package_entry(const std::string& path, const std::string& zip) const -> rs::Entry {
  rs::Entry e;
  e.loc = url(path);
  e.md = rs::Metadata{};
  e.md->hash = {rs::HashValue{"md5", rs::hash_hex(rs::HashAlgorithm::md5, zip)}};
  e.md->length = zip.size();
  e.md->type = "application/zip";
  return e;
}

auto SimulatedSource::render_resource_dump() -> void {
  m_previous_dump_docs = std::move(m_resource_dump_docs);
  m_resource_dump_docs.clear();
  const rs::Timestamp at = now_us();
  rs::Document dump;
  dump.header = header("resourcedump");
  dump.header.md->at = at;
  dump.header.links.push_back(rs::Link{.rel = "up", .href = url("/capabilitylist.xml")});
  const std::string gen = std::to_string(at.time_since_epoch().count());
  std::vector<uint64_t> ids;
  for (uint64_t id = 0; id < m_resources.size(); ++id) {
    if (m_resources[id].live) {
      ids.push_back(id);
    }
  }
  for (size_t first = 0; first < ids.size(); first += 10000) {
    rs::Document manifest;
    manifest.header = header("resourcedump-manifest");
    manifest.header.md->at = at;
    std::vector<std::pair<std::string, std::string>> files;
    for (size_t k = first; k < std::min(ids.size(), first + 10000); ++k) {
      rs::Entry e = entry_of(ids[k], m_resources[ids[k]]);
      e.md->path = "/res/" + std::to_string(ids[k]);
      manifest.entries.push_back(e);
      files.emplace_back("res/" + std::to_string(ids[k]), content(ids[k], m_resources[ids[k]].version));
    }
    const std::string path = "/resourcedump-" + gen + "-" + std::to_string(first / 10000 + 1) + ".zip";
    auto zip = std::make_shared<const std::string>(zip_of(rs::write_document(manifest), files));
    rs::Entry pkg = package_entry(path, *zip);
    pkg.md->at = at;
    dump.entries.push_back(pkg);
    m_resource_dump_docs[path] = std::move(zip);
  }
  m_resource_dump_docs["/resourcedump.xml"] = std::make_shared<const std::string>(rs::write_document(dump));
  m_resource_dump_stamp = m_log.size();
  m_resource_dump_built = std::chrono::steady_clock::now();
}

auto SimulatedSource::render_change_package(size_t k) -> void {
  const std::string part = change_part(k);
  auto parsed = rs::parse_document(part);
  rs::Document manifest;
  manifest.header = header("changedump-manifest");
  manifest.header.md->from = parsed.document.header.md->from;
  manifest.header.md->until = parsed.document.header.md->until;
  std::vector<std::pair<std::string, std::string>> files;
  for (size_t i = 0; i < parsed.document.entries.size(); ++i) {
    rs::Entry e = parsed.document.entries[i];
    const ChangeRecord& c = m_log[k * m_options.part_size + i];
    if (c.kind != rs::Change::deleted) {
      const std::string name = "changes/" + std::to_string(i + 1);
      e.md->path = "/" + name;
      files.emplace_back(name, content(c.id, c.version));
    }
    manifest.entries.push_back(std::move(e));
  }
  const std::string xml = rs::write_document(manifest);
  m_change_manifests[k] = std::make_shared<const std::string>(xml);
  m_change_packages[k] = std::make_shared<const std::string>(zip_of(xml, files));
}

auto SimulatedSource::change_dump() -> std::string {
  rs::Document d;
  d.header = header("changedump");
  d.header.md->from = m_started;
  d.header.links.push_back(rs::Link{.rel = "up", .href = url("/capabilitylist.xml")});
  for (size_t k = 0; (k + 1) * m_options.part_size <= m_log.size(); ++k) {
    if (!m_change_packages.count(k)) {
      render_change_package(k);
    }
    rs::Entry e = package_entry("/changedump-" + std::to_string(k + 1) + ".zip", *m_change_packages[k]);
    e.md->from = part_from(k);
    e.md->until = m_log[(k + 1) * m_options.part_size - 1].at;
    e.links.push_back(rs::Link{.rel = "contents", .href = url("/changedump-" + std::to_string(k + 1) +
                                                               "-manifest.xml")});
    d.entries.push_back(std::move(e));
  }
  return rs::write_document(d);
}

auto SimulatedSource::document(const std::string& path) -> std::shared_ptr<const std::string> {
  std::lock_guard lock(m_mutex);
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
    if (k > m_log.size() / m_options.part_size) {
      return nullptr;
    }
    const bool closed = (k + 1) * m_options.part_size <= m_log.size();
    if (!closed) {
      return std::make_shared<const std::string>(change_part(k));
    }
    auto& slot = m_closed_parts[k];
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
    if ((k + 1) * m_options.part_size > m_log.size()) {
      return nullptr; // not closed (yet)
    }
    if (!m_change_packages.count(k)) {
      render_change_package(k);
    }
    return manifest ? m_change_manifests[k] : m_change_packages[k];
  }
  if (path.rfind("/resourcedump", 0) == 0) {
    if (m_resource_dump_docs.empty() ||
        (m_resource_dump_stamp != m_log.size() &&
         std::chrono::steady_clock::now() - m_resource_dump_built >= std::chrono::seconds(30))) {
      if (path == "/resourcedump.xml") {
        render_resource_dump();
      }
    }
    if (auto it = m_resource_dump_docs.find(path); it != m_resource_dump_docs.end()) {
      return it->second;
    }
    auto it = m_previous_dump_docs.find(path);
    return it == m_previous_dump_docs.end() ? nullptr : it->second;
  }
  if (path.rfind("/resourcelist", 0) == 0) {
    if (m_resource_list_stamp != m_log.size() &&
        std::chrono::steady_clock::now() - m_resource_list_rendered >= std::chrono::seconds(1)) {
      render_resource_list();
    }
    auto it = m_resource_list_docs.find(path);
    return it == m_resource_list_docs.end() ? nullptr : it->second;
  }
  return nullptr;
}

void SimulatedSource::start(std::string base) {
  m_base = std::move(base);
  std::lock_guard lock(m_mutex);
  m_started = m_last_time = now_us();
  m_resources.resize(m_options.resources);
  m_live_pos.assign(m_options.resources, k_none);
  for (uint64_t id = 0; id < m_options.resources; ++id) {
    write_version(id, m_started);
    set_live(id, true);
  }
  render_resource_list();
}

void SimulatedSource::change(uint64_t n) {
  std::lock_guard lock(m_mutex);
  for (uint64_t i = 0; i < n; ++i) {
    change_one();
  }
}

uint64_t SimulatedSource::changes() const {
  std::lock_guard lock(m_mutex);
  return m_log.size();
}

uint64_t SimulatedSource::live() const {
  std::lock_guard lock(m_mutex);
  return m_live_ids.size();
}

auto SimulatedSource::notification(size_t from, size_t max) const -> std::optional<std::pair<std::string, size_t>> {
  rs::Document d;
  size_t upto = 0;
  {
    std::lock_guard lock(m_mutex);
    if (from >= m_log.size()) {
      return std::nullopt;
    }
    d.header = header("changelist-notification");
    d.header.links.push_back(rs::Link{.rel = "up", .href = url("/capabilitylist.xml")});
    upto = std::min(m_log.size(), from + max);
    for (size_t i = from; i < upto; ++i) {
      d.entries.push_back(change_entry(m_log[i]));
    }
  }
  return std::make_pair(rs::write_document(d), upto);
}

auto SimulatedSource::serve(const std::string& request_path, http::Response& res, bool can_block)
    -> http::Disposition {
  std::string path = request_path;
  const bool mirror = path.rfind("/mirror/res/", 0) == 0;
  if (mirror) {
    path = path.substr(7);
  }
  if (path.rfind("/res/", 0) == 0) {
    uint64_t id = 0;
    try {
      size_t used = 0;
      id = std::stoull(path.substr(5), &used);
      if (used != path.size() - 5) {
        throw std::invalid_argument(path);
      }
    } catch (const std::exception&) {
      res.status = 404;
      return http::Disposition::done;
    }
    std::lock_guard lock(m_mutex);
    if (id >= m_resources.size()) {
      res.status = 404;
      return http::Disposition::done;
    }
    const Resource& r = m_resources[id];
    if (!r.live) {
      res.status = 410;
      return http::Disposition::done;
    }
    res.set_header("ETag", "\"" + r.md5 + "\"");
    res.set_body(content(id, r.version), "text/plain");
    res.ranges = true;
    return http::Disposition::done;
  }
  if (path == "/about") {
    res.set_body("A ResourceSync Source simulated by tributary simulate (seed " + std::to_string(m_options.seed) +
                     ").\n",
                 "text/plain");
    return http::Disposition::done;
  }
  if (!can_block) {
    return http::Disposition::blocking; // rendering a large list takes a while
  }
  auto doc = document(path);
  if (!doc) {
    res.status = 404;
    return http::Disposition::done;
  }
  const bool zip = path.size() > 4 && path.compare(path.size() - 4, 4, ".zip") == 0;
  res.set_shared(doc, zip ? "application/zip" : "application/xml");
  return http::Disposition::done;
}

} // namespace tributary::agg

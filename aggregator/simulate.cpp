#include "aggregator/simulate.h"

#include "common/http/server.h"

#include "republisher/package_writer.h"
#include "resourcesync/datetime.h"
#include "resourcesync/hash.h"
#include "resourcesync/reader.h"
#include "resourcesync/websub.h"
#include "resourcesync/writer.h"
#include "sync_engine/fetcher.h"
#include "sync_engine/net_policy.h"

#include <csignal>
#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <ostream>
#include <random>
#include <set>
#include <thread>

namespace tributary::agg {

namespace {

constexpr uint64_t k_none = ~0ull;

rs::Timestamp now_us() {
  return std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
}

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

} // namespace

struct Simulator::Impl {
  SimulateOptions options;
  std::string base;
  std::unique_ptr<http::Server> server;

  struct Resource {
    uint32_t version = 0;
    bool live = false;
    rs::Timestamp lastmod{};
    std::string md5;
  };
  struct ChangeRecord {
    uint64_t id;
    uint32_t version;
    rs::Change kind;
    rs::Timestamp at;
  };

  mutable std::mutex mutex;
  std::vector<Resource> resources;  // by id
  std::vector<uint64_t> live_ids;   // for picking one at random
  std::vector<uint64_t> live_pos;   // id -> index in live_ids, or k_none
  std::vector<ChangeRecord> log;
  std::mt19937_64 rng;
  rs::Timestamp started{};
  rs::Timestamp last_time{};

  // Rendered documents: closed Change List parts once; the rest when the
  // state moved on (the Resource List at most once a second).
  std::map<size_t, std::shared_ptr<const std::string>> closed_parts;
  std::map<std::string, std::shared_ptr<const std::string>> resource_list_docs;
  std::chrono::steady_clock::time_point resource_list_rendered{};
  uint64_t resource_list_stamp = k_none;

  // Dumps: the Resource Dump rebuilt at most every 30 s when asked for, a
  // Change Dump package per closed Change List part (kept).
  std::map<std::string, std::shared_ptr<const std::string>> resource_dump_docs;
  std::map<std::string, std::shared_ptr<const std::string>> previous_dump_docs; // downloads in progress finish
  std::chrono::steady_clock::time_point resource_dump_built{};
  uint64_t resource_dump_stamp = k_none;
  std::map<size_t, std::shared_ptr<const std::string>> change_packages;       // part -> ZIP
  std::map<size_t, std::shared_ptr<const std::string>> change_manifests;      // part -> manifest

  // The hub (options.hub): subscribers by callback, each with how far into
  // the log it was sent; guarded by `mutex`, woken through `pushed`.
  struct Subscriber {
    std::string secret;
    std::chrono::steady_clock::time_point expires;
    size_t sent = 0;
    std::chrono::steady_clock::time_point retry_at{};
  };
  std::map<std::string, Subscriber> subscribers;
  std::condition_variable pushed;
  std::deque<std::map<std::string, std::string>> intents; // subscription requests to verify
  std::thread pusher;
  std::atomic<bool> push_stop{false}; // not `stopping`: the ticker takes stop_mutex before `mutex`
  std::shared_ptr<sync::Fetcher> client;

  std::thread ticker;
  std::mutex stop_mutex;
  std::condition_variable stop_cv;
  bool stopping = false;

  explicit Impl(SimulateOptions o) : options(std::move(o)), rng(options.seed) {}

  // The bytes of a resource version: a function of (seed, id, version).
  std::string content(uint64_t id, uint32_t version) const {
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

  rs::Timestamp next_time() {
    rs::Timestamp t = now_us();
    if (t <= last_time) {
      t = last_time + std::chrono::microseconds(1);
    }
    last_time = t;
    return t;
  }

  void set_live(uint64_t id, bool live) {
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

  void write_version(uint64_t id, rs::Timestamp at) {
    Resource& r = resources[id];
    ++r.version;
    r.lastmod = at;
    r.md5 = rs::hash_hex(rs::HashAlgorithm::md5, content(id, r.version));
  }

  // One change, chosen by the seeded generator: 20% create, 15% delete
  // (while more than one is live), else update.
  void change_one() {
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

  std::string url(const std::string& path) const { return base + path; }

  rs::Entry entry_of(uint64_t id, const Resource& r) const {
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

  rs::DocumentHeader header(const char* capability, rs::RootElement root = rs::RootElement::urlset) const {
    rs::DocumentHeader h;
    h.root = root;
    h.md = rs::Metadata{};
    h.md->capability = capability;
    return h;
  }

  std::string source_description() const {
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

  std::string capability_list() const {
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

  std::string topic() const { return url("/notification/changelist"); }

  // The Resource List (an index of parts past 50,000 entries); caller locks.
  void render_resource_list() {
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

  rs::Timestamp part_from(size_t k) const {
    return k == 0 ? started : log[k * options.part_size - 1].at;
  }

  std::string change_part(size_t k) const {
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

  // One change as the Change List (and a notification) shows it.
  rs::Entry change_entry(const ChangeRecord& c) const {
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

  // ---- the hub ------------------------------------------------------------

  // A test tool's hub, bounded all the same (#35): at most this many
  // subscribers and pending intents (503 past them), callbacks on public or
  // loopback addresses only (never a private network or the metadata
  // service), answers read up to 64 KiB.
  static constexpr size_t k_max_subscribers = 100;
  static constexpr size_t k_max_intents = 100;
  const std::shared_ptr<const sync::AddressPolicy> callback_policy =
      std::make_shared<const sync::AddressPolicy>(std::set<std::string>{"127.0.0.1", "::1"});

  sync::FetchOptions callback_options() const {
    sync::FetchOptions o;
    o.connect_timeout = std::chrono::seconds(5);
    o.read_timeout = std::chrono::seconds(10);
    o.max_redirects = 0;
    o.max_body_bytes = 64 * 1024;
    o.addresses = callback_policy;
    return o;
  }

  void hub_request(const http::Request& req, http::Response& res) {
    auto form = rs::websub::parse_form(req.body);
    auto get = [&](const char* k) {
      auto it = form ? form->find(k) : form->end();
      return form && it != form->end() ? it->second : std::string();
    };
    const std::string mode = get("hub.mode");
    const std::string callback = get("hub.callback");
    if (!form || (mode != "subscribe" && mode != "unsubscribe") || get("hub.topic") != topic() ||
        (callback.rfind("http://", 0) != 0 && callback.rfind("https://", 0) != 0)) {
      res.status = 400;
      res.set_body("expected hub.mode, hub.topic " + topic() + " and an http(s) hub.callback\n", "text/plain");
      return;
    }
    {
      std::lock_guard lock(mutex);
      if (intents.size() >= k_max_intents) {
        res.status = 503;
        res.set_header("Retry-After", "5");
        res.set_body("too many subscription requests waiting to be verified\n", "text/plain");
        return;
      }
      intents.push_back(*form);
    }
    pushed.notify_all();
    res.status = 202;
  }

  // Verifies intents and pushes changes, on a thread of its own.
  void push_loop() {
    std::unique_lock lock(mutex);
    for (;;) {
      if (push_stop) {
        return;
      }
      if (!intents.empty()) {
        auto form = std::move(intents.front());
        intents.pop_front();
        lock.unlock();
        verify(form);
        lock.lock();
        continue;
      }
      const auto now = std::chrono::steady_clock::now();
      std::string callback;
      Subscriber sub;
      for (auto it = subscribers.begin(); it != subscribers.end();) {
        if (it->second.expires < now) {
          it = subscribers.erase(it);
          continue;
        }
        if (callback.empty() && it->second.sent < log.size() && it->second.retry_at <= now) {
          callback = it->first;
          sub = it->second;
        }
        ++it;
      }
      if (callback.empty()) {
        pushed.wait_for(lock, std::chrono::milliseconds(200));
        continue;
      }
      rs::Document d;
      d.header = header("changelist-notification");
      d.header.links.push_back(rs::Link{.rel = "up", .href = url("/capabilitylist.xml")});
      const size_t upto = std::min(log.size(), sub.sent + 1000);
      for (size_t i = sub.sent; i < upto; ++i) {
        d.entries.push_back(change_entry(log[i]));
      }
      lock.unlock();
      const bool ok = post(callback, sub.secret, rs::write_document(d));
      lock.lock();
      if (auto it = subscribers.find(callback); it != subscribers.end()) {
        if (ok) {
          it->second.sent = std::max(it->second.sent, upto);
        } else {
          it->second.retry_at = std::chrono::steady_clock::now() + std::chrono::seconds(1);
        }
      }
    }
  }

  void verify(const std::map<std::string, std::string>& form) {
    auto get = [&](const char* k) {
      auto it = form.find(k);
      return it == form.end() ? std::string() : it->second;
    };
    const std::string callback = get("hub.callback");
    const std::string challenge = rs::websub::random_hex(16);
    const std::string lease = get("hub.lease_seconds").empty() ? "86400" : get("hub.lease_seconds");
    {
      std::lock_guard lock(mutex);
      if (get("hub.mode") == "subscribe" && !subscribers.count(callback) && subscribers.size() >= k_max_subscribers) {
        return; // full: not called, not subscribed
      }
    }
    std::string body;
    const sync::FetchOptions o = callback_options();
    auto r = client->fetch(callback + (callback.find('?') == std::string::npos ? "?" : "&") +
                               rs::websub::encode_form({{"hub.mode", get("hub.mode")},
                                                        {"hub.topic", topic()},
                                                        {"hub.challenge", challenge},
                                                        {"hub.lease_seconds", lease}}),
                           o, [&](const char* d, size_t n) {
                             body.append(d, std::min<size_t>(n, 4096));
                             return body.size() < 4096;
                           });
    if (!r || r->status < 200 || r->status > 299 || body != challenge) {
      return;
    }
    std::lock_guard lock(mutex);
    if (get("hub.mode") == "unsubscribe") {
      subscribers.erase(callback);
      return;
    }
    if (!subscribers.count(callback) && subscribers.size() >= k_max_subscribers) {
      return;
    }
    Subscriber& s = subscribers[callback];
    const bool renewal = s.expires != std::chrono::steady_clock::time_point{};
    s.secret = get("hub.secret");
    long long seconds = 86400;
    try {
      seconds = std::stoll(lease);
    } catch (const std::exception&) {
    }
    s.expires = std::chrono::steady_clock::now() + std::chrono::seconds(std::clamp(seconds, 1LL, 864000LL));
    if (!renewal) {
      s.sent = log.size(); // changes from now on
    }
  }

  bool post(const std::string& callback, const std::string& secret, const std::string& body) {
    sync::FetchOptions o = callback_options();
    o.method = "POST";
    o.content_type = "application/xml";
    o.body = body;
    o.headers["Link"] = rs::websub::link_header(url("/hub"), topic());
    if (!secret.empty()) {
      o.headers["X-Hub-Signature"] = rs::websub::signature(secret, body);
    }
    auto r = client->fetch(callback, o, [](const char*, size_t) { return true; });
    return r && r->status >= 200 && r->status <= 299;
  }

  std::string change_index() const {
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

  // A ZIP of manifest.xml and `files` (name -> bytes), in memory.
  static std::string zip_of(const std::string& manifest, const std::vector<std::pair<std::string, std::string>>& files) {
    std::vector<pub::PackageFile> entries;
    entries.reserve(files.size());
    for (const auto& [name, bytes] : files) {
      entries.push_back(pub::PackageFile{name, std::string_view(bytes), {}});
    }
    return pub::package_bytes(manifest, entries).value_or(std::string()); // in memory: cannot fail but for memory
  }

  rs::Entry package_entry(const std::string& path, const std::string& zip) const {
    rs::Entry e;
    e.loc = url(path);
    e.md = rs::Metadata{};
    e.md->hash = {rs::HashValue{"md5", rs::hash_hex(rs::HashAlgorithm::md5, zip)}};
    e.md->length = zip.size();
    e.md->type = "application/zip";
    return e;
  }

  // The Resource Dump: packages of 10,000 live resources; caller locks.
  void render_resource_dump() {
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

  // Change Dump package k (0-based) of a closed part; caller locks.
  void render_change_package(size_t k) {
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

  std::string change_dump() {
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

  // The document at `path`, or nullptr.
  std::shared_ptr<const std::string> document(const std::string& path) {
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

  http::Disposition handle(const http::Request& req, http::Response& res, bool can_block) {
    if (options.hub && req.path == "/hub" && req.method == "POST") {
      hub_request(req, res);
      return http::Disposition::done;
    }
    if (options.hub && req.path == "/notification/changelist" && (req.method == "GET" || req.method == "HEAD")) {
      res.set_header("Link", rs::websub::link_header(url("/hub"), topic()));
      res.set_body("WebSub topic of this Source's Change Notification channel\n", "text/plain");
      return http::Disposition::done;
    }
    if (req.method != "GET" && req.method != "HEAD") {
      res.status = 405;
      res.set_header("Allow", "GET, HEAD");
      return http::Disposition::done;
    }
    std::string path = req.path;
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
      std::lock_guard lock(mutex);
      if (id >= resources.size()) {
        res.status = 404;
        return http::Disposition::done;
      }
      const Resource& r = resources[id];
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
      res.set_body("A ResourceSync Source simulated by tributary simulate (seed " + std::to_string(options.seed) +
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

  void tick() {
    const auto t0 = std::chrono::steady_clock::now();
    uint64_t applied = 0;
    std::unique_lock lock(stop_mutex);
    while (!stop_cv.wait_for(lock, std::chrono::milliseconds(20), [this] { return stopping; })) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      auto due = static_cast<uint64_t>(secs * options.change_rate);
      if (options.max_changes > 0) {
        due = std::min(due, options.max_changes);
      }
      if (due > applied) {
        {
          std::lock_guard state(mutex);
          for (; applied < due; ++applied) {
            change_one();
          }
        }
        pushed.notify_all();
      }
    }
  }
};

Simulator::Simulator(SimulateOptions options) : m_impl(std::make_unique<Impl>(std::move(options))) {}

Simulator::~Simulator() { stop(); }

Result<void> Simulator::start() {
  Impl& m = *m_impl;
  m.options.part_size = std::max<size_t>(1, std::min<size_t>(m.options.part_size, 50000));
  http::ServerOptions so;
  so.host = m.options.host;
  so.port = m.options.port;
  so.workers = 4;
  m.server = std::make_unique<http::Server>(so, [&m](const http::Request& req, http::Response& res, bool can_block) {
    return m.handle(req, res, can_block);
  });
  if (auto r = m.server->start(); !r) {
    return r;
  }
  m.base = m.options.public_url.empty() ? "http://" + m.options.host + ":" + std::to_string(m.server->port())
                                        : m.options.public_url;
  while (!m.base.empty() && m.base.back() == '/') {
    m.base.pop_back();
  }
  {
    std::lock_guard lock(m.mutex);
    m.started = m.last_time = now_us();
    m.resources.resize(m.options.resources);
    m.live_pos.assign(m.options.resources, k_none);
    for (uint64_t id = 0; id < m.options.resources; ++id) {
      m.write_version(id, m.started);
      m.set_live(id, true);
    }
    m.render_resource_list();
  }
  m.ticker = std::thread([&m] { m.tick(); });
  if (m.options.hub) {
    m.client = sync::make_default_fetcher();
    m.pusher = std::thread([&m] { m.push_loop(); });
  }
  return {};
}

int Simulator::port() const { return m_impl->server ? m_impl->server->port() : 0; }

std::string Simulator::base_url() const { return m_impl->base; }

void Simulator::change(uint64_t n) {
  {
    std::lock_guard lock(m_impl->mutex);
    for (uint64_t i = 0; i < n; ++i) {
      m_impl->change_one();
    }
  }
  m_impl->pushed.notify_all();
}

uint64_t Simulator::changes() const {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->log.size();
}

uint64_t Simulator::live() const {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->live_ids.size();
}

void Simulator::stop() {
  Impl& m = *m_impl;
  {
    std::lock_guard lock(m.stop_mutex);
    if (m.stopping) {
      return;
    }
    m.stopping = true;
  }
  m.stop_cv.notify_all();
  {
    std::lock_guard lock(m.mutex);
    m.push_stop = true;
  }
  m.pushed.notify_all();
  if (m.ticker.joinable()) {
    m.ticker.join();
  }
  if (m.pusher.joinable()) {
    m.pusher.join();
  }
  if (m.server) {
    m.server->stop();
  }
}

int run_simulate(const SimulateOptions& options, std::ostream& out, std::ostream& err) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  Simulator sim(options);
  if (auto r = sim.start(); !r) {
    err << "tributary simulate: " << r.error().message << '\n';
    return 1;
  }
  out << "simulating " << options.resources << " resources, " << options.change_rate
      << " changes/s (seed " << options.seed << "): " << sim.base_url() << "/.well-known/resourcesync"
      << (options.hub ? ", notifications through " + sim.base_url() + "/hub" : std::string()) << std::endl;
  int sig = 0;
  sigwait(&signals, &sig);
  out << "stopping after " << sim.changes() << " changes (" << sim.live() << " resources live)" << std::endl;
  sim.stop();
  return 0;
}

} // namespace tributary::agg

#include "targets.h"

#include "sync_engine/http1_response.h"

#include "aggregator/setup/config.h"
#include "aggregator/push/subscriber.h"
#include "republisher/hub.h"
#include "resourcesync/websub.h"
#include "store/memory_aux_store.h"
#include "store/memory_store.h"
#include "common/http/server.h"
#include "resourcesync/datetime.h"
#include "resourcesync/reader.h"
#include "resourcesync/validator.h"
#include "resourcesync/writer.h"
#include "sync_engine/dump_package.h"
#include "sync_engine/http1_response.h"
#include "sync_engine/discovery.h"
#include "sync_engine/host_throttle.h"
#include "sync_engine/iiif/change_discovery.h"
#include "sync_engine/oai/oai_pmh.h"
#include "sync_engine/fetcher.h"

#include <libxml/parser.h>
#include "store/blob/blob_store.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace tributary::fuzz {

namespace {

std::string_view text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A property the code promises does not hold: a finding, like a crash.
[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "fuzz property broken: %s\n", what);
  std::abort();
}

struct Counting : rs::DocumentHandler {
  uint64_t entries = 0;
  uint64_t rejected = 0;
  void on_entry(rs::Entry&& e, uint64_t) override {
    ++entries;
    (void)e;
  }
  void on_rejected_entry(rs::Entry&&, uint64_t, const std::string& reason) override {
    ++rejected;
    if (reason.empty()) {
      broken("an entry rejected without a reason");
    }
  }
};

// A scratch directory of this process, removed at exit.
const std::filesystem::path& scratch() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("tributary-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(std::filesystem::temp_directory_path() /
                                      ("tributary-fuzz-" + std::to_string(::getpid())),
                                  ec);
    });
    return d;
  }();
  return dir;
}

} // namespace

int reader(const uint8_t* data, size_t size) {
  const std::string_view bytes = text(data, size);
  rs::ReaderOptions options;
  options.max_bytes = 4 << 20; // keep each input quick; the limit itself is what is tested
  rs::ParsedDocument whole = rs::parse_document(bytes, options);
  (void)rs::validate(whole.document, bytes.size());

  // The same bytes fed in small pieces read the same.
  Counting pieces;
  rs::Reader r(pieces, options);
  for (size_t at = 0; at < bytes.size(); at += 7) {
    if (!r.feed(bytes.substr(at, 7))) {
      break;
    }
  }
  const rs::ReadSummary s = r.finish();
  if (s.entries != whole.summary.entries || s.rejected_entries != whole.summary.rejected_entries ||
      s.errors != whole.summary.errors) {
    broken("reading in pieces differs from reading whole");
  }
  if (pieces.rejected != s.rejected_entries) {
    broken("rejected entries miscounted");
  }

  // A document read without error, written again, reads back the same.
  if (whole.summary.valid() && whole.summary.header && !whole.summary.stopped) {
    const std::string again = rs::write_document(whole.document);
    rs::ParsedDocument back = rs::parse_document(again, options);
    if (back.document.entries.size() != whole.document.entries.size()) {
      broken("a valid document written again reads back with a different number of entries");
    }
    for (size_t i = 0; i < back.document.entries.size(); ++i) {
      if (back.document.entries[i].loc != whole.document.entries[i].loc) {
        broken("a valid document written again reads back with a different loc");
      }
    }
  }
  return 0;
}

int datetime(const uint8_t* data, size_t size) {
  std::string why;
  auto t = rs::parse_w3c_datetime(text(data, size), &why);
  if (!t) {
    if (why.empty()) {
      broken("a datetime refused without a reason");
    }
    return 0;
  }
  const std::string canonical = rs::format_w3c_datetime(*t);
  auto again = rs::parse_w3c_datetime(canonical);
  if (!again || *again != *t) {
    broken("a datetime's canonical form does not parse back to it");
  }
  return 0;
}

int package(const uint8_t* data, size_t size) {
  const auto path = scratch() / "package.zip";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  static std::shared_ptr<store::BlobStore> blobs = [] {
    auto b = store::BlobStore::open(scratch() / "blobs");
    if (!b) {
      broken("cannot open the scratch blob store");
    }
    return *b;
  }();
  sync::PackageLimits limits;
  limits.max_uncompressed = 64 << 20;
  limits.max_entries = 10000;
  limits.max_manifest_bytes = 4 << 20;
  for (rs::Capability kind : {rs::Capability::resourcedump_manifest, rs::Capability::changedump_manifest}) {
    auto p = sync::DumpPackage::open(path, "http://fuzz.example/package.zip", kind, limits);
    if (!p) {
      if (p.error().message.empty()) {
        broken("a package refused without a reason");
      }
      continue;
    }
    (void)(*p)->read_manifest(16, [&](std::vector<rs::Entry>& entries, size_t first) -> Result<void> {
      for (size_t k = 0; k < entries.size() && first + k < 64; ++k) {
        (void)(*p)->extract(entries[k], first + k, *blobs);
      }
      return {};
    });
  }
  return 0;
}

int config(const uint8_t* data, size_t size) {
  agg::ConfigLoad l = agg::parse_config(std::string(text(data, size)), "fuzz.json");
  if (!l.config && l.problems.empty()) {
    broken("a config refused without a problem named");
  }
  return 0;
}

int http_request(const uint8_t* data, size_t size) {
  std::string_view in = text(data, size);
  // Pipelined requests, each from where the last ended.
  for (int n = 0; n < 64 && !in.empty(); ++n) {
    http::Request req;
    size_t consumed = 0;
    const int status = http::parse_request(in, 8192, 4096, req, consumed);
    if (status != 0) {
      break;
    }
    if (consumed == 0 || consumed > in.size()) {
      broken("a parsed request consumed nothing, or more than it had");
    }
    for (const auto& [name, value] : req.headers) {
      if (value.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos) {
        broken("a header value with CR, LF or NUL got through");
      }
      if (name == "range") {
        for (size_t body : {size_t{0}, size_t{1}, size_t{1000}, static_cast<size_t>(-1)}) {
          if (auto r = http::parse_range(value, body); r && r->satisfiable && r->first + r->length > body) {
            broken("a range past the body");
          }
        }
      } else if (name == "if-modified-since") {
        (void)http::parse_http_date(value);
      }
    }
    in.remove_prefix(consumed);
  }
  return 0;
}

namespace {

// One hub for the process, never started: intents queue and are never
// verified (nothing leaves the process).
pub::Hub& hub() {
  static auto st = std::make_shared<store::MemoryStore>();
  static pub::Hub h = [] {
    const int64_t src = *st->ensure_source("up", "http://up.example/");
    (void)st->ensure_feed(src, "http://up.example/caps.xml");
    return pub::Hub(std::make_shared<store::MemoryAuxStore>(), st, pub::UrlScheme("http://us.example/"),
                    [](const pub::HubRequest&) -> Result<pub::HubReply> {
                      return make_error(ErrorKind::permanent, "no network while fuzzing");
                    });
  }();
  static bool published = [] {
    h.published({pub::PublishedSet{"up", {1}}}, 0);
    return true;
  }();
  (void)published;
  return h;
}

const std::string k_topic = "http://up.example/notification/changelist";

// A subscriber holding one active subscription (token "0123abcd"), never
// started; `runs` counts the runs its notifications would start.
struct Subscriber {
  std::shared_ptr<store::MemoryAuxStore> aux = std::make_shared<store::MemoryAuxStore>();
  std::shared_ptr<store::MemoryStore> st = std::make_shared<store::MemoryStore>();
  uint64_t runs = 0;
  std::unique_ptr<agg::PushSubscriber> sub;
  Subscriber() {
    const int64_t src = *st->ensure_source("up", "http://up.example/");
    (void)st->ensure_feed(src, "http://up.example/caps.xml");
    store::PushSubscription s;
    s.source = "up";
    s.topic = k_topic;
    s.hub = "http://up.example/hub";
    s.token = "0123abcd";
    s.state = "active";
    (void)aux->put_push_subscription(s);
    agg::PushOptions o;
    o.public_url = "http://us.example/";
    agg::PushSubscriber::Hooks hooks;
    hooks.source = [](const std::string&) { return std::optional<sync::SourceConfig>(); };
    hooks.notified = [this](const std::string&) { ++runs; };
    hooks.active = [](const std::string&, bool) {};
    sub = std::make_unique<agg::PushSubscriber>(aux, st, st, nullptr, o, hooks);
  }
};

Subscriber& subscriber() {
  static Subscriber s;
  return s;
}

} // namespace

int websub_request(const uint8_t* data, size_t size) {
  http::Request req;
  req.method = "POST";
  req.path = req.target = "/hub";
  req.headers = {{"content-type", "application/x-www-form-urlencoded"}};
  req.body = std::string(text(data, size));
  req.peer = "192.0.2." + std::to_string(size % 200); // spread over clients, as a flood would be
  http::Response res;
  if (!hub().handle(req, res)) {
    broken("the hub did not take a request to /hub");
  }
  if (res.status != 202 && res.status != 400 && res.status != 429 && res.status != 503) {
    broken("the hub answered a subscription request with an unexpected status");
  }
  // The form parser: what it reads, written again, reads back the same.
  if (auto form = rs::websub::parse_form(req.body)) {
    auto again = rs::websub::parse_form(rs::websub::encode_form(*form));
    if (!again || *again != *form) {
      broken("a form written again did not read back the same");
    }
  }
  return 0;
}

int notification(const uint8_t* data, size_t size) {
  Subscriber& s = subscriber();
  http::Request req;
  req.method = "POST";
  req.path = req.target = "/push/0123abcd";
  req.headers = {{"link", "<" + k_topic + ">; rel=\"self\""}};
  req.body = std::string(text(data, size));
  http::Response res;
  const uint64_t before = s.runs;
  s.sub->handle(req, res, true);
  if (res.status != 202) {
    broken("a notification was not acknowledged with 202");
  }
  if (s.runs > before) {
    auto parsed = rs::parse_document(req.body);
    const auto& h = parsed.document.header;
    if (!parsed.summary.usable() || !h.md || !h.md->capability ||
        (*h.md->capability != "changelist-notification" && *h.md->capability != "changelist")) {
      broken("a run started for a body that is not a Change Notification");
    }
  }
  return 0;
}

int verification_query(const uint8_t* data, size_t size) {
  Subscriber& s = subscriber();
  http::Request req;
  req.method = "GET";
  req.query = std::string(text(data, size));
  req.path = "/push/0123abcd";
  req.target = req.path + "?" + req.query;
  http::Response res;
  s.sub->handle(req, res, true);
  // No request of ours is pending: nothing may be confirmed.
  if (res.status == 200) {
    broken("a verification was confirmed though we asked for nothing");
  }
  if (res.status < 400 || res.status > 499) {
    broken("a verification was answered with neither 200 nor 4xx");
  }
  return 0;
}

int oai_page(const uint8_t* data, size_t size) {
  const std::string_view body = text(data, size);
  if (auto page = sync::oai::parse_list(body)) {
    for (const auto& r : page->records) {
      if (r.identifier.empty()) {
        broken("an OAI-PMH record kept without an identifier");
      }
      if (!r.metadata.empty()) {
        xmlDoc* d = xmlReadMemory(r.metadata.data(), static_cast<int>(r.metadata.size()), nullptr, nullptr,
                                  XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
        if (d == nullptr) {
          broken("an OAI-PMH record's metadata does not parse on its own");
        }
        xmlFreeDoc(d);
      }
    }
  }
  (void)sync::oai::parse_identify(body);
  return 0;
}

int iiif(const uint8_t* data, size_t size) {
  const std::string_view body = text(data, size);
  (void)sync::iiif::parse_collection(body);
  if (auto page = sync::iiif::parse_page(body)) {
    for (const auto& a : page->items) {
      if (a.object.empty() && a.type != "Refresh") {
        broken("an IIIF activity kept without an object");
      }
      if (a.type == "Move" && a.target.empty()) {
        broken("an IIIF Move kept without a target");
      }
      if (a.type != "Create" && a.type != "Update" && a.type != "Delete" && a.type != "Move" && a.type != "Add" &&
          a.type != "Remove" && a.type != "Refresh") {
        broken("an IIIF activity kept with a type Change Discovery does not name");
      }
    }
  }
  return 0;
}

int robots(const uint8_t* data, size_t size) {
  const std::string body(text(data, size));
  for (const auto& s : sync::robots_sitemaps(body, "https://repo.example.org/robots.txt")) {
    auto u = sync::parse_url(s);
    if (!u || (u->scheme != "http" && u->scheme != "https")) {
      broken("a robots.txt Sitemap URL that is not absolute http(s)");
    }
  }
  for (const char* agent : {"tributary", "", "*"}) {
    if (auto d = sync::parse_crawl_delay(body, agent)) {
      if (!std::isfinite(*d) || *d < 0 || *d > 3600) {
        broken("a Crawl-delay that is not finite, negative or beyond any cap");
      }
    }
  }
  return 0;
}

int http_response(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  // Every prefix, as the bytes come off a connection: `more` until enough
  // has come; once `ok`, every longer prefix reads the same head.
  std::optional<size_t> head_at;
  for (size_t n = 0; n <= all.size(); ++n) {
    sync::http1::Head h;
    std::string why;
    const auto p = sync::http1::parse_head(all.substr(0, n), h, why);
    if (p == sync::http1::Parse::ok) {
      if (h.length > n || h.status < 0 || h.status > 999) {
        __builtin_trap();
      }
      if (head_at && *head_at != h.length) {
        __builtin_trap();
      }
      head_at = h.length;
      size_t framed = 0;
      std::string body;
      const std::string_view rest = all.substr(0, n).substr(h.length);
      if (sync::http1::parse_chunked(rest, 4096, framed, &body, why) == sync::http1::Parse::ok &&
          (framed > rest.size() || body.size() > 4096)) {
        __builtin_trap();
      }
    } else if (head_at) {
      __builtin_trap(); // a longer prefix no longer reads
    }
  }
  return 0;
}

Target target(std::string_view name) {
  if (name == "reader") {
    return reader;
  }
  if (name == "xml_scanner") {
    return xml_scanner;
  }
  if (name == "datetime") {
    return datetime;
  }
  if (name == "package") {
    return package;
  }
  if (name == "config") {
    return config;
  }
  if (name == "http_request") {
    return http_request;
  }
  if (name == "websub_request") {
    return websub_request;
  }
  if (name == "notification") {
    return notification;
  }
  if (name == "verification_query") {
    return verification_query;
  }
  if (name == "oai_page") {
    return oai_page;
  }
  if (name == "http_response") {
    return http_response;
  }
  if (name == "iiif") {
    return iiif;
  }
  if (name == "robots") {
    return robots;
  }
  return nullptr;
}

} // namespace tributary::fuzz

#include "targets.h"

#include "aggregator/config.h"
#include "common/http/server.h"
#include "resourcesync/datetime.h"
#include "resourcesync/reader.h"
#include "resourcesync/validator.h"
#include "resourcesync/writer.h"
#include "sync_engine/dump_package.h"
#include "store/blob/blob_store.h"

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

Target target(std::string_view name) {
  if (name == "reader") {
    return reader;
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
  return nullptr;
}

} // namespace tributary::fuzz

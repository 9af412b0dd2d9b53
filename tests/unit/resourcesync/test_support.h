#pragma once

#include "resourcesync/reader.h"
#include "resourcesync/writer.h"

#include <zlib.h>

#include <optional>
#include <stdexcept>
#include <string>

namespace tributary::test {

// gzip-compresses `data` (one member).
inline std::string gzip(std::string_view data) { return rs::gzip(data); }

// The bytes of one gzip member; nullopt unless `gz` holds a whole one.
inline std::optional<std::string> gunzip(std::string_view gz) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) {
    return std::nullopt;
  }
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());
  std::string out;
  char buf[65536];
  int rc = Z_OK;
  do {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
  } while (rc == Z_OK);
  const bool whole = rc == Z_STREAM_END && z.avail_in == 0;
  inflateEnd(&z);
  return whole ? std::optional<std::string>(std::move(out)) : std::nullopt;
}

// The first diagnostic of `severity` whose message contains `needle`.
inline bool has_diagnostic(const rs::ReadSummary& s, rs::Severity severity, std::string_view needle) {
  for (const auto& d : s.diagnostics) {
    if (d.severity == severity && d.message.find(needle) != std::string::npos) {
      return true;
    }
  }
  return false;
}

inline std::string all_diagnostics(const rs::ReadSummary& s) {
  std::string out;
  for (const auto& d : s.diagnostics) {
    out += (d.severity == rs::Severity::error ? "error line " : "warning line ") + std::to_string(d.line) +
           ": " + d.message + "\n";
  }
  return out;
}

inline const char* k_head =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" "
    "xmlns:rs=\"http://www.openarchives.org/rs/terms/\">\n";

} // namespace tributary::test

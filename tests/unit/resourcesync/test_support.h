#pragma once

#include "resourcesync/reader.h"

#include <zlib.h>

#include <stdexcept>
#include <string>

namespace tributary::test {

// gzip-compresses `data` (one member).
inline std::string gzip(std::string_view data) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("deflateInit2");
  }
  std::string out;
  out.resize(deflateBound(&zs, static_cast<uLong>(data.size())) + 64);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
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

#pragma once

#include "resourcesync/reader.h"
#include "resourcesync/writer.h"

#include <zlib.h>

#include <stdexcept>
#include <string>

namespace tributary::test {

// gzip-compresses `data` (one member).
inline std::string gzip(std::string_view data) { return rs::gzip(data); }

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

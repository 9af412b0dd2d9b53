#pragma once

#include <string_view>

namespace tributary::agg {

// The status page: every source (summary, filters, sort, sparklines) at
// /status, one source at /status/sources/{name}; self-contained (inline
// style and script, SVG drawn in the page), it reads only the status API.
// Written as files in aggregator/status_page/ and embedded at build time
// (cmake/EmbedPage.cmake).
std::string_view status_page_html();

} // namespace tributary::agg

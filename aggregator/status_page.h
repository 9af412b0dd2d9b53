#pragma once

#include <string_view>

namespace tributary::agg {

// The self-contained status page (/status): a table of sources with state,
// lag, counts, last error and a progress bar for running jobs, refreshed
// every two seconds from /api/v1/status. No external assets.
std::string_view status_page_html();

} // namespace tributary::agg

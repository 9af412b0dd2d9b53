#pragma once

// Concrete fetchers; only the dispatcher in fetcher.cpp and tests see these.
#include "sync_engine/fetcher.h"

namespace tributary::sync {

std::unique_ptr<Fetcher> make_http_fetcher();
std::unique_ptr<Fetcher> make_file_fetcher();

} // namespace tributary::sync

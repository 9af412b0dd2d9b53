#pragma once

#include "sync_engine/fetcher.h"

#include <iosfwd>
#include <string>

namespace tributary::agg {

struct InspectOptions {
  std::string target; // a path, file:// URL or http(s) URL
  bool json = false;  // print the whole document as JSON instead of a summary
};

// A command-line target as a URL: a URL as it is, a path as an absolute
// file:// URL (inspect, explore).
std::string target_url(const std::string& target);

// Exit codes of `tributary inspect`.
inline constexpr int k_exit_valid = 0;
inline constexpr int k_exit_invalid = 1;
inline constexpr int k_exit_usage = 2;

// Reads one document (streamed, so a summary of a 50 MB list stays small in
// memory), validates it and prints a summary or, with `json`, the whole
// document. Returns 0 valid, 1 invalid, 2 usage or I/O error (message on
// `err`).
int run_inspect(const InspectOptions& options, sync::Fetcher& fetcher, std::ostream& out,
                std::ostream& err);

} // namespace tributary::agg

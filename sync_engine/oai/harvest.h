#pragma once

// Internal to the sync engine: an OAI-PMH repository followed as a Source
// (sync.cpp picks it for sources of kind "oai-pmh").

#include "common/result.h"
#include "sync_engine/source_config.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tributary::sync {

class RunContext;

// One harvest of a repository: a metadataPrefix, and a set or the whole.
struct OaiFeed {
  std::string base_url;
  std::string prefix;
  std::optional<std::string> set;
  std::string feed_url; // the list's URL without from/until: the feed's name in the store
};

// The feeds a source of kind "oai-pmh" harvests: each prefix, times each
// set (or the whole repository).
std::vector<OaiFeed> oai_feeds(const SourceConfig& src);

// Baseline (ListRecords, then what was not listed is deleted through the
// mass-deletion guard), incremental (ListRecords from the last harvest's
// responseDate less the overlap) or audit (ListIdentifiers: what the
// repository no longer lists is deleted, through the guard).
Result<void> sync_oai_feed(RunContext& ctx, int64_t feed, const OaiFeed& f);

} // namespace tributary::sync

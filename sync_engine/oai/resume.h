#pragma once

// Internal to the OAI-PMH harvest (harvest.cpp): where a harvest goes on,
// as the feed's watermark records it (Watermark::resume), written in the
// transaction of each page's batch so that a crash or a restart goes on
// from the page after the last one applied.

#include "resourcesync/datetime.h"

#include <cstdint>
#include <optional>
#include <string>

namespace tributary::sync::oai {

// Where a harvest goes on: the kind's own record in Watermark::resume.
struct Resume {
  std::string mode;                  // "baseline" or "incremental"
  std::string next;                  // the next page's URL; empty: the window's first page
  std::optional<rs::Timestamp> expires; // the token's expirationDate
  std::optional<rs::Timestamp> from;    // the window under way
  std::optional<rs::Timestamp> until;
  std::optional<rs::Timestamp> started; // the first page's responseDate: the harvest's time
  int64_t span_seconds = 0;             // a window's length, once one was refused as too large; 0: whole
  bool resumed_baseline = false;        // a baseline that went on in a later run: unlisted are left to the audit

  std::string dump() const;
  static std::optional<Resume> load(const std::string& text);
};

} // namespace tributary::sync::oai

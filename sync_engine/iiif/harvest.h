#pragma once

// Internal to the sync engine: an IIIF Change Discovery 1.0 stream followed
// as a Source (sync.cpp picks it for sources of kind "iiif-discovery"; the
// source's url is the stream's OrderedCollection).

#include "common/result.h"

#include <cstdint>

namespace tributary::sync {

class RunContext;

// The stream's activities since the watermark, applied oldest first; a
// fresh feed, a baseline or an audit reads the whole stream. A Level 0
// stream (no endTime) is a full listing.
Result<void> sync_iiif_feed(RunContext& ctx, int64_t feed);

} // namespace tributary::sync

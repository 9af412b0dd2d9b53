#pragma once

#include "aggregator/setup/config.h"
#include "common/result.h"
#include "store/blob/blob_store.h"
#include "store/s3/object_tier.h"

#include <memory>

namespace tributary::agg {

// The blob store under data_dir, with the S3 tier attached when the config's
// content.store is "s3" (the bucket is created if missing; the keys are
// read from their files or variables). Errors name the setting at fault.
Result<std::shared_ptr<store::BlobStore>> open_content(const Config& config);

// The config's S3 tier alone (content.store must be "s3").
Result<std::shared_ptr<store::ObjectTier>> open_tier(const Config& config);

} // namespace tributary::agg

#include "aggregator/setup/content_store.h"

#include "store/pg/pg_object_index.h"

namespace tributary::agg {

Result<std::shared_ptr<store::BlobStore>> open_content(const Config& config) {
  auto blobs = store::BlobStore::open(config.data_dir);
  if (!blobs || config.content.store != "s3") {
    return blobs;
  }
  auto tier = open_tier(config);
  if (!tier) {
    return tl::unexpected(tier.error());
  }
  (*blobs)->set_remote(*tier);
  return blobs;
}

Result<std::shared_ptr<store::ObjectTier>> open_tier(const Config& config) {
  if (config.content.store != "s3") {
    return make_error(ErrorKind::usage, "content.store is \"" + config.content.store + "\", not \"s3\"");
  }
  store::S3Config s3;
  s3.endpoint = config.content.endpoint;
  s3.bucket = config.content.bucket;
  s3.region = config.content.region;
  s3.path_style = config.content.path_style;
  auto access = sync::read_secret(config.content.access_key, "content.access_key");
  if (!access) {
    return tl::unexpected(access.error());
  }
  auto secret = sync::read_secret(config.content.secret_key, "content.secret_key");
  if (!secret) {
    return tl::unexpected(secret.error());
  }
  s3.access_key = *access;
  s3.secret_key = *secret;
  return store::ObjectTier::open(std::move(s3), std::make_shared<store::PgObjectIndex>(config.database));
}

} // namespace tributary::agg

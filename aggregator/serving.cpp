#include "aggregator/serving.h"

#include "sync_engine/store/pg_store.h"

namespace tributary::agg {

http::ServerOptions server_options(const Config& config) {
  http::ServerOptions so;
  const auto colon = config.listen.rfind(':');
  so.host = config.listen.substr(0, colon);
  so.port = std::stoi(config.listen.substr(colon + 1));
  return so;
}

pub::PublishOptions publish_options(const Config& config) {
  pub::PublishOptions options;
  options.public_url = config.public_url;
  options.change_list_part = config.change_list_part_size;
  options.dump_dir = config.serving_dir("dumps");
  options.document_dir = config.serving_dir("documents");
  options.resource_dump_interval = config.resource_dump_interval;
  options.dump_package_entries = config.dump_package_size;
  options.dump_package_bytes = config.dump_package_bytes;
  for (const auto& s : config.sets) {
    options.named_sets.push_back(pub::NamedSet{s.name, s.sources});
  }
  return options;
}

Result<void> share_dumps(pub::PublishOptions& options, const Config& config, const store::BlobStore& blobs) {
  if (!blobs.has_remote()) {
    return {};
  }
  auto store = store::PgStore::open(config.database);
  if (!store) {
    return tl::unexpected(store.error());
  }
  options.shared_dumps = std::shared_ptr<store::PgStore>(std::move(*store));
  return {};
}

} // namespace tributary::agg

#include "aggregator/setup/publishing.h"

#include "common/url_host.h"

#include "sync_engine/fetcher.h"
#include "sync_engine/net_policy.h"
#include "store/pg/pg_aux_store.h"
#include "store/pg/pg_store.h"

#include <algorithm>
#include <set>

namespace tributary::agg {

http::ServerOptions server_options(const Config& config) {
  http::ServerOptions so;
  const auto colon = config.listen.rfind(':');
  so.host = config.listen.substr(0, colon);
  so.port = std::stoi(config.listen.substr(colon + 1));
  if (auto proxies = http::ProxyTrust::parse(config.trusted_proxies)) {
    so.proxies = std::move(*proxies); // checked when the config was read
  }
  return so;
}

pub::PublishOptions publish_options(const Config& config) {
  pub::PublishOptions options;
  options.public_url = config.public_url;
  options.oai = pub::OaiOptions{config.oai.enabled, config.oai.repository_name, config.oai.admin_emails,
                                config.oai.page_size};
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

Result<void> attach_archive(pub::PublishOptions& options, const Config& config) {
  if (!config.archives) {
    return {};
  }
  auto store = store::PgAuxStore::open(config.database);
  if (!store) {
    return tl::unexpected(store.error());
  }
  options.archive = std::shared_ptr<store::PgAuxStore>(std::move(*store));
  options.resource_list_archive_interval = config.resource_list_archive_interval;
  return {};
}

Result<std::shared_ptr<pub::Hub>> make_hub(const Config& config) {
  if (!config.push.hub) {
    return std::shared_ptr<pub::Hub>();
  }
  auto subs = store::PgAuxStore::open(config.database);
  if (!subs) {
    return tl::unexpected(subs.error());
  }
  auto reader = store::PgStore::open(config.database);
  if (!reader) {
    return tl::unexpected(reader.error());
  }
  // Callbacks on addresses that are not public are called only where the
  // operator said so, by host and port: a `callback_allow_hosts` entry
  // "host" (any port) or "host:port", and the external hub's own host and
  // port. Matched on addresses alone, naming an external hub once admitted
  // every port of its host to strangers' callbacks (#35).
  struct Trusted {
    std::string host;
    std::optional<int> port;
  };
  std::vector<Trusted> trusted;
  std::set<std::string> permitted;
  auto trust = [&](const std::string& host, std::optional<int> port) {
    trusted.push_back({host, port});
    for (auto& a : sync::resolve_host(host)) {
      permitted.insert(std::move(a));
    }
  };
  for (const auto& entry : config.push.callback_allow_hosts) {
    if (auto u = sync::parse_url("http://" + entry); u && entry.find(':', entry.rfind(']') + 1) != std::string::npos) {
      trust(u->host, u->port);
    } else {
      trust(u ? u->host : entry, std::nullopt);
    }
  }
  if (!config.push.external_hub.empty()) {
    if (auto u = sync::parse_url(config.push.external_hub)) {
      trust(u->host, u->port); // the operator's own hub, wherever it is: that URL's host and port only
    }
  }
  auto lenient = std::make_shared<const sync::AddressPolicy>(std::move(permitted));
  auto strict = std::make_shared<const sync::AddressPolicy>();
  auto policy_for = [trusted, lenient, strict](const std::string& url) {
    auto u = sync::parse_url(url);
    for (const auto& t : trusted) {
      if (u && canonical_host(u->host) == canonical_host(t.host) && (!t.port || *t.port == u->port)) {
        return lenient;
      }
    }
    return strict;
  };
  std::shared_ptr<sync::Fetcher> fetcher = sync::make_default_fetcher();
  pub::HubTransport transport = [fetcher, policy_for](const pub::HubRequest& r) -> Result<pub::HubReply> {
    sync::FetchOptions o;
    o.connect_timeout = std::chrono::seconds(5);
    o.read_timeout = std::chrono::seconds(10);
    o.max_redirects = 0;
    o.max_body_bytes = 64 * 1024;
    if (r.method == "POST") {
      // A delivery: a callback slower than this is cut off and retried
      // with back-off (and served by the slow pool from then on).
      o.connect_timeout = std::chrono::seconds(3);
      o.read_timeout = std::chrono::seconds(10);
    }
    if (r.verification) {
      // The answer is the challenge: it comes at once or not at all.
      o.connect_timeout = std::chrono::seconds(3);
      o.read_timeout = std::chrono::seconds(5);
      o.max_body_bytes = 4096;
    }
    o.addresses = policy_for(r.url);
    o.allow_url = [](const sync::Url& u, std::string& why) {
      if (u.scheme != "http" && u.scheme != "https") {
        why = "a callback is http or https";
        return false;
      }
      return true;
    };
    o.method = r.method;
    o.body = r.body;
    o.content_type = r.content_type;
    for (const auto& [k, v] : r.headers) {
      o.headers[k] = v;
    }
    pub::HubReply reply;
    auto got = fetcher->fetch(r.url, o, [&](const char* d, size_t n) {
      reply.body.append(d, std::min(n, size_t(4096) - std::min(reply.body.size(), size_t(4096))));
      return true;
    });
    if (!got) {
      return tl::unexpected(got.error());
    }
    reply.status = got->status;
    return reply;
  };
  pub::HubOptions options;
  options.min_lease = config.push.min_lease;
  options.max_lease = config.push.max_lease;
  options.max_subscriptions = config.push.max_subscriptions;
  options.max_subscriptions_per_host = config.push.max_subscriptions_per_host;
  options.max_subscriptions_per_domain = config.push.max_subscriptions_per_domain;
  options.resolve = [](const std::string& host) { return sync::resolve_host(host); };
  options.default_lease = std::clamp(options.default_lease, options.min_lease, options.max_lease);
  options.external_hub = config.push.external_hub;
  if (config.push.external_hub_secret) {
    auto secret = sync::read_secret(*config.push.external_hub_secret, "push.external_hub secret");
    if (!secret) {
      return tl::unexpected(secret.error());
    }
    options.external_hub_secret = *secret;
  }
  return std::make_shared<pub::Hub>(std::shared_ptr<store::PgAuxStore>(std::move(*subs)),
                                    std::shared_ptr<store::PgStore>(std::move(*reader)),
                                    pub::UrlScheme(config.public_url), std::move(transport), options);
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

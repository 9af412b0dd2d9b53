#pragma once

// Room aggregator/setup/: the operator's configuration (one table of keys,
// every problem with its JSON pointer) and what it builds for the commands
// and the daemon (content_store.h, publishing.h).

#include "sync_engine/source_config.h"

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tributary::agg {

// The configuration file (JSON). See config/example.json for every key.
struct Config {
  std::string database; // libpq connection string or postgresql:// URI
  // This process's PostgreSQL connections (#38): at most this many, the
  // session connection (LISTEN, leases) included; every component borrows
  // from the rest for one transaction at a time, waiting at most
  // `database_wait` for one to come free.
  size_t database_connections = 10;
  std::chrono::seconds database_wait{30};
  // Where the session connection goes when `database` is PgBouncer in
  // transaction mode (which has no LISTEN nor session locks): PostgreSQL
  // itself. Empty: `database`.
  std::string database_session;
  std::string data_dir; // blob store and temporary files
  std::string listen = "127.0.0.1:8080"; // host:port the republisher serves on
  // The operator's surfaces (/api, /status, /metrics) on a listener of
  // their own, "host:port", so that they need not be public where /hub and
  // /push must be; empty: on `listen` beside everything else. /healthz and
  // /readyz stay on `listen` either way (probes).
  std::string operator_listen;
  // Reverse proxies in front of `listen` (addresses or CIDR blocks): from
  // them, Forwarded / X-Forwarded-For say who the client is, for the
  // per-client limits; from anyone else those headers are ignored.
  std::vector<std::string> trusted_proxies;
  std::string public_url;                // our base URL as others reach it (default http://<listen>)
  size_t change_list_part_size = 10000;  // changes per part of our Change List (closed parts never change)
  std::vector<sync::SourceConfig> sources;
  // Each source's object as the file gives it (compact JSON, by name): what
  // a reload compares to say which sources changed.
  std::map<std::string, std::string> source_text;
  struct NamedSet {
    std::string name;
    std::vector<std::string> sources;
  };
  std::vector<NamedSet> sets; // published sets merging several sources
  // Our Resource Dumps (under data_dir/dumps): rebuilt every interval while
  // a set changes (zero: none); resources and bitstream bytes per package
  // (a single larger resource gets a package of its own).
  std::chrono::seconds resource_dump_interval{3600};
  size_t dump_package_size = 10000;
  uint64_t dump_package_bytes = 1ull << 30;
  // The daemon (`tributary run`):
  unsigned max_concurrent_syncs = 4;  // sources syncing at once
  // Runs (and their errors) older than this are removed, hourly, except
  // each source's newest succeeded and failed run; zero ("never"): kept.
  std::chrono::seconds run_retention{30 * 86400};
  // A source removed from the config: its documents answer 410 Gone at
  // once; its data (feeds, resources, change log, runs) is purged by
  // `tributary gc` this long after (zero, "never": kept until `tributary
  // retire`).
  std::chrono::seconds removed_source_retention{30 * 86400};
  // Change-log retention: closed Change List parts that ended longer ago
  // than this are compacted, hourly, with their Change Dump packages; a
  // Destination further behind re-baselines. Zero ("never"): kept.
  std::chrono::seconds change_retention{30 * 86400};
  std::optional<sync::SecretRef> admin_token; // bearer token for state-changing API calls
  // Where content lives: "local" (data_dir's packed blob store, the
  // default) or "s3" (an S3-compatible bucket every node shares, with
  // data_dir as this node's cache; see docs/scaling.md).
  struct Content {
    std::string store = "local";
    std::string endpoint; // http(s)://host[:port]
    std::string bucket;
    std::string region = "us-east-1";
    bool path_style = true;
    sync::SecretRef access_key{"", "AWS_ACCESS_KEY_ID"};
    sync::SecretRef secret_key{"", "AWS_SECRET_ACCESS_KEY"};
    // With "s3", data_dir's blob store is this node's cache of the bucket:
    // `tributary gc` removes copies the bucket holds past this many bytes
    // (0: never).
    uint64_t cache_bytes = 20ull << 30;
  } content;
  // ResourceSync Archives of our own (docs/push.md): a Change List Archive
  // keeping the closed parts that change_retention compacts, and a Resource
  // List Archive of snapshots every resource_list_archive_interval
  // ("never": none); archived documents older than archive_retention go
  // ("never": kept).
  bool archives = true;
  std::chrono::seconds archive_retention{365 * 86400};
  std::chrono::seconds resource_list_archive_interval{7 * 86400};
  // ResourceSync Change Notification over WebSub (docs/push.md).
  struct Push {
    // Our hub: each set's Capability List offers its channel.
    bool hub = true;
    // Subscribe to the channels upstream Capability Lists offer.
    bool subscribe = true;
    // Ask upstream hubs to sign notifications (hub.secret, HMAC-SHA256);
    // unsigned ones are then ignored. "https" (the default): whenever the
    // hub is reached over https, where a secret stays secret; "always";
    // "never". (true and false mean "always" and "never".)
    std::string sign = "https";
    std::chrono::seconds lease{7 * 86400};        // what we ask upstream hubs for
    // While a source's subscription is active, it is still polled (the
    // safety net for a notification that never came), at least this long
    // apart.
    std::chrono::seconds poll_interval{3600};
    // Our hub's leases: what subscribers ask for, kept within these.
    std::chrono::seconds min_lease{300};
    std::chrono::seconds max_lease{30 * 86400};
    // Our hub's subscriptions in all, for callbacks on one host, and for
    // callbacks under one registrable domain.
    size_t max_subscriptions = 10000;
    size_t max_subscriptions_per_host = 100;
    size_t max_subscriptions_per_domain = 300;
    // Callback hosts our hub may reach although they resolve to private or
    // loopback addresses (otherwise refused: a subscriber must not turn our
    // hub against the local network).
    std::vector<std::string> callback_allow_hosts;
    // Publish through this external WebSub hub instead of our own: our
    // Capability Lists name it, and every notification is POSTed to it
    // (signed with external_hub_secret_file/_env when given).
    std::string external_hub;
    std::optional<sync::SecretRef> external_hub_secret;
  } push;
  // Our OAI-PMH data provider at <public_url>/oai (docs/oai-provider.md).
  struct Oai {
    bool enabled = true;
    std::string repository_name;           // empty: "Tributary at <public_url>"
    std::vector<std::string> admin_emails; // empty: admin@<public_url's host>
    size_t page_size = 100;                // records a page (BASE asks at least 100)
  } oai;
  // What this process calls itself in the runs it records and in the
  // status API (which node runs which source); default "<host> pid <pid>".
  std::string node_name;
  std::string log_level = "info";     // debug|info|warn|error
  std::string log_format = "text";    // text|json

  const sync::SourceConfig* find_source(const std::string& name) const;
  // Where a process serving on `listen` writes what it builds to serve
  // (`kind`: "dumps", "documents"): data_dir/<kind>/<listen>. Several
  // processes serving one data_dir (`run` beside `serve`s) never write or
  // remove each other's files, and a restart on the same address finds its
  // own again.
  std::filesystem::path serving_dir(const std::string& kind) const;
};

// Either a config or every problem found, each as
// "<file>: <JSON pointer>: <what is wrong>" (unknown keys included).
struct ConfigLoad {
  std::optional<Config> config;
  std::vector<std::string> problems;
};

// "90s", "15m", "1h30m", "2d": a duration of whole seconds; nullopt when
// malformed, or zero unless `allow_zero`.
std::optional<std::chrono::seconds> parse_duration(const std::string& s, bool allow_zero = false);

ConfigLoad parse_config(const std::string& text, const std::string& file_name);
ConfigLoad load_config(const std::string& path);
// What the config sets for the whole process, before any store is opened:
// the node's name, the PostgreSQL connection budget.
void apply_process_settings(const Config& config);

} // namespace tributary::agg

#pragma once

#include "aggregator/setup/config.h"
#include "common/http/server.h"
#include "republisher/server.h"

// What `tributary serve` and `tributary run` both take from the config to
// serve on `listen`.
namespace tributary::agg {

// The HTTP server on `listen`.
http::ServerOptions server_options(const Config& config);
// The republisher: public URL, sets, Change List parts, dumps.
pub::PublishOptions publish_options(const Config& config);
// With content in a shared bucket (a remote tier on `blobs`), dump
// packages and Resource Dumps are shared by every node through the
// database, on a connection of their own; else nothing to do.
Result<void> share_dumps(pub::PublishOptions& options, const Config& config, const store::BlobStore& blobs);
// Archives (config `archives`): the archive store on a connection of its
// own, and the Resource List snapshot interval.
Result<void> attach_archive(pub::PublishOptions& options, const Config& config);
// Our WebSub hub (config `push.hub`), on connections of its own, its
// outbound requests under the callback policy: http(s) only, no redirects,
// public addresses unless `push.callback_allow_hosts` names the host; null
// when the hub is off.
Result<std::shared_ptr<pub::Hub>> make_hub(const Config& config);
// Connections of their own for the republisher's content lookups (a 404
// costs one index probe; four keep pace with the HTTP workers).
inline constexpr size_t k_lookup_connections = 4;
// With a change listener (LISTEN), the store is asked this seldom on its
// own: notifications say when it moved.
inline constexpr std::chrono::milliseconds k_listening_poll_interval{10000};

} // namespace tributary::agg

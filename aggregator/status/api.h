#pragma once

// Room aggregator/status/: what the daemon tells its operator over HTTP:
// the status API, the status page, metrics, and the guard on the admin token.
// It reads the daemon's state; it never starts or wires anything.

#include "aggregator/daemon/daemon_state.h"
#include "common/http/router.h"

namespace tributary::agg {

// The daemon's status API beside the republisher on one server: /status
// (the page), /api/v1/… (JSON, docs/api.md), /metrics, /healthz and
// /readyz. Reads the daemon's state and the store's statistics; a POST asks
// the scheduler for a run (admin bearer token).
class StatusApi {
public:
  explicit StatusApi(DaemonState& state) : m_state(state) {}

  // Mounts every route of the API on `router`.
  void mount(http::Router& router);
  // Only /healthz and /readyz (probes), or only the operator's surfaces
  // (/api/, /metrics, /status): for `operator_listen`.
  void mount_probes(http::Router& router);
  void mount_operator(http::Router& router);
  http::Disposition handle(const http::Request& req, http::Response& res, bool can_block);

private:
  DaemonState& m_state;
};

} // namespace tributary::agg

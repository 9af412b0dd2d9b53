#pragma once

#include "aggregator/daemon/daemon_state.h"
#include "common/http/server.h"

#include <string>

// The operator's actions on a source, behind the admin token (POST
// /api/v1/sources/{name}/{action}): sync (any mode), audit, retry (the
// resources waiting for a retry, now), pause, resume, confirm-deletions and
// refuse-deletions. Each is recorded with who and when (operator_action),
// logged, and shown in the source's detail.
namespace tributary::agg {

// Whether `action` is one of them.
bool is_source_action(const std::string& action);
// Answers it (the source is known to be configured).
void source_action(DaemonState& state, const std::string& name, const std::string& action,
                   const http::Request& req, http::Response& res);
// Whether the request carries the admin token (answered with 401 if not).
bool admin_allowed(DaemonState& state, const http::Request& req, http::Response& res);

// Makes `pauses` (as read from the database: any node may have paused or
// resumed) the paused sources, in the state and the scheduler. Call under
// state.mutex.
void apply_pauses(DaemonState& state, const std::vector<store::PauseInfo>& pauses);

// Who asked: the name the operator gave (body "by", or the X-Operator
// header: printable, at most 64 characters) and the client's address.
std::string actor_of(const http::Request& req, const std::string& by);

} // namespace tributary::agg

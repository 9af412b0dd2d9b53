#include "store/store.h"

#include <unistd.h>

#include <mutex>

namespace tributary::store {

namespace {
std::mutex g_node_mutex;
std::string g_node_name;
} // namespace

std::string node_name() {
  std::lock_guard lock(g_node_mutex);
  if (g_node_name.empty()) {
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    g_node_name = std::string(host) + " pid " + std::to_string(::getpid());
  }
  return g_node_name;
}

void set_node_name(std::string name) {
  std::lock_guard lock(g_node_mutex);
  g_node_name = std::move(name);
}

RunCounters& RunCounters::operator+=(const RunCounters& o) {
  created += o.created;
  updated += o.updated;
  deleted += o.deleted;
  unchanged += o.unchanged;
  failed += o.failed;
  bytes += o.bytes;
  return *this;
}

std::string_view to_string(RunMode m) {
  switch (m) {
  case RunMode::baseline:
    return "baseline";
  case RunMode::incremental:
    return "incremental";
  case RunMode::audit:
    return "audit";
  }
  return "";
}

std::string_view to_string(RunTrigger t) {
  switch (t) {
  case RunTrigger::schedule:
    return "schedule";
  case RunTrigger::push:
    return "push";
  case RunTrigger::operator_:
    return "operator";
  case RunTrigger::startup:
    return "startup";
  case RunTrigger::cli:
    return "cli";
  }
  return "";
}

std::optional<RunTrigger> parse_trigger(std::string_view s) {
  for (auto t : {RunTrigger::schedule, RunTrigger::push, RunTrigger::operator_, RunTrigger::startup,
                 RunTrigger::cli}) {
    if (to_string(t) == s) {
      return t;
    }
  }
  return std::nullopt;
}

std::string_view to_string(RunStatus s) {
  switch (s) {
  case RunStatus::running:
    return "running";
  case RunStatus::succeeded:
    return "succeeded";
  case RunStatus::partial:
    return "partial";
  case RunStatus::failed:
    return "failed";
  case RunStatus::interrupted:
    return "interrupted";
  }
  return "";
}

} // namespace tributary::store

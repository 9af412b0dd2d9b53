#include "sync_engine/store/store.h"

namespace tributary::store {

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
  }
  return "";
}

} // namespace tributary::store

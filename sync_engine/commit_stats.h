#pragma once

// Room sync_engine/commit_stats: where this process's commits spent their
// time, for /metrics. A run's batches commit in two stages, each in line
// behind the batch before (sync_engine/committer.cpp): their blobs made
// durable and named (the blob store's syncs and its index), then the batch
// applied to the store (PostgreSQL). Which stage a slow baseline waits on is
// otherwise visible only to a profiler (bench/RESULTS.md, session 46).
// Counted by the committer (committer.cpp), which defines commit_stats().

#include <cstdint>

namespace tributary::sync {

struct CommitStats {
  uint64_t batches = 0;          // committed, or failed, since the start
  double publish_seconds = 0;    // blobs made durable, indexed and uploaded
  double waiting_seconds = 0;    // published, waiting for the batch before to apply
  double apply_seconds = 0;      // the store's transaction
};

// The process's totals since it started (all runs, all sources).
CommitStats commit_stats();

} // namespace tributary::sync

#pragma once

// Room aggregator/cli/: the `tributary` commands, one function each, called
// by main.cpp with their parsed options; they print to the streams given.

#include <iosfwd>
#include <optional>
#include <string>

namespace tributary::agg {

struct Config;
// The configuration at `path`, every problem printed on `err`; nullopt
// when it cannot be used.
std::optional<Config> load_config_reporting(const std::string& path, std::ostream& err);

// `tributary check-config FILE`: prints every problem with its JSON pointer.
// Returns 0 when the file is valid, 1 otherwise.
int run_check_config(const std::string& path, std::ostream& out, std::ostream& err);

// `tributary migrate --config FILE`: applies missing schema migrations.
// Returns 0 on success, 1 on failure (message on `err`).
int run_migrate(const std::string& config_path, std::ostream& out, std::ostream& err);

struct SyncCommand {
  std::string config_path;
  std::string source; // empty: every enabled source
  bool baseline = false;
  bool incremental = false;
  bool audit = false;
  bool repair = false;
  size_t batch_size = 1000;
  bool wait = false; // for a source another run holds
};

// `tributary sync`: runs each source once and prints one summary line per
// source (plus its notes and first errors). Returns 0 when every source
// succeeded, 1 when any failed or had failed resources, 2 for usage errors.
int run_sync(const SyncCommand& cmd, std::ostream& out, std::ostream& err);

// `tributary serve --config FILE`: serves our own ResourceSync documents and
// content (read-only over the store) until SIGINT/SIGTERM. Returns 0 after a
// clean stop, 1 when it cannot start.
int run_serve(const std::string& config_path, std::ostream& out, std::ostream& err);

// `tributary check-blobs --config FILE [--reindex]`: reads the whole blob
// store (see BlobStore::check), prints what it holds and every problem.
// Returns 0 when nothing is wrong, 1 otherwise.
int run_check_blobs(const std::string& config_path, bool reindex, std::ostream& out, std::ostream& err);

// `tributary retire --config FILE SOURCE`: purges at once every trace of a
// source no longer in the config (feeds, resources, change log, runs,
// history; content blobs become garbage for gc). Refuses a configured
// source (2). Returns 0 when purged, 1 when there was no such source or on
// failure.
int run_retire(const std::string& config_path, const std::string& source, std::ostream& out, std::ostream& err);

// `tributary gc --config FILE [--grace DURATION] [--dry-run]`: one garbage
// collection of the blob store (see store/garbage.h): removes blobs
// condemned longer than the grace period that the database still does not
// name, condemns those it does not name now, and rewrites pack files mostly
// dead. Safe beside running daemons, syncs and servers. Prints what it
// found and did. Returns 0 on success, 1 on failure, 2 for a bad option.
struct GcCommand {
  std::string config_path;
  std::string grace = "24h";
  bool dry_run = false;
};
int run_gc(const GcCommand& cmd, std::ostream& out, std::ostream& err);

// `tributary migrate-blobs --config FILE`: uploads every blob the database
// names from this node's local store (data_dir) into the S3 bucket of the
// config's content section, packed as the S3 tier packs them, skipping what
// the bucket has: run again, it resumes where it stopped. Prints what it
// did. Returns 0 when the bucket then holds every blob the database names,
// 1 when some are neither here nor there (each printed) or on failure, 2
// when content.store is not "s3".
int run_migrate_blobs(const std::string& config_path, std::ostream& out, std::ostream& err);

} // namespace tributary::agg

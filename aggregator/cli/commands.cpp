#include "aggregator/cli/commands.h"

#include "aggregator/setup/config.h"
#include "aggregator/setup/content_store.h"
#include "aggregator/setup/publishing.h"
#include "store/blob/garbage.h"
#include "store/pg/pg_operator.h"
#include "store/pg/pg_store.h"

#include "republisher/server.h"
#include "sync_engine/sync.h"

#include <csignal>
#include <cstdlib>
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <unistd.h>

namespace tributary::agg {

std::optional<Config> load_config_reporting(const std::string& path, std::ostream& err) {
  auto load = load_config(path);
  for (const auto& p : load.problems) {
    err << p << '\n';
  }
  if (load.config) {
    apply_process_settings(*load.config);
  }
  return std::move(load.config);
}


namespace {

// The store and blob store a command works on, opened from the config; on
// failure the reason is printed as "tributary <command>: ...". `local`:
// the blob store under data_dir alone, without the S3 tier (gc and
// migrate-blobs work on this node's copies and never fetch a blob).
struct Storage {
  std::unique_ptr<store::PgStore> store;
  std::shared_ptr<store::BlobStore> blobs;
};

std::optional<Storage> open_storage(const Config& config, const char* command, std::ostream& err,
                                    bool local = false) {
  auto store = store::PgStore::open(config.database);
  if (!store) {
    err << "tributary " << command << ": " << store.error().message << '\n';
    return std::nullopt;
  }
  auto blobs = local ? store::BlobStore::open(config.data_dir) : open_content(config);
  if (!blobs) {
    err << "tributary " << command << ": " << blobs.error().message << '\n';
    return std::nullopt;
  }
  return Storage{std::move(*store), std::move(*blobs)};
}

} // namespace

int run_check_config(const std::string& path, std::ostream& out, std::ostream& err) {
  auto config = load_config_reporting(path, err);
  if (!config) {
    return 1;
  }
  // Valid, yet a secret read from the environment is not set here: the
  // daemon would start with that part off (the admin API answers "no
  // admin token is configured"). A warning, not a problem: check-config
  // often runs where the service's environment is not (a shell, CI).
  auto unset = [](const std::optional<sync::SecretRef>& s) {
    return s && !s->env.empty() && (std::getenv(s->env.c_str()) == nullptr || *std::getenv(s->env.c_str()) == 0);
  };
  if (unset(config->admin_token)) {
    err << path << ": warning: /admin_token_env: the environment variable " << config->admin_token->env
        << " is not set here, so the admin API (actions, sync now, pause) would be off; the shipped unit reads it "
           "from /etc/tributary/tributary.env\n";
  }
  out << path << ": ok (" << config->sources.size() << " source"
      << (config->sources.size() == 1 ? "" : "s") << ")\n";
  return 0;
}

int run_migrate(const std::string& config_path, std::ostream& out, std::ostream& err) {
  auto config = load_config_reporting(config_path, err);
  if (!config) {
    return 1;
  }
  auto report = store::migrate(config->database);
  if (!report) {
    err << "tributary migrate: " << report.error().message << '\n';
    return 1;
  }
  if (report->applied.empty()) {
    out << "schema is current (version " << report->to_version << ")\n";
  } else {
    out << "schema migrated from version " << report->from_version << " to " << report->to_version << ":";
    for (const auto& a : report->applied) {
      out << ' ' << a;
    }
    out << '\n';
  }
  return 0;
}

int run_sync(const SyncCommand& cmd, std::ostream& out, std::ostream& err) {
  const int modes = int(cmd.baseline) + int(cmd.incremental) + int(cmd.audit);
  if (modes != 1) {
    err << "tributary sync: give exactly one of --baseline, --incremental, --audit\n";
    return 2;
  }
  if (cmd.repair && !cmd.audit) {
    err << "tributary sync: --repair goes with --audit\n";
    return 2;
  }
  auto found = load_config_reporting(cmd.config_path, err);
  if (!found) {
    return 2;
  }
  const Config& config = *found;
  std::vector<const sync::SourceConfig*> sources;
  for (const auto& s : config.sources) {
    if (cmd.source.empty() ? s.enabled : s.name == cmd.source) {
      sources.push_back(&s);
    }
  }
  if (!cmd.source.empty() && sources.empty()) {
    err << "tributary sync: no source named '" << cmd.source << "' in " << cmd.config_path << '\n';
    return 2;
  }
  auto storage = open_storage(config, "sync", err);
  if (!storage) {
    return 1;
  }
  sync::SyncEngine engine(std::shared_ptr<store::Store>(std::move(storage->store)), storage->blobs,
                          sync::make_default_fetcher(),
                          std::make_shared<sync::HostThrottle>(),
                          std::filesystem::path(config.data_dir) / "tmp");
  sync::RunOptions options;
  options.mode = cmd.baseline ? store::RunMode::baseline
                 : cmd.audit  ? store::RunMode::audit
                              : store::RunMode::incremental;
  options.repair = cmd.repair;
  options.batch_size = std::max<size_t>(1, cmd.batch_size);
  options.wait_for_source = cmd.wait;
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  if (tty) {
    options.on_progress = [&err](const sync::Progress& p) {
      std::ostringstream line;
      line << "\r" << p.source << ": " << p.done << "/" << p.total;
      if (p.per_second > 0) {
        line << " (" << static_cast<uint64_t>(p.per_second) << "/s";
        if (p.total > p.done) {
          line << ", ETA " << static_cast<uint64_t>(static_cast<double>(p.total - p.done) / p.per_second) << " s";
        }
        line << ")";
      }
      line << "\x1b[K";
      err << line.str() << std::flush;
    };
  }
  bool all_ok = true;
  for (const auto* s : sources) {
    auto report = engine.run(*s, options);
    if (tty) {
      err << "\r\x1b[K" << std::flush;
    }
    std::ostringstream secs;
    secs << std::fixed << std::setprecision(1) << static_cast<double>(report.duration.count()) / 1000.0;
    out << "source '" << report.source << "': " << store::to_string(report.mode) << " "
        << (report.busy ? std::string_view("skipped (busy)") : store::to_string(report.status)) << " in " << secs.str() << " s: " << sync::format_counters(report.counters)
        << (report.error_count ? ", " + std::to_string(report.error_count) + " error(s)" : std::string()) << '\n';
    for (const auto& n : report.notes) {
      out << "  note: " << n << '\n';
    }
    for (const auto& e : report.errors) {
      out << "  error: " << e << '\n';
    }
    if (report.busy) {
      out << "  (--wait waits for the other run to end)\n";
    }
    if (report.error_count > report.errors.size()) {
      out << "  (" << report.error_count - report.errors.size() << " more errors recorded on run " << report.run_id
          << ")\n";
    }
    all_ok = all_ok && report.status == store::RunStatus::succeeded;
  }
  return all_ok ? 0 : 1;
}

int run_serve(const std::string& config_path, std::ostream& out, std::ostream& err) {
  auto found = load_config_reporting(config_path, err);
  if (!found) {
    return 1;
  }
  const Config& config = *found;
  auto storage = open_storage(config, "serve", err);
  if (!storage) {
    return 1;
  }
  pub::PublishOptions options = publish_options(config);
  options.poll_interval = k_listening_poll_interval;
  if (auto shared = share_dumps(options, config, *storage->blobs); !shared) {
    err << "tributary serve: " << shared.error().message << '\n';
    return 1;
  }
  if (auto archive = attach_archive(options, config); !archive) {
    err << "tributary serve: " << archive.error().message << '\n';
    return 1;
  }
  // A serve node takes subscriptions and, when no other node does, delivers.
  auto hub = make_hub(config);
  if (!hub) {
    err << "tributary serve: " << hub.error().message << '\n';
    return 1;
  }
  options.hub = *hub;
  // Signals are taken by this thread with sigwait, never by a worker.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  auto lookups = store::PgReaderPool::open(config.database, k_lookup_connections);
  if (!lookups) {
    err << "tributary serve: " << lookups.error().message << '\n';
    return 1;
  }
  pub::Republisher republisher(std::shared_ptr<store::StoreReader>(std::move(storage->store)), storage->blobs,
                               options, *lookups);
  // Every commit to the change log, by any daemon on the database, wakes the
  // documents at once (a serve replica does not poll).
  store::ChangeListener listener(config.database, [&republisher] { republisher.refresh_soon(); });
  if (auto r = republisher.start(); !r) {
    err << "tributary serve: " << r.error().message << '\n';
    return 1;
  }
  http::Server server(server_options(config), republisher.handler());
  if (auto r = server.start(); !r) {
    err << "tributary serve: " << r.error().message << '\n';
    return 1;
  }
  if (*hub) {
    (*hub)->start();
  }
  out << "serving " << config.public_url << " on " << config.listen << std::endl;
  int sig = 0;
  sigwait(&signals, &sig);
  out << "stopping (signal " << sig << ")" << std::endl;
  server.stop();
  if (*hub) {
    (*hub)->stop();
  }
  republisher.stop();
  return 0;
}

int run_check_blobs(const std::string& config_path, bool reindex, std::ostream& out, std::ostream& err) {
  auto config = load_config_reporting(config_path, err);
  if (!config) {
    return 1;
  }
  auto blobs = store::BlobStore::open(config->data_dir);
  if (!blobs) {
    err << "tributary check-blobs: " << blobs.error().message << '\n';
    return 1;
  }
  auto r = (*blobs)->check(reindex);
  if (!r) {
    err << "tributary check-blobs: " << r.error().message << '\n';
    return 1;
  }
  out << "packs: " << r->packs << " files, " << r->pack_bytes << " bytes; " << r->records << " intact records, "
      << r->indexed << " indexed (" << r->indexed_bytes << " bytes), " << r->records - r->indexed
      << " not indexed (dead space), " << r->unreadable_bytes << " bytes holding no intact record\n";
  out << "index: " << r->index_entries << " entries\n";
  out << "files: " << r->files << " blobs, " << r->file_bytes << " bytes\n";
  if (reindex) {
    out << "reindexed: " << r->reindexed << " records added to the index\n";
  }
  for (const auto& p : r->problems) {
    err << "problem: " << p << '\n';
  }
  out << "problems: " << r->problems.size() << '\n';
  return r->problems.empty() ? 0 : 1;
}

namespace {
// The bucket's part of `tributary gc` (content.store "s3").
int collect_bucket(const Config& config, std::chrono::seconds grace, bool dry_run, std::ostream& out,
                   std::ostream& err) {
  auto tier = open_tier(config);
  if (!tier) {
    err << "tributary gc: " << tier.error().message << '\n';
    return 1;
  }
  auto c = (*tier)->collect(grace, dry_run);
  if (!c) {
    err << "tributary gc: bucket: " << c.error().message << '\n';
    return 1;
  }
  if (dry_run) {
    out << "bucket: " << c->rows << " blobs placed; " << c->removed << " (" << c->removed_bytes
        << " bytes) named nowhere past the grace period, " << c->condemned << " named nowhere and not yet marked\n";
    return 0;
  }
  out << "bucket: " << c->rows << " blobs placed; " << c->condemned << " newly marked, " << c->waiting
      << " waiting out the grace period, " << c->pardoned << " named again and kept; removed " << c->removed
      << " (" << c->removed_bytes << " bytes); objects deleted: " << c->objects_deleted;
  if (c->objects_kept > 0) {
    out << " (" << c->objects_kept << " kept: named again)";
  }
  out << '\n';
  for (const auto& p : c->problems) {
    err << "problem: bucket: " << p << " (tried again next time)\n";
  }
  return c->problems.empty() ? 0 : 1;
}
} // namespace

int run_retire(const std::string& config_path, const std::string& source, std::ostream& out, std::ostream& err) {
  auto config = load_config_reporting(config_path, err);
  if (!config) {
    return 1;
  }
  if (config->find_source(source)) {
    err << "tributary retire: source '" << source
        << "' is in the config: remove it there first (and reload), then retire it\n";
    return 2;
  }
  auto status = store::PgOperatorStore::open(config->database);
  if (!status) {
    err << "tributary retire: " << status.error().message << '\n';
    return 1;
  }
  auto purged = (*status)->purge_source(source, /*keep_mark=*/true);
  if (!purged) {
    err << "tributary retire: " << purged.error().message << '\n';
    return 1;
  }
  if (!*purged) {
    err << "tributary retire: the database holds no source '" << source << "'\n";
    return 1;
  }
  (void)(*status)->record_action(source, "retire", "tributary retire (command line)", "purged");
  out << "retired " << source << ": its feeds, resources, change log, runs and history are purged; its content "
      << "blobs are removed by `tributary gc` once no other source names them; its URLs answer 410 Gone until "
      << "removed_source_retention has passed since its removal\n";
  return 0;
}

int run_gc(const GcCommand& cmd, std::ostream& out, std::ostream& err) {
  // "0s" removes at once what an earlier run condemned (tests, an emptied store).
  auto grace = parse_duration(cmd.grace, /*allow_zero=*/true);
  if (!grace) {
    err << "tributary gc: --grace '" << cmd.grace << "' is not a duration (like 30m, 24h or 7d)\n";
    return 2;
  }
  auto config = load_config_reporting(cmd.config_path, err);
  if (!config) {
    return 1;
  }
  auto storage = open_storage(*config, "gc", err, /*local=*/true);
  if (!storage) {
    return 1;
  }
  // Sources removed from the config longer ago than their retention go
  // first: their resources then name no blob, which this collection condemns.
  if (config->removed_source_retention.count() > 0) {
    auto status = store::PgOperatorStore::open(config->database);
    auto expired = status ? (*status)->removed_before(config->removed_source_retention)
                          : Result<std::vector<std::string>>(tl::unexpected(status.error()));
    if (!expired) {
      err << "tributary gc: " << expired.error().message << '\n';
      return 1;
    }
    for (const auto& name : *expired) {
      if (cmd.dry_run) {
        out << "would purge removed source " << name << '\n';
      } else if (auto purged = (*status)->purge_source(name); !purged) {
        err << "tributary gc: purging " << name << ": " << purged.error().message << '\n';
        return 1;
      } else if (*purged) {
        out << "purged removed source " << name << " (removed from the config longer than removed_source_retention)\n";
      } else {
        out << "removed source " << name << " (retired) is past removed_source_retention: its URLs answer 404 now\n";
      }
    }
  }
  store::GcOptions options;
  options.grace = *grace;
  options.dry_run = cmd.dry_run;
  if (config->content.store == "s3" && config->content.cache_bytes > 0) {
    options.cache_bytes = config->content.cache_bytes;
  }
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  auto r = store::collect_garbage(*storage->store, *storage->blobs, options, now);
  if (!r) {
    err << "tributary gc: " << r.error().message << '\n';
    return 1;
  }
  out << "stored: " << r->stored << " blobs, " << r->stored_bytes << " bytes\n";
  out << "referenced: " << r->referenced << " blobs named by the database";
  if (r->missing > 0) {
    out << " (" << r->missing << " of them not in the store)";
  }
  if (r->in_bucket > 0) {
    out << " (" << r->in_bucket << " of them in the bucket only)";
  }
  out << '\n';
  out << "garbage: " << r->garbage << " blobs, " << r->garbage_bytes << " bytes named nowhere\n";
  if (cmd.dry_run) {
    const int status = config->content.store == "s3" ? collect_bucket(*config, *grace, true, out, err) : 0;
    out << "dry run: nothing marked, removed or rewritten\n";
    return status;
  }
  out << "removed: " << r->removed.blobs << " blobs, " << r->removed.bytes << " bytes (condemned more than "
      << cmd.grace << " ago)\n";
  out << "condemned: " << r->condemned << " newly, " << r->waiting << " waiting out the grace period, "
      << r->pardoned << " named again and kept\n";
  if (options.cache_bytes) {
    out << "evicted: " << r->evicted.blobs << " blobs, " << r->evicted.bytes
        << " bytes held by the bucket (this node's cache keeps at most " << *options.cache_bytes << " bytes)\n";
  }
  out << "repacked: " << r->repacked.packs << " pack files, " << r->repacked.moved << " live records moved ("
      << r->repacked.moved_bytes << " bytes), " << r->repacked.freed_bytes << " bytes freed";
  if (r->repacked.busy > 0) {
    out << ", " << r->repacked.busy << " in use by a writer left alone";
  }
  out << '\n';
  for (const auto& p : r->repacked.problems) {
    err << "problem: " << p << '\n';
  }
  int status = r->repacked.problems.empty() ? 0 : 1;
  if (config->content.store == "s3") {
    status = std::max(status, collect_bucket(*config, *grace, cmd.dry_run, out, err));
  }
  return status;
}

int run_migrate_blobs(const std::string& config_path, std::ostream& out, std::ostream& err) {
  auto config = load_config_reporting(config_path, err);
  if (!config) {
    return 1;
  }
  if (config->content.store != "s3") {
    err << "tributary migrate-blobs: " << config_path << ": content.store is \"" << config->content.store
        << "\": give the bucket (store \"s3\", endpoint, bucket, keys) first\n";
    return 2;
  }
  // The local store alone: a blob it lacks is reported, never fetched.
  auto storage = open_storage(*config, "migrate-blobs", err, /*local=*/true);
  if (!storage) {
    return 1;
  }
  auto tier = open_tier(*config);
  if (!tier) {
    err << "tributary migrate-blobs: " << tier.error().message << '\n';
    return 1;
  }
  // In groups of 2,000 names: the tier skips those the bucket has (one
  // query a group) and packs the rest as a sync batch would be packed.
  constexpr size_t k_group = 2000;
  std::vector<store::RemoteTier::Upload> group;
  uint64_t named = 0, missing = 0;
  Result<void> status;
  auto flush = [&] {
    if (status && !group.empty()) {
      status = (*tier)->upload(group);
    }
    group.clear();
  };
  auto walked = storage->store->for_each_unplaced_blob([&](const std::string& sha) {
    ++named;
    if (!status) {
      return;
    }
    auto where = storage->blobs->locate(sha);
    if (!where) {
      ++missing;
      err << "missing: blob " << sha << " is named by the database but not in " << config->data_dir << '\n';
      return;
    }
    group.push_back(store::RemoteTier::Upload{store::BlobInfo{sha, where->length, {}}, *where});
    if (group.size() >= k_group) {
      flush();
    }
  });
  flush();
  if (!walked) {
    status = walked;
  }
  const auto c = (*tier)->counters();
  out << "named by the database, not placed in the bucket: " << named << " blobs\n";
  out << "uploaded: " << c.blobs_uploaded << " blobs, " << c.bytes_put << " bytes in " << c.objects_put
      << " objects\n";
  if (c.blobs_known > 0) {
    out << "found in the bucket already (placed meanwhile): " << c.blobs_known << " blobs\n";
  }
  if (missing > 0) {
    out << "missing here: " << missing << " blobs (named by the database, in neither this store nor the bucket "
        << "unless another node's store holds them: run this there too)\n";
  }
  if (!status) {
    err << "tributary migrate-blobs: " << status.error().message << " (run again: it resumes)\n";
    return 1;
  }
  return missing > 0 ? 1 : 0;
}

} // namespace tributary::agg

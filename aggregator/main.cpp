// The `tributary` command line.
#include "aggregator/cli/check_history.h"
#include "aggregator/cli/commands.h"
#include "aggregator/daemon/daemon.h"
#include "tools/simulate/simulate.h"
#include "aggregator/cli/explore.h"
#include "aggregator/cli/inspect.h"
#include "common/version.h"

#include <CLI/CLI.hpp>

#include <cstdlib>
#include <iostream>

int main(int argc, char** argv) {
  using namespace tributary;
  // Without TZ, glibc's mktime stats /etc/localtime on every call, and
  // libzip calls it for every entry of an archive it opens (a stack sample
  // of a 1,000,000-resource dump baseline found the sync thread there).
  // This keeps the local zone, read once.
  ::setenv("TZ", ":/etc/localtime", 0);
  CLI::App app{"Tributary: a ResourceSync aggregator and mirror.", "tributary"};
  app.set_version_flag("--version", std::string("tributary ") + std::string(version()));
  app.require_subcommand(1);

  agg::InspectOptions inspect;
  auto* inspect_cmd = app.add_subcommand(
      "inspect", "Read one ResourceSync document (file or http(s) URL), validate it and print a "
                 "summary. Exit 0 valid, 1 invalid, 2 usage or I/O error.");
  inspect_cmd->add_option("target", inspect.target, "Path, file:// URL or http(s):// URL")->required();
  inspect_cmd->add_flag("--json", inspect.json, "Print the whole document as JSON");

  agg::ExploreOptions explore;
  std::vector<std::string> explore_map;
  auto* explore_cmd = app.add_subcommand(
      "explore", "Walk a Source's whole tree from any entry point (Source Description, Capability Lists, "
                 "indexes, lists, dumps' manifests, archives; notification channels are shown, not followed), "
                 "validate every document reached and print a tree with counts, time ranges, warnings and "
                 "errors. A bare http(s) origin starts at /.well-known/resourcesync. Requests reach public "
                 "addresses and the entry point's host only (as a source's), at every redirect hop. Exit 0 when every "
                 "document was reached and valid, 1 otherwise, 2 when the entry point cannot be read.");
  explore_cmd->add_option("target", explore.target, "Source URL, document URL, path or file:// URL")->required();
  explore_cmd->add_flag("--json", explore.json, "Print the tree as one JSON object");
  explore_cmd
      ->add_option("--kind", explore.kind,
                   "What the target speaks: resourcesync; oai-pmh (target: the base URL; shows Identify, formats, "
                   "sets and record counts by sampling); iiif-discovery (target: the stream's OrderedCollection; "
                   "shows pages, activities by type, objects and time span)")
      ->check(CLI::IsMember({"resourcesync", "oai-pmh", "iiif-discovery"}))
      ->capture_default_str();
  explore_cmd->add_option("--max-documents", explore.max_documents, "Stop after reading this many documents")
      ->capture_default_str();
  explore_cmd->add_option("--map", explore_map,
                          "PREFIX=TARGET: read URLs starting with PREFIX from TARGET (a path or URL) instead, "
                          "e.g. http://localhost/=./mirror/ (repeatable)");

  std::string check_path;
  auto* check_cmd = app.add_subcommand(
      "check-config", "Validate a configuration file and print every problem with its JSON pointer. "
                      "Exit 0 valid, 1 invalid.");
  std::string check_config_opt;
  check_cmd->add_option("--config", check_config_opt, "Configuration file (JSON)");
  check_cmd->add_option("file", check_path, "Configuration file (JSON), as an argument (same as --config)");

  std::string config_path;
  auto* migrate_cmd = app.add_subcommand(
      "migrate", "Apply missing database schema migrations (each in one transaction). Exit 0 on success.");
  migrate_cmd->add_option("--config", config_path, "Configuration file (JSON)")->required();

  agg::SyncCommand sync_cmd;
  auto* sync_sub = app.add_subcommand(
      "sync", "Run each source (or one) once: --baseline, --incremental or --audit [--repair]. Prints one line "
              "per source. Exit 0 when all succeeded, 1 if any failed or had failed resources, 2 usage.");
  sync_sub->add_option("--config", sync_cmd.config_path, "Configuration file (JSON)")->required();
  sync_sub->add_option("--source", sync_cmd.source, "Only this source (by name)");
  sync_sub->add_flag("--baseline", sync_cmd.baseline, "Full sync from the Resource List");
  sync_sub->add_flag("--incremental", sync_cmd.incremental,
                     "Apply the Change List after the watermark (baselines first if never synced)");
  sync_sub->add_flag("--audit", sync_cmd.audit, "Compare the store with the current Resource List");
  sync_sub->add_flag("--repair", sync_cmd.repair, "With --audit: fix what differs");
  sync_sub->add_option("--batch-size", sync_cmd.batch_size,
                       "Entries applied per transaction (default 1000)")->check(CLI::Range(1, 1000000));
  sync_sub->add_flag("--wait", sync_cmd.wait,
                     "If another run (a daemon, another sync) holds a source, wait for it to end instead of "
                     "skipping that source");

  agg::CheckHistoryCommand history_cmd;
  auto* history_sub = app.add_subcommand(
      "check-history",
      "Check the change log we publish (our Change Lists) against what a follower relies on: no (URI, change, "
      "upstream time) logged twice, no URI's times going back, each URI's last entry what we hold. Prints totals "
      "and the first problems. --repair appends one corrective change for each URI whose last entry disagrees "
      "(nothing in the past is rewritten), so that followers converge. Exit 0 when the log holds (after the "
      "repair, if asked), 1 otherwise.");
  history_sub->add_option("--config", history_cmd.config_path, "Configuration file (JSON)")->required();
  history_sub->add_option("--source", history_cmd.source, "Only this source (by name)");
  history_sub->add_flag("--repair", history_cmd.repair,
                        "Append a corrective change for each URI whose last entry is not what we hold");
  history_sub->add_option("--limit", history_cmd.limit, "Problems printed per source at most")
      ->capture_default_str();

  std::string blobs_config;
  bool reindex = false;
  auto* blobs_cmd = app.add_subcommand(
      "check-blobs", "Read the whole blob store: re-hash every pack record and blob file against its name and check "
                     "every index entry. --reindex adds intact records the index lacks (rebuilds a lost index from "
                     "the packs). Prints totals and each problem. Exit 0 when nothing is wrong, 1 otherwise.");
  blobs_cmd->add_option("--config", blobs_config, "Configuration file (JSON)")->required();
  blobs_cmd->add_flag("--reindex", reindex,
                      "Add intact pack records missing from the index (with the daemon stopped: a record being "
                      "written is not yet durable)");

  tributary::agg::GcCommand gc_cmd;
  auto* gc_sub = app.add_subcommand(
      "gc", "Garbage-collect the blob store: blobs no live resource and no change the change log keeps names are "
            "condemned, removed by a later gc once the grace period has passed if still named nowhere, and pack "
            "files mostly dead are rewritten to give the disk back; with the s3 store, this node's copies of "
            "blobs the bucket holds are removed past content.cache_bytes, and the bucket is collected the same "
            "way (rows, then the objects left with none). Safe beside running daemons, syncs "
            "and servers; run it daily (deploy/tributary-gc.timer). Sources removed from the config longer than "
            "removed_source_retention are purged first. Prints what it found and did.");
  gc_sub->add_option("--config", gc_cmd.config_path, "Configuration file (JSON)")->required();
  gc_sub->add_option("--grace", gc_cmd.grace,
                     "How long a blob stays condemned before it may be removed (default 24h); longer than any "
                     "sync batch takes")
      ->capture_default_str();
  gc_sub->add_flag("--dry-run", gc_cmd.dry_run, "Report what is garbage; mark, remove and rewrite nothing");

  std::string retire_config, retire_source;
  auto* retire_sub = app.add_subcommand(
      "retire", "Purge at once every trace of a source removed from the config (feeds, resources, change log, runs, "
                "history; its content blobs are then garbage for gc). A removed source's documents answer 410 Gone "
                "from the moment it leaves the config; without retire, gc purges it after removed_source_retention "
                "(default 30d). Exit 0 purged, 1 no such source or failure, 2 the source is still configured.");
  retire_sub->add_option("--config", retire_config, "Configuration file (JSON)")->required();
  retire_sub->add_option("source", retire_source, "The source's name")->required();

  std::string migrate_blobs_config;
  auto* migrate_blobs_cmd = app.add_subcommand(
      "migrate-blobs", "Upload every blob the database names from this node's blob store (data_dir) into the S3 "
                       "bucket of the config's content section (store \"s3\"), packed, skipping what the bucket "
                       "has: run again, it resumes. Run it on each node that stored content before the switch, "
                       "before other nodes serve. Exit 0 when every named blob is in the bucket.");
  migrate_blobs_cmd->add_option("--config", migrate_blobs_config, "Configuration file (JSON)")->required();

  std::string serve_config;
  auto* serve_cmd = app.add_subcommand(
      "serve", "Serve our own ResourceSync documents and content (read-only over the store) on the configured "
               "`listen` address until SIGINT/SIGTERM.");
  serve_cmd->add_option("--config", serve_config, "Configuration file (JSON)")->required();

  std::string run_config;
  auto* run_cmd = app.add_subcommand(
      "run", "Run as a service: follow every enabled source on its schedule, republish, and report status over "
             "HTTP (/status, /api/v1/status, /metrics, /healthz, /readyz) on `listen`. SIGHUP reloads the "
             "config, SIGINT/SIGTERM stop (exit 0).");
  run_cmd->add_option("--config", run_config, "Configuration file (JSON)")->required();

  agg::SimulateOptions sim;
  std::string sim_listen = "127.0.0.1:8090";
  auto* sim_cmd = app.add_subcommand(
      "simulate", "Serve a changing ResourceSync Source from memory (for demos, tests and benchmarks) until "
                  "SIGINT/SIGTERM: Source Description, Capability List, Resource List (index past 50,000), Change "
                  "List index with closing parts, a Resource Dump and a Change Dump (a package per closed part), "
                  "and the resources. Deterministic for a seed.");
  sim_cmd->add_option("--listen", sim_listen, "host:port (default 127.0.0.1:8090; port 0: any)");
  sim_cmd->add_option("--public-url", sim.public_url, "Base URL in the documents (default http://<listen>)");
  sim_cmd->add_option("--resources", sim.resources, "Resources at the start (default 1000)");
  sim_cmd->add_option("--change-rate", sim.change_rate, "Changes per second (default 1)")->check(CLI::Range(0.0, 1e6));
  sim_cmd->add_option("--seed", sim.seed, "Seed for which resource changes how (default 1)");
  sim_cmd->add_option("--size", sim.size, "Bytes per resource (default 1024)")->check(CLI::Range(1, 1 << 26));
  sim_cmd->add_option("--part-size", sim.part_size, "Changes per Change List part (default 1000)")
      ->check(CLI::Range(1, 50000));
  sim_cmd->add_option("--max-changes", sim.max_changes, "Stop changing after this many changes (default: never)");
  sim_cmd->add_flag("--mirror", sim.mirror, "Add rel=\"duplicate\" links to a mirror path on the same server");
  sim_cmd->add_flag("--hub", sim.hub,
                    "Offer a Change Notification channel with a WebSub hub of its own (/hub) that pushes every "
                    "change to its subscribers at once (a test tool: in memory, at most 100 subscribers, callbacks "
                    "on public or loopback addresses only)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return agg::k_exit_usage;
  }

  try {
    if (inspect_cmd->parsed()) {
      auto fetcher = sync::make_default_fetcher();
      return agg::run_inspect(inspect, *fetcher, std::cout, std::cerr);
    }
    if (explore_cmd->parsed()) {
      for (const auto& m : explore_map) {
        const auto eq = m.find('=');
        if (eq == std::string::npos || eq == 0) {
          std::cerr << "tributary explore: --map expects PREFIX=TARGET, got '" << m << "'\n";
          return agg::k_exit_usage;
        }
        explore.map.emplace_back(m.substr(0, eq), m.substr(eq + 1));
      }
      auto fetcher = sync::make_default_fetcher();
      return agg::run_explore(explore, *fetcher, std::cout, std::cerr);
    }
    if (check_cmd->parsed()) {
      if (check_path.empty() == check_config_opt.empty()) {
        std::cerr << "tributary check-config: give the file once, as --config FILE (or as an argument)\n";
        return agg::k_exit_usage;
      }
      return agg::run_check_config(check_path.empty() ? check_config_opt : check_path, std::cout, std::cerr);
    }
    if (sync_sub->parsed()) {
      return agg::run_sync(sync_cmd, std::cout, std::cerr);
    }
    if (sim_cmd->parsed()) {
      const auto colon = sim_listen.rfind(':');
      if (colon == std::string::npos) {
        std::cerr << "tributary simulate: --listen expects host:port\n";
        return agg::k_exit_usage;
      }
      sim.host = sim_listen.substr(0, colon);
      sim.port = std::stoi(sim_listen.substr(colon + 1));
      return agg::run_simulate(sim, std::cout, std::cerr);
    }
    if (run_cmd->parsed()) {
      return agg::run_daemon(run_config, std::cout, std::cerr);
    }
    if (serve_cmd->parsed()) {
      return agg::run_serve(serve_config, std::cout, std::cerr);
    }
    if (migrate_blobs_cmd->parsed()) {
      return tributary::agg::run_migrate_blobs(migrate_blobs_config, std::cout, std::cerr);
    }
    if (retire_sub->parsed()) {
      return agg::run_retire(retire_config, retire_source, std::cout, std::cerr);
    }
    if (gc_sub->parsed()) {
      return tributary::agg::run_gc(gc_cmd, std::cout, std::cerr);
    }
    if (history_sub->parsed()) {
      return agg::run_check_history(history_cmd, std::cout, std::cerr);
    }
    if (blobs_cmd->parsed()) {
      return agg::run_check_blobs(blobs_config, reindex, std::cout, std::cerr);
    }
    if (migrate_cmd->parsed()) {
      return agg::run_migrate(config_path, std::cout, std::cerr);
    }
  } catch (const std::exception& e) {
    std::cerr << "tributary: " << e.what() << '\n';
    return agg::k_exit_usage;
  }
  return agg::k_exit_usage;
}

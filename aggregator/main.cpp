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
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include <iostream>

namespace {

using namespace tributary;

// A command of the command line: its subcommand, with its options bound,
// and what runs it once parsed. One add_* function a command, in the order
// --help lists them.
struct Command {
  CLI::App* sub;
  std::function<int()> run;
};

Command add_inspect(CLI::App& app) {
  auto o = std::make_shared<agg::InspectOptions>();
  auto* inspect_cmd = app.add_subcommand(
      "inspect", "Read one ResourceSync document (file or http(s) URL), validate it and print a "
                 "summary. Exit 0 valid, 1 invalid, 2 usage or I/O error.");
  inspect_cmd->add_option("target", o->target, "Path, file:// URL or http(s):// URL")->required();
  inspect_cmd->add_flag("--json", o->json, "Print the whole document as JSON");

  return {inspect_cmd, [o] {
            auto fetcher = sync::make_default_fetcher();
            return agg::run_inspect(*o, *fetcher, std::cout, std::cerr);
          }};
}

Command add_explore(CLI::App& app) {
  auto o = std::make_shared<agg::ExploreOptions>();
  auto map = std::make_shared<std::vector<std::string>>();
  auto* explore_cmd = app.add_subcommand(
      "explore", "Walk a Source's whole tree from any entry point (Source Description, Capability Lists, "
                 "indexes, lists, dumps' manifests, archives; notification channels are shown, not followed), "
                 "validate every document reached and print a tree with counts, time ranges, warnings and "
                 "errors. A bare http(s) origin starts at /.well-known/resourcesync. Requests reach public "
                 "addresses and the entry point's host only (as a source's), at every redirect hop. Exit 0 when every "
                 "document was reached and valid, 1 otherwise, 2 when the entry point cannot be read.");
  explore_cmd->add_option("target", o->target, "Source URL, document URL, path or file:// URL")->required();
  explore_cmd->add_flag("--json", o->json, "Print the tree as one JSON object");
  explore_cmd
      ->add_option("--kind", o->kind,
                   "What the target speaks: resourcesync; oai-pmh (target: the base URL; shows Identify, formats, "
                   "sets and record counts by sampling); iiif-discovery (target: the stream's OrderedCollection; "
                   "shows pages, activities by type, objects and time span)")
      ->check(CLI::IsMember({"resourcesync", "oai-pmh", "iiif-discovery"}))
      ->capture_default_str();
  explore_cmd->add_option("--max-documents", o->max_documents, "Stop after reading this many documents")
      ->capture_default_str();
  explore_cmd->add_option("--map", *map,
                          "PREFIX=TARGET: read URLs starting with PREFIX from TARGET (a path or URL) instead, "
                          "e.g. http://localhost/=./mirror/ (repeatable)");

  return {explore_cmd, [o, map] {
            for (const auto& m : *map) {
              const auto eq = m.find('=');
              if (eq == std::string::npos || eq == 0) {
                std::cerr << "tributary explore: --map expects PREFIX=TARGET, got '" << m << "'\n";
                return agg::k_exit_usage;
              }
              o->map.emplace_back(m.substr(0, eq), m.substr(eq + 1));
            }
            auto fetcher = sync::make_default_fetcher();
            return agg::run_explore(*o, *fetcher, std::cout, std::cerr);
          }};
}

Command add_check_config(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto opt = std::make_shared<std::string>();
  auto* check_cmd = app.add_subcommand(
      "check-config", "Validate a configuration file and print every problem with its JSON pointer. "
                      "Exit 0 valid, 1 invalid.");
  check_cmd->add_option("--config", *opt, "Configuration file (JSON)");
  check_cmd->add_option("file", *path, "Configuration file (JSON), as an argument (same as --config)");

  return {check_cmd, [path, opt] {
            if (path->empty() == opt->empty()) {
              std::cerr << "tributary check-config: give the file once, as --config FILE (or as an argument)\n";
              return agg::k_exit_usage;
            }
            return agg::run_check_config(path->empty() ? *opt : *path, std::cout, std::cerr);
          }};
}

Command add_migrate(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto* migrate_cmd = app.add_subcommand(
      "migrate", "Apply missing database schema migrations (each in one transaction). Exit 0 on success.");
  migrate_cmd->add_option("--config", *path, "Configuration file (JSON)")->required();

  return {migrate_cmd, [path] { return agg::run_migrate(*path, std::cout, std::cerr); }};
}

Command add_sync(CLI::App& app) {
  auto o = std::make_shared<agg::SyncCommand>();
  auto* sync_sub = app.add_subcommand(
      "sync", "Run each source (or one) once: --baseline, --incremental or --audit [--repair]. Prints one line "
              "per source. Exit 0 when all succeeded, 1 if any failed or had failed resources, 2 usage.");
  sync_sub->add_option("--config", o->config_path, "Configuration file (JSON)")->required();
  sync_sub->add_option("--source", o->source, "Only this source (by name)");
  sync_sub->add_flag("--baseline", o->baseline, "Full sync from the Resource List");
  sync_sub->add_flag("--incremental", o->incremental,
                     "Apply the Change List after the watermark (baselines first if never synced)");
  sync_sub->add_flag("--audit", o->audit, "Compare the store with the current Resource List");
  sync_sub->add_flag("--repair", o->repair, "With --audit: fix what differs");
  sync_sub->add_option("--batch-size", o->batch_size,
                       "Entries applied per transaction (default 1000)")->check(CLI::Range(1, 1000000));
  sync_sub->add_flag("--wait", o->wait,
                     "If another run (a daemon, another sync) holds a source, wait for it to end instead of "
                     "skipping that source");

  return {sync_sub, [o] { return agg::run_sync(*o, std::cout, std::cerr); }};
}

Command add_check_history(CLI::App& app) {
  auto o = std::make_shared<agg::CheckHistoryCommand>();
  auto* history_sub = app.add_subcommand(
      "check-history",
      "Check the change log we publish (our Change Lists) against what a follower relies on: no (URI, change, "
      "upstream time) logged twice, no URI's times going back, each URI's last entry what we hold. Prints totals "
      "and the first problems. --repair appends one corrective change for each URI whose last entry disagrees "
      "(nothing in the past is rewritten), so that followers converge. Exit 0 when the log holds (after the "
      "repair, if asked), 1 otherwise.");
  history_sub->add_option("--config", o->config_path, "Configuration file (JSON)")->required();
  history_sub->add_option("--source", o->source, "Only this source (by name)");
  history_sub->add_flag("--repair", o->repair,
                        "Append a corrective change for each URI whose last entry is not what we hold");
  history_sub->add_option("--limit", o->limit, "Problems printed per source at most")
      ->capture_default_str();

  return {history_sub, [o] { return agg::run_check_history(*o, std::cout, std::cerr); }};
}

Command add_check_blobs(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto reindex = std::make_shared<bool>(false);
  auto* blobs_cmd = app.add_subcommand(
      "check-blobs", "Read the whole blob store: re-hash every pack record and blob file against its name and check "
                     "every index entry. --reindex adds intact records the index lacks (rebuilds a lost index from "
                     "the packs). Prints totals and each problem. Exit 0 when nothing is wrong, 1 otherwise.");
  blobs_cmd->add_option("--config", *path, "Configuration file (JSON)")->required();
  blobs_cmd->add_flag("--reindex", *reindex,
                      "Add intact pack records missing from the index (with the daemon stopped: a record being "
                      "written is not yet durable)");

  return {blobs_cmd, [path, reindex] { return agg::run_check_blobs(*path, *reindex, std::cout, std::cerr); }};
}

Command add_gc(CLI::App& app) {
  auto o = std::make_shared<agg::GcCommand>();
  auto* gc_sub = app.add_subcommand(
      "gc", "Garbage-collect the blob store: blobs no live resource and no change the change log keeps names are "
            "condemned, removed by a later gc once the grace period has passed if still named nowhere, and pack "
            "files mostly dead are rewritten to give the disk back; with the s3 store, this node's copies of "
            "blobs the bucket holds are removed past content.cache_bytes, and the bucket is collected the same "
            "way (rows, then the objects left with none). Safe beside running daemons, syncs "
            "and servers; run it daily (deploy/tributary-gc.timer). Sources removed from the config longer than "
            "removed_source_retention are purged first. Prints what it found and did.");
  gc_sub->add_option("--config", o->config_path, "Configuration file (JSON)")->required();
  gc_sub->add_option("--grace", o->grace,
                     "How long a blob stays condemned before it may be removed (default 24h); longer than any "
                     "sync batch takes")
      ->capture_default_str();
  gc_sub->add_flag("--dry-run", o->dry_run, "Report what is garbage; mark, remove and rewrite nothing");

  return {gc_sub, [o] { return agg::run_gc(*o, std::cout, std::cerr); }};
}

Command add_retire(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto source = std::make_shared<std::string>();
  auto* retire_sub = app.add_subcommand(
      "retire", "Purge at once every trace of a source removed from the config (feeds, resources, change log, runs, "
                "history; its content blobs are then garbage for gc). A removed source's documents answer 410 Gone "
                "from the moment it leaves the config; without retire, gc purges it after removed_source_retention "
                "(default 30d). Exit 0 purged, 1 no such source or failure, 2 the source is still configured.");
  retire_sub->add_option("--config", *path, "Configuration file (JSON)")->required();
  retire_sub->add_option("source", *source, "The source's name")->required();

  return {retire_sub, [path, source] { return agg::run_retire(*path, *source, std::cout, std::cerr); }};
}

Command add_migrate_blobs(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto* migrate_blobs_cmd = app.add_subcommand(
      "migrate-blobs", "Upload every blob the database names from this node's blob store (data_dir) into the S3 "
                       "bucket of the config's content section (store \"s3\"), packed, skipping what the bucket "
                       "has: run again, it resumes. Run it on each node that stored content before the switch, "
                       "before other nodes serve. Exit 0 when every named blob is in the bucket.");
  migrate_blobs_cmd->add_option("--config", *path, "Configuration file (JSON)")->required();

  return {migrate_blobs_cmd, [path] { return agg::run_migrate_blobs(*path, std::cout, std::cerr); }};
}

Command add_serve(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto* serve_cmd = app.add_subcommand(
      "serve", "Serve our own ResourceSync documents and content, our OAI-PMH data provider at /oai and "
               "our IIIF Change Discovery streams under /activity/ (read-only over the store), on the configured `listen` address until SIGINT/SIGTERM.");
  serve_cmd->add_option("--config", *path, "Configuration file (JSON)")->required();

  return {serve_cmd, [path] { return agg::run_serve(*path, std::cout, std::cerr); }};
}

Command add_run(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto* run_cmd = app.add_subcommand(
      "run", "Run as a service: follow every enabled source on its schedule, republish, and report status over "
             "HTTP (/status, /api/v1/status, /metrics, /healthz, /readyz) on `listen`. SIGHUP reloads the "
             "config, SIGINT/SIGTERM stop (exit 0).");
  run_cmd->add_option("--config", *path, "Configuration file (JSON)")->required();

  return {run_cmd, [path] { return agg::run_daemon(*path, std::cout, std::cerr); }};
}

Command add_simulate(CLI::App& app) {
  auto o = std::make_shared<agg::SimulateOptions>();
  auto listen = std::make_shared<std::string>("127.0.0.1:8090");
  auto* sim_cmd = app.add_subcommand(
      "simulate", "Serve a changing ResourceSync Source from memory (for demos, tests and benchmarks) until "
                  "SIGINT/SIGTERM: Source Description, Capability List, Resource List (index past 50,000), Change "
                  "List index with closing parts, a Resource Dump and a Change Dump (a package per closed part), "
                  "and the resources. Deterministic for a seed.");
  sim_cmd->add_option("--listen", *listen, "host:port (default 127.0.0.1:8090; port 0: any)");
  sim_cmd->add_option("--public-url", o->public_url, "Base URL in the documents (default http://<listen>)");
  sim_cmd->add_option("--resources", o->resources, "Resources at the start (default 1000)");
  sim_cmd->add_option("--change-rate", o->change_rate, "Changes per second (default 1)")->check(CLI::Range(0.0, 1e6));
  sim_cmd->add_option("--seed", o->seed, "Seed for which resource changes how (default 1)");
  sim_cmd->add_option("--size", o->size, "Bytes per resource (default 1024)")->check(CLI::Range(1, 1 << 26));
  sim_cmd->add_option("--part-size", o->part_size, "Changes per Change List part (default 1000)")
      ->check(CLI::Range(1, 50000));
  sim_cmd->add_option("--max-changes", o->max_changes, "Stop changing after this many changes (default: never)");
  sim_cmd->add_flag("--mirror", o->mirror, "Add rel=\"duplicate\" links to a mirror path on the same server");
  sim_cmd->add_flag("--hub", o->hub,
                    "Offer a Change Notification channel with a WebSub hub of its own (/hub) that pushes every "
                    "change to its subscribers at once (a test tool: in memory, at most 100 subscribers, callbacks "
                    "on public or loopback addresses only)");

  return {sim_cmd, [o, listen] {
            const auto colon = listen->rfind(':');
            if (colon == std::string::npos) {
              std::cerr << "tributary simulate: --listen expects host:port\n";
              return agg::k_exit_usage;
            }
            o->host = listen->substr(0, colon);
            o->port = std::stoi(listen->substr(colon + 1));
            return agg::run_simulate(*o, std::cout, std::cerr);
          }};
}

} // namespace

int main(int argc, char** argv) {
  // Without TZ, glibc's mktime stats /etc/localtime on every call, and
  // libzip calls it for every entry of an archive it opens (a stack sample
  // of a 1,000,000-resource dump baseline found the sync thread there).
  // This keeps the local zone, read once.
  ::setenv("TZ", ":/etc/localtime", 0);
  CLI::App app{"Tributary: a ResourceSync aggregator and mirror.", "tributary"};
  app.set_version_flag("--version", std::string("tributary ") + std::string(version()));
  app.require_subcommand(1);
  const std::vector<Command> commands = {
      add_inspect(app), add_explore(app), add_check_config(app), add_migrate(app),
      add_sync(app),    add_check_history(app), add_check_blobs(app), add_gc(app),
      add_retire(app),  add_migrate_blobs(app), add_serve(app),  add_run(app),
      add_simulate(app),
  };
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
    for (const auto& c : commands) {
      if (c.sub->parsed()) {
        return c.run();
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "tributary: " << e.what() << '\n';
    return agg::k_exit_usage;
  }
  return agg::k_exit_usage;
}

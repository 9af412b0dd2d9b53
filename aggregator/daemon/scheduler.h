#pragma once

#include "sync_engine/source_config.h"
#include "store/store.h"

#include <chrono>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace tributary::agg {

using Time = std::chrono::system_clock::time_point;

// What the scheduler is doing with a source (the API's `activity`; the
// source's state, in sync or not, is the status's: see sync_state_of):
// idle (waiting for its next run), syncing, backing_off (after failed
// runs), waiting (for the node: the database or the disk), busy (another
// process runs it), paused (by an operator), disabled (by the config).
enum class SourceState { idle, syncing, backing_off, waiting, busy, paused, disabled };
std::string_view to_string(SourceState s);

struct Job {
  std::string source;
  store::RunMode mode = store::RunMode::incremental;
  bool requested = false; // asked for (an operator, a notification)
  store::RunTrigger trigger = store::RunTrigger::schedule;
};

// Decides which source syncs when. Pure: time comes in as an argument, so
// tests drive it without sleeping; not thread-safe (the daemon locks).
// - A source is due when first seen; after a success it is due again after
//   `interval` ±10% jitter (so hundreds of sources do not fire together).
// - Every `audit_interval` (if set) its next run is an audit instead.
// - After a failure it backs off: 30 s, 1, 2, 4 … minutes, capped at one
//   hour (or its interval, if longer), and recovers by itself on success.
// - At most `slots` jobs start at once; the longest-waiting go first; a
//   source never runs twice at once. Runs that look stalled (the daemon
//   counts those that made no progress for a while) hold at most
//   `slots - 1` of them: one is always left for the others, up to twice
//   `slots` runs in all, so that Sources that never answer cannot stop
//   every healthy one. A source whose last run stalled counts as stalled
//   from the moment its next run starts: four stalled Sources that came
//   due together took every slot for the 10 s before they looked stalled
//   again, and a healthy Source polled every 2 s waited 10-11 s (#50).
class Scheduler {
public:
  explicit Scheduler(uint64_t seed = std::random_device{}());

  // Replaces the configured sources. New ones are due now; removed ones are
  // forgotten, but one still running is kept, hidden, until finished(), so
  // that a source removed and added back while it runs is not started twice;
  // changed ones keep their timing.
  void configure(const std::vector<sync::SourceConfig>& sources, Time now);
  // Jobs to start now, at most `slots` (`stalled` of the running ones count
  // as slots - 1 at most, see above); marks them running.
  std::vector<Job> due(Time now, size_t slots, size_t stalled = 0);
  // A job ended (ok: it succeeded, fully or partly).
  void finished(const std::string& source, store::RunMode mode, bool ok, Time now);
  // The running job of `source` looks stalled (no progress for a while):
  // its next run counts as stalled from its start, unless this one ends
  // without stalling again.
  void stalled(const std::string& source);
  // A job did not run: another process held the source. Shown as busy and
  // tried again after k_busy_retry (or its interval, if shorter), with no
  // back-off (it is no failure).
  void busy(const std::string& source, Time now);
  static constexpr std::chrono::seconds k_busy_retry{30};
  // A job stopped for the node, not the source (the database could not be
  // reached, the disk is full): no failure of the source's, so no back-off.
  // It is tried again every k_node_retry (each try fails at once while the
  // database is down; the daemon starts nothing while the disk is full),
  // in the same mode, and at once when node_back() says the node is well.
  void wait_for_node(const std::string& source, store::RunMode mode, Time now);
  static constexpr std::chrono::seconds k_node_retry{2};
  // The database answers again, or space returned: every source waiting
  // for the node is due now.
  void node_back(Time now);
  enum class Request { queued, unknown, disabled, paused };
  // Runs `mode` on the source as soon as a slot is free. Requests that
  // arrive before it starts (notifications during a run, say) make one
  // run: of the strongest mode asked (baseline, then audit, then
  // incremental), recorded with the first operator's trigger if any.
  Request request(const std::string& source, store::RunMode mode,
                  store::RunTrigger trigger = store::RunTrigger::operator_);
  // An operator paused (true) or resumed the source: a paused source starts
  // no run (a run under way finishes), and requests are refused (paused).
  // Unknown names are remembered, for a source configured later.
  void set_paused(const std::string& source, bool paused);
  bool paused(const std::string& source) const;
  // While a source's notifications are pushed (an active subscription), it
  // is polled no more often than `at_least` (0: its interval again).
  void stretch(const std::string& source, std::chrono::seconds at_least);
  // The earliest time a job becomes due (nullopt: nothing scheduled).
  std::optional<Time> next_due() const;

  struct View {
    std::string name;
    SourceState state = SourceState::idle;
    std::optional<store::RunMode> running;
    Time next_run{};
    std::optional<Time> next_audit;
    unsigned consecutive_failures = 0;
    std::optional<std::string> queued; // a requested mode waiting for a slot
    std::optional<store::RunTrigger> queued_by;
    bool paused = false;
    bool waiting_for_node = false;
  };
  std::vector<View> view() const;
  // The source's configuration, or nullptr.
  const sync::SourceConfig* source(const std::string& name) const;

  // The delay before retrying after `failures` consecutive failures.
  static std::chrono::seconds backoff(unsigned failures, std::chrono::seconds interval);

private:
  struct Entry {
    sync::SourceConfig config;
    Time next_run{};
    std::optional<Time> next_audit;
    unsigned failures = 0;
    bool running = false;
    store::RunMode running_mode = store::RunMode::incremental;
    std::optional<store::RunMode> requested;
    store::RunTrigger requested_by = store::RunTrigger::operator_;
    bool started = false; // a run started since this process began: later ones are not "startup"
    bool removed = false; // gone from the config, kept while its run lasts
    bool busy = false;    // its last job found another process running it
    bool waiting_for_node = false; // its last job stopped for the node (database unreachable, disk full)
    std::optional<store::RunMode> retry_mode; // the mode of that job, when not incremental
    std::chrono::seconds stretched{0}; // see stretch()
    bool suspect = false;          // its last run stalled: the next counts as stalled from its start
    bool stalled_this_run = false; // the running job was seen stalled
  };
  std::chrono::seconds jittered(std::chrono::seconds d);

  std::map<std::string, Entry> m_entries;
  std::set<std::string> m_paused;
  std::mt19937_64 m_rng;
};

} // namespace tributary::agg

#!/usr/bin/env bash
# Scale (called by bench/run.sh scale): `tributary run`, default config
# (one source, interval 5 s, nothing else set but `strategy` where named),
# following `tributary simulate --resources N --size 256 --change-rate 20`
# (N = BENCH_SCALE_RESOURCES, default 1,000,000) that stops changing after
# BENCH_SCALE_CHANGES changes (default 600). Once from the Resource Dump
# (strategy "dumps") and once from the Resource List (strategy "lists").
# For each it prints:
#   - the baseline's time and rate (from the run's own record);
#   - where its commits spent their time (publish, waiting, apply: the
#     daemon's tributary_commit_seconds_total);
#   - the daemon's resident memory: peak through the baseline, and steady
#     once every change is in (target: <= 256 MB);
#   - freshness once the store stops changing: how long after its last
#     change our Change List shows it (target 1 s) and our Resource List's
#     `at` passes it (target 30 s), polled every 0.25 s; and how many
#     entries the Resource List's parts hold then (all of them);
#   - PostgreSQL's database size and data_dir's size;
#   - one `tributary gc` beside the daemon: its time and peak RSS;
#   - with BENCH_SCALE_WAITS=1, each of the daemon's threads' time on a core
#     and waiting for one through the baseline (bench/thread_waits.py).
#   bench/scale.sh ROOT PG_CONNINFO
set -euo pipefail
root=$1
pg=$2
bin=${TRIBUTARY_BIN:-"$root/build/bench/aggregator/tributary"}
n=${BENCH_SCALE_RESOURCES:-1000000}
changes=${BENCH_SCALE_CHANGES:-600}
strategies=${BENCH_SCALE_STRATEGIES:-"dumps lists"}
work=$(mktemp -d /tmp/tributary-bench-scale.XXXXXX)
sim_port=18900
port=18901
sim=""
daemon=""
cleanup() {
  [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  [ -n "$sim" ] && kill "$sim" 2>/dev/null && wait "$sim" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
status=0
mb() { awk -v k="$1" 'BEGIN { printf "%.0f MB", k / 1024 }'; }
# CPU seconds (user + system) a process has used, with its reaped children.
cpu_of() {
  awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); print ($12 + $13 + $14 + $15) / hz }' "/proc/$1/stat" 2>/dev/null || echo 0
}
# PostgreSQL's: the postmaster's (with the backends that have exited) and
# every live backend's.
pg_cpu() {
  local pm=$1 total pid
  total=$(cpu_of "$pm")
  for pid in $(pgrep -P "$pm"); do total=$(awk -v a="$total" -v b="$(cpu_of "$pid")" 'BEGIN { print a + b }'); done
  echo "$total"
}
# psql itself, not Debian's wrapper (a Perl program): the loops below ask
# every second, and the wrapper's start-up was 2 s of the host's processor
# time through a baseline of a million.
psql=$(ls /usr/lib/postgresql/*/bin/psql 2>/dev/null | sort -V | tail -1)
psql=${psql:-psql}
postmaster=$(head -1 "$("$psql" "$pg" -Atc "SHOW data_directory")/postmaster.pid")

for strategy in $strategies; do
  db="bench_scale_$strategy"
  "$psql" "$pg" -qc "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
  rm -rf "$work/data"
  # A Source left on the port by an earlier run would be measured instead
  # (it once gave a "1,000,000-resource" baseline of 50,000 in 6 s).
  if curl -sf -o /dev/null "http://127.0.0.1:$sim_port/.well-known/resourcesync"; then
    echo "something already serves 127.0.0.1:$sim_port: stop it first" >&2
    exit 1
  fi
  "$bin" simulate --listen "127.0.0.1:$sim_port" --resources "$n" --size 256 --change-rate 20 \
    --max-changes "$changes" >"$work/sim.log" 2>&1 &
  sim=$!
  for _ in $(seq 600); do curl -sf -o /dev/null "http://127.0.0.1:$sim_port/.well-known/resourcesync" && break; sleep 0.5; done
  if ! kill -0 "$sim" 2>/dev/null; then
    echo "the simulated Source did not start:" >&2
    cat "$work/sim.log" >&2
    exit 1
  fi
  cat >"$work/config.json" <<CFG
{"database": "$pg dbname=$db", "data_dir": "$work/data", "listen": "127.0.0.1:$port",
 "sources": [{"name": "big", "url": "http://127.0.0.1:$sim_port/", "interval": "5s", "strategy": "$strategy"}]}
CFG
  "$bin" migrate --config "$work/config.json" >/dev/null
  pg_cpu_start=$(pg_cpu "$postmaster")
  sim_cpu_start=$(cpu_of "$sim")
  "$bin" run --config "$work/config.json" >"$work/run.log" 2>&1 &
  daemon=$!
  # BENCH_SCALE_WAITS=1: each thread's time on a core and waiting for one
  # through the baseline (bench/thread_waits.py).
  waits=""
  rm -f "$work/baseline.done"
  if [ "${BENCH_SCALE_WAITS:-0}" = 1 ]; then
    python3 "$root/bench/thread_waits.py" "$daemon" 3600 "$work/waits.txt" "$work/baseline.done" &
    waits=$!
  fi
  (while kill -0 "$daemon" 2>/dev/null; do
     printf '%s %s %s\n' "$(date +%s.%N)" "$(awk '/VmRSS/{print $2}' "/proc/$daemon/status" 2>/dev/null || echo 0)" \
       "$(awk '/RssAnon/{print $2}' "/proc/$daemon/status" 2>/dev/null || echo 0)"
     sleep 1
   done) >"$work/rss.log" &
  sampler=$!
  # Our documents, polled: (time, the Resource List's at, the newest
  # datetime in our Change List).
  python3 "$root/bench/scale_poll.py" "http://127.0.0.1:$port/sets/big" >"$work/poll.log" 2>"$work/poll.err" &
  poller=$!
  q() { "$psql" "$pg dbname=$db" -Atc "$1" 2>/dev/null || true; }
  # The baseline: the first run (a new source's first run baselines it)
  # is over.
  for _ in $(seq 3600); do
    [ -n "$(q "SELECT 1 FROM sync_run WHERE id = (SELECT min(id) FROM sync_run) AND status <> 'running'")" ] && break
    sleep 1
  done
  baseline_done=$(date +%s.%N)
  # Where the baseline's commits spent their time (the daemon's /metrics).
  commits=$(curl -sf "http://127.0.0.1:$port/metrics" | awk '
    /^tributary_commits_total / { n = $2 }
    /^tributary_commit_seconds_total\{stage="publish"\}/ { p = $2 }
    /^tributary_commit_seconds_total\{stage="waiting"\}/ { w = $2 }
    /^tributary_commit_seconds_total\{stage="apply"\}/ { a = $2 }
    END { if (n != "") printf "%d batches; summed over them: publish %.1f s, waiting for the batch before %.1f s, apply %.1f s", n, p, w, a }' || true)
  if [ -n "$waits" ]; then touch "$work/baseline.done"; wait "$waits" || true; fi
  # Who spent the CPU of the baseline: our daemon, the simulated Source,
  # PostgreSQL (the sampler and poller's share is the rest of the host's).
  split_ours=$(cpu_of "$daemon")
  split_sim=$(awk -v a="$(cpu_of "$sim")" -v b="$sim_cpu_start" 'BEGIN { print a - b }')
  split_pg=$(awk -v a="$(pg_cpu "$postmaster")" -v b="$pg_cpu_start" 'BEGIN { print a - b }')
  read -r b_status b_secs < <(q "SELECT status, round(extract(epoch FROM finished_at - started_at)::numeric, 1)
                                 FROM sync_run ORDER BY id LIMIT 1" | tr '|' ' ')
  # Every change in: the change log has not moved for 20 s (4 intervals)
  # after the simulator stopped changing.
  last=""
  stable=0
  for _ in $(seq 1200); do
    now=$(q "SELECT coalesce(max(seq), 0) FROM change_log")
    if [ "$now" = "$last" ]; then stable=$((stable + 1)); else stable=0; last=$now; fi
    [ "$stable" -ge 20 ] && break
    sleep 1
  done
  last_change=$(q "SELECT extract(epoch FROM max(recorded_at)) FROM change_log")
  live=$(q "SELECT count(*) FROM resource WHERE state = 'live'")
  sleep 40 # the Resource List's freshness is measured over this
  kill "$poller" 2>/dev/null || true
  kill "$sampler" 2>/dev/null || true
  # Entries in our Resource List's parts.
  listed=$(python3 "$root/bench/scale_poll.py" --count "http://127.0.0.1:$port/sets/big" 2>>"$work/poll.err" || echo "?")
  pg_size=$(q "SELECT pg_database_size('$db')")
  data_size=$(du -sk "$work/data" | cut -f1)
  rss_peak=$(awk -v t="$baseline_done" '$1 <= t && $2 > m { m = $2 } END { print m + 0 }' "$work/rss.log")
  rss_after_peak=$(awk -v t="$baseline_done" '$1 > t && $2 > m { m = $2 } END { print m + 0 }' "$work/rss.log")
  rss_steady=$(tail -1 "$work/rss.log" | cut -d' ' -f2)
  anon_peak=$(awk '$3 > m { m = $3 } END { print m + 0 }' "$work/rss.log")
  cl_lag=$(awk -v t="$last_change" '$3 != "-" && $3 >= t - 0.000002 { printf "%.2f", $1 - t; exit }' "$work/poll.log")
  rl_lag=$(awk -v t="$last_change" '$2 != "-" && $2 >= t - 0.000002 { printf "%.2f", $1 - t; exit }' "$work/poll.log")
  echo "-- strategy $strategy: $n resources of 256 B, then $changes changes at 20/s"
  echo "baseline ($b_status): ${b_secs} s, $(awk -v n="$n" -v s="$b_secs" 'BEGIN { printf "%.0f", n / s }') resources/s"
  echo "CPU through the baseline: tributary $(printf '%.1f' "$split_ours") s, the simulated Source $(printf '%.1f' "$split_sim") s, PostgreSQL $(printf '%.1f' "$split_pg") s (of $(awk -v s="$b_secs" -v c="$(nproc)" 'BEGIN { printf "%.0f", s * c }') s on $(nproc) cores)"
  echo "commits through the baseline: ${commits:-not read from /metrics}"
  echo "daemon RSS: peak $(mb "$rss_peak") through the baseline, peak $(mb "$rss_after_peak") after it, $(mb "$rss_steady") at the end  [target <= 256 MB: $(awk -v a="$rss_peak" -v b="$rss_after_peak" 'BEGIN { print (a <= 262144 && b <= 262144 ? "PASS" : "FAIL") }')]; of which anonymous (not file pages such as the LMDB index and packs mapped in): peak $(mb "$anon_peak")"
  echo "freshness after the last change: Change List ${cl_lag:-never} s [target 1 s], Resource List ${rl_lag:-never} s [target 30 s]; Resource List parts list ${listed} of ${live} live"
  echo "PostgreSQL database $(mb $((pg_size / 1024))), data_dir $(mb "$data_size")"
  awk -v a="${cl_lag:-99}" -v b="${rl_lag:-99}" 'BEGIN { exit !(a <= 1 && b <= 30) }' || status=1
  [ "$listed" = "$live" ] || status=1
  [ -n "$waits" ] && { echo "threads through the baseline (BENCH_SCALE_WAITS):"; cat "$work/waits.txt"; }
  echo "daemon log lines at error level: $(grep -c '"level":"error"\|ERROR\| error ' "$work/run.log" || true)"
  # One blob garbage collection at this size, beside the running daemon
  # (default grace: it marks, removes nothing yet): its time and memory.
  /usr/bin/time -f "%e %M" -o "$work/gc.time" "$bin" gc --config "$work/config.json" >"$work/gc.out" 2>&1 || true
  read -r gc_secs gc_kb <"$work/gc.time" || true
  echo "tributary gc: ${gc_secs:-?} s, peak RSS $(mb "${gc_kb:-0}"); $(grep -E '^(stored|garbage):' "$work/gc.out" | tr '\n' ' ')"
  kill "$daemon"; wait "$daemon" 2>/dev/null || true
  daemon=""
  kill "$sim"; wait "$sim" 2>/dev/null || true
  sim=""
done
exit $status

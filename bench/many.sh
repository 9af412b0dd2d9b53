#!/usr/bin/env bash
# Many sources (called by bench/run.sh many): `tributary run` with the
# default config (each source named with `interval` 1m, nothing else)
# following BENCH_MANY_SOURCES (default 200) `tributary simulate` Sources of
# BENCH_MANY_RESOURCES (default 1,000) resources of 256 B, each changing
# once every 20 s. Prints:
#   - the time until every source has a successful run (the baselines);
#   - over BENCH_MANY_SECONDS (default 180: three intervals) of following:
#     the daemon's CPU (scheduler and runs), its PostgreSQL connections
#     (sampled every second), its RSS;
#   - how long the status API takes with that many sources (/api/v1/status,
#     /metrics, /status, one source, the page's history and a source's
#     detail), median and slowest of 20 each;
#   - how late upstream changes reached our change log (recorded_at -
#     upstream datetime; the target is the interval plus a run).
#   bench/many.sh ROOT PG_CONNINFO
#   BENCH_KEEP_LOG=/tmp/run.log bench/run.sh many   # keeps the daemon's log
set -euo pipefail
root=$1
pg=$2
bin=${TRIBUTARY_BIN:-"$root/build/bench/aggregator/tributary"}
n=${BENCH_MANY_SOURCES:-200}
resources=${BENCH_MANY_RESOURCES:-1000}
secs=${BENCH_MANY_SECONDS:-180}
work=$(mktemp -d /tmp/tributary-bench-many.XXXXXX)
port=18999
base="http://127.0.0.1:$port"
pids=()
daemon=""
cleanup() {
  [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "${BENCH_KEEP_LOG:-}" ] && cp "$work/run.log" "$BENCH_KEEP_LOG"
  rm -rf "$work"
}
trap cleanup EXIT
sources=""
for i in $(seq 0 $((n - 1))); do
  p=$((19000 + i))
  "$bin" simulate --listen "127.0.0.1:$p" --resources "$resources" --size 256 --change-rate 0.05 --seed "$i" \
    >/dev/null 2>&1 &
  pids+=($!)
  sources+="${sources:+,}{\"name\": \"sim$i\", \"url\": \"http://127.0.0.1:$p/\", \"interval\": \"1m\"}"
done
psql "$pg" -qc "DROP DATABASE IF EXISTS bench_many" -c "CREATE DATABASE bench_many" >/dev/null
db="$pg dbname=bench_many"
cat >"$work/config.json" <<CFG
{"database": "$db", "data_dir": "$work/data", "listen": "127.0.0.1:$port", "sources": [$sources]}
CFG
"$bin" migrate --config "$work/config.json" >/dev/null
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
started=$(date +%s.%N)
"$bin" run --config "$work/config.json" >"$work/run.log" 2>&1 &
daemon=$!
until [ "$(psql "$db" -Atc "SELECT count(DISTINCT source_id) FROM sync_run WHERE status = 'succeeded'" 2>/dev/null || echo 0)" = "$n" ]; do
  kill -0 "$daemon" 2>/dev/null || { echo "FAIL: the daemon exited"; tail "$work/run.log"; exit 1; }
  sleep 1
done
insync=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
echo "baselines of $n sources x $resources resources: every source in sync after $insync s (default max_concurrent_syncs)"

# Following: CPU, connections and memory, every second.
t0=$(psql "$db" -Atc "SELECT now()")
ticks=$(getconf CLK_TCK)
cpu() { awk '{ print $14 + $15 }' "/proc/$daemon/stat"; }
c0=$(cpu)
(end=$(( $(date +%s) + secs )); while [ "$(date +%s)" -lt "$end" ]; do
   echo "$(psql "$pg" -Atc "SELECT count(*) FROM pg_stat_activity WHERE datname = 'bench_many' AND pid <> pg_backend_pid()") $(awk '/VmRSS/{print $2}' "/proc/$daemon/status")"
   sleep 1
 done) >"$work/samples" &
sampler=$!
# The status API with this many sources, while the daemon follows them.
sleep $((secs / 3))
for path in /api/v1/status /metrics /status /api/v1/sources/sim7 "/api/v1/history?hours=24&step=900" \
    /api/v1/sources/sim7/detail /status/sources/sim7; do
  for _ in $(seq 20); do curl -s -o /dev/null -w "%{time_total} %{http_code}\n" "$base$path"; done >"$work/api.times"
  sort -n "$work/api.times" | awk -v p="$path" '{ t[NR] = $1; if ($2 != 200) bad++ }
    END { printf "status API %-34s median %.1f ms, slowest %.1f ms over %d requests%s\n", p, t[int((NR + 1) / 2)] * 1000,
          t[NR] * 1000, NR, (bad ? ", " bad " not 200" : "") }'
done
wait "$sampler"
c1=$(cpu)
awk -v c="$((c1 - c0))" -v t="$ticks" -v s="$secs" 'BEGIN { printf "daemon CPU while following: %.1f%% of one core (%.1f s over %d s)\n", 100 * c / t / s, c / t, s }'
sort -n "$work/samples" | awk '{ print $1 }' | sort -n | awk '{ v[NR] = $1 } END { printf "PostgreSQL connections of the daemon: at most %d, median %d (sampled every second)\n", v[NR], v[int((NR + 1) / 2)] }'
awk '{ print $2 }' "$work/samples" | sort -n | awk '{ v[NR] = $1 } END { printf "daemon RSS while following: median %.0f MiB, at most %.0f MiB\n", v[int((NR + 1) / 2)] / 1024, v[NR] / 1024 }'
awk '/^Rss|^Anonymous|^Pss_File/ { printf "%s %.0f MiB  ", $1, $2 / 1024 } END { print "(now, /proc/PID/smaps_rollup)" }' "/proc/$daemon/smaps_rollup"
echo "daemon threads: $(ls "/proc/$daemon/task" | wc -l)"
psql "$db" -At -F ' ' -c "SELECT count(*), round(percentile_cont(0.5) WITHIN GROUP (ORDER BY d)::numeric, 1),
    round(percentile_cont(0.95) WITHIN GROUP (ORDER BY d)::numeric, 1), round(max(d)::numeric, 1)
  FROM (SELECT extract(epoch FROM recorded_at - upstream_datetime) AS d FROM change_log
        WHERE upstream_datetime > '$t0') x" | {
  read -r count p50 p95 max
  echo "propagation of $count upstream changes (interval 1 min): p50 ${p50} s, p95 ${p95} s, max ${max} s  [target: within the interval plus a run]"
}
runs=$(psql "$db" -Atc "SELECT count(*) FROM sync_run WHERE started_at > '$t0'")
failed=$(psql "$db" -Atc "SELECT count(*) FROM sync_run WHERE started_at > '$t0' AND status NOT IN ('succeeded', 'running')")
echo "runs while following: $runs ($failed not succeeded)"
echo "daemon log lines at error level: $(grep -c ' error ' "$work/run.log" || true)"

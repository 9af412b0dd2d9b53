#!/usr/bin/env bash
# Retention (called by bench/run.sh retention, and by scale): does disk stay
# bounded under churn? `tributary run` follows `tributary simulate
# --resources N --size 1024 --change-rate R` (N = BENCH_RETENTION_RESOURCES,
# default 20,000; R = BENCH_RETENTION_RATE, default 50/s; every change is
# new content) for BENCH_RETENTION_SECONDS (default 480). Not the default
# config: `change_retention` is 2 minutes (default 30 days) so that the
# horizon is crossed within the run; everything else is default. Beside the
# running daemon, `tributary gc --grace 30s` (default 24h) runs every 30 s.
# Every 30 s it prints: changes applied so far, change-log rows, blobs
# stored, data_dir (blob store, packs, dump packages) and PostgreSQL sizes.
# Bounded: data_dir and the blob count level off once the horizon and the
# grace period are behind, while changes keep arriving; PASS when the last
# third of the run grew data_dir by less than 10%.
#   bench/retention.sh ROOT PG_CONNINFO
set -euo pipefail
root=$1
pg=$2
bin=${TRIBUTARY_BIN:-"$root/build/bench/aggregator/tributary"}
n=${BENCH_RETENTION_RESOURCES:-20000}
rate=${BENCH_RETENTION_RATE:-50}
seconds=${BENCH_RETENTION_SECONDS:-480}
work=$(mktemp -d /tmp/tributary-bench-retention.XXXXXX)
sim_port=18910
port=18911
sim=""
daemon=""
cleanup() {
  [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  [ -n "$sim" ] && kill "$sim" 2>/dev/null && wait "$sim" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
db=bench_retention
psql "$pg" -qc "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
"$bin" simulate --listen "127.0.0.1:$sim_port" --resources "$n" --size 1024 --change-rate "$rate" \
  >"$work/sim.log" 2>&1 &
sim=$!
for _ in $(seq 600); do curl -sf -o /dev/null "http://127.0.0.1:$sim_port/.well-known/resourcesync" && break; sleep 0.5; done
cat >"$work/config.json" <<CFG
{"database": "$pg dbname=$db", "data_dir": "$work/data", "listen": "127.0.0.1:$port",
 "change_retention": "2m",
 "sources": [{"name": "churn", "url": "http://127.0.0.1:$sim_port/", "interval": "5s"}]}
CFG
"$bin" migrate --config "$work/config.json" >/dev/null
"$bin" run --config "$work/config.json" >"$work/run.log" 2>&1 &
daemon=$!
q() { psql "$pg dbname=$db" -Atc "$1" 2>/dev/null || true; }
start=$(date +%s)
printf '%6s %9s %11s %8s %10s %10s %s\n' "t (s)" "changes" "change_log" "blobs" "data_dir" "postgres" "gc"
sizes=()
while [ $(( $(date +%s) - start )) -lt "$seconds" ]; do
  sleep 30
  gc=$("$bin" gc --grace 30s --config "$work/config.json" 2>&1 | tr '\n' ' ' || true)
  removed=$(sed -n 's/.*removed: \([0-9]*\) blobs.*/\1/p' <<<"$gc")
  repacked=$(sed -n 's/.*repacked: \([0-9]*\) pack files.*/\1/p' <<<"$gc")
  stored=$(sed -n 's/.*stored: \([0-9]*\) blobs.*/\1/p' <<<"$gc")
  applied=$(q "SELECT coalesce(sum(created + updated + deleted), 0) FROM sync_run")
  rows=$(q "SELECT count(*) FROM change_log")
  data=$(du -sk "$work/data" | cut -f1)
  pgsize=$(q "SELECT pg_database_size('$db') / 1024")
  sizes+=("$data")
  printf '%6d %9s %11s %8s %7d MB %7d MB removed %s, packs rewritten %s\n' $(( $(date +%s) - start )) "$applied" "$rows" \
    "${stored:-?}" $((data / 1024)) $((pgsize / 1024)) "${removed:-?}" "${repacked:-?}"
done
k=${#sizes[@]}
third=$(( k / 3 > 0 ? k / 3 : 1 ))
from=${sizes[$((k - third - 1))]:-0}
to=${sizes[$((k - 1))]:-0}
verdict=$(awk -v a="$from" -v b="$to" 'BEGIN { print (b <= a * 1.10 ? "PASS" : "FAIL") }')
echo "data_dir over the last third of the run: $((from / 1024)) MB -> $((to / 1024)) MB  [bounded (< 10% growth): $verdict]"
echo "daemon log lines at error level: $(grep -c '"level":"error"\|ERROR\| error ' "$work/run.log" || true)"
[ "$verdict" = PASS ]

#!/usr/bin/env bash
# bench/run.sh iiif (issue #36): Tributary following an IIIF Change
# Discovery stream of BENCH_IIIF_ACTIVITIES (100,000) activities over half
# as many Manifests, default config (a source of kind iiif-discovery and
# nothing else): activities/s to read and apply the whole stream, peak RSS.
# Then the lag from a new activity to our Change List: with the default
# interval (15 min) it is the interval, so it is measured with interval
# 10 s (said in the output), one activity every 2 s for 40 s.
#   bench/iiif/iiif.sh ROOT PG_CONNINFO
set -euo pipefail
root=$1
pg=$2
bin=${TRIBUTARY_BIN:-"$root/build/bench/aggregator/tributary"}
n=${BENCH_IIIF_ACTIVITIES:-100000}
work=$(mktemp -d /tmp/tributary-bench-iiif.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
python3 "$root/bench/iiif/stream.py" 18741 "$n" &
for _ in $(seq 100); do curl -sf http://127.0.0.1:18741/activity/all-changes >/dev/null && break; sleep 0.3; done
now() { date +%s.%N; }
objects=$((n / 2))
live=$((objects - objects / 10)) # one Update in ten past the Creates is a Delete
setup() { # db interval-json
  psql "$pg" -qc "DROP DATABASE IF EXISTS $1" >/dev/null
  psql "$pg" -qc "CREATE DATABASE $1" >/dev/null
  cat >"$work/$1.json" <<CFG
{"database": "$pg dbname=$1", "data_dir": "$work/$1", "listen": "127.0.0.1:18742",
 "sources": [{"name": "iiif", "kind": "iiif-discovery", "url": "http://127.0.0.1:18741/activity/all-changes"$2}]}
CFG
  "$bin" migrate --config "$work/$1.json" >/dev/null
}
setup iiif_bench ""
t0=$(now)
"$bin" run --config "$work/iiif_bench.json" >"$work/run.log" 2>&1 &
pid=$!
while ! grep -q 'run finished' "$work/run.log"; do
  kill -0 $pid 2>/dev/null || { echo "  the daemon died"; exit 1; }
  sleep 0.2
done
t1=$(now)
held=$(psql "$pg dbname=iiif_bench" -Atc "SELECT count(*) FROM resource WHERE state = 'live'")
rss=$(awk '/VmHWM/{print $2}' /proc/$pid/status)
kill $pid; wait $pid 2>/dev/null || true
secs=$(echo "$t1 - $t0" | bc -l)
printf "  default config: %d activities (%d Manifests held, %d expected) in %.1f s: %.0f activities/s, peak RSS %.0f MB\n" \
  "$n" "$held" "$live" "$secs" "$(echo "$n / $secs" | bc -l)" "$(echo "$rss / 1024" | bc -l)"
grep -h 'run finished' "$work/run.log" | head -1 | sed 's/^/  /'
# Lag, interval 10 s (not the default: with 15 min the lag is the interval).
setup iiif_bench_lag ', "interval": "10s"'
"$bin" run --config "$work/iiif_bench_lag.json" >"$work/lag.log" 2>&1 &
pid=$!
while ! grep -q 'run finished' "$work/lag.log"; do sleep 0.2; done
lags=()
for _ in $(seq 20); do
  url=$(curl -s -X POST http://127.0.0.1:18741/append)
  at=$(now)
  for _ in $(seq 300); do
    if psql "$pg dbname=iiif_bench_lag" -Atc "SELECT 1 FROM change_log WHERE uri = '$url' AND recorded_at > to_timestamp($at) LIMIT 1" | grep -q 1; then
      break
    fi
    sleep 0.1
  done
  lags+=("$(echo "$(now) - $at" | bc -l)")
  sleep 2
done
kill $pid; wait $pid 2>/dev/null || true
printf '%s\n' "${lags[@]}" | sort -n | awk '{a[NR]=$1} END {printf "  lag, interval 10 s (not the default 15 min): p50 %.1f s, max %.1f s over %d activities\n", a[int(NR/2)+1], a[NR], NR}'

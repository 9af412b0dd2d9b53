#!/usr/bin/env bash
# bench/run.sh oai (issue #36): Tributary harvesting an OAI-PMH endpoint of
# BENCH_OAI_RECORDS (100,000) records, pages of 100, default config (a
# source of kind oai-pmh and nothing else); records/s and peak RSS. Side by
# side on the same endpoint, Debian's Perl harvester (HTTP::OAI). Then
# resumption: a harvest killed (SIGKILL) half way and restarted: records
# fetched twice, and the time lost against the uninterrupted harvest.
# Goal: at least 1,400 records/s, and ahead of the Perl harvester.
#   bench/oai/oai.sh ROOT PG_CONNINFO
set -euo pipefail
root=$1
pg=$2
bin=${TRIBUTARY_BIN:-"$root/build/bench/aggregator/tributary"}
n=${BENCH_OAI_RECORDS:-100000}
work=$(mktemp -d /tmp/tributary-bench-oai.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
status=0
python3 "$root/bench/oai/endpoint.py" 18731 "$n" "$work/pages.log" &
for _ in $(seq 100); do curl -sf "http://127.0.0.1:18731/oai/request?verb=Identify" >/dev/null && break; sleep 0.3; done
now() { date +%s.%N; }
held() { psql "$pg dbname=$1" -Atc "SELECT count(*) FROM resource WHERE state = 'live'" 2>/dev/null || echo 0; }
setup() { # db
  psql "$pg" -qc "DROP DATABASE IF EXISTS $1" >/dev/null
  psql "$pg" -qc "CREATE DATABASE $1" >/dev/null
  cat >"$work/$1.json" <<CFG
{"database": "$pg dbname=$1", "data_dir": "$work/$1", "listen": "127.0.0.1:18732",
 "sources": [{"name": "oai", "kind": "oai-pmh", "url": "http://127.0.0.1:18731/oai/request"}]}
CFG
  "$bin" migrate --config "$work/$1.json" >/dev/null
}
wait_all() { # db pid -> waits until every record is held
  while [ "$(held "$1")" -lt "$n" ]; do
    kill -0 "$2" 2>/dev/null || { echo "  the daemon died"; return 1; }
    sleep 0.2
  done
}

# 1. Uninterrupted, default config.
setup oai_bench
: >"$work/pages.log"
t0=$(now)
"$bin" run --config "$work/oai_bench.json" >"$work/run.log" 2>&1 &
pid=$!
wait_all oai_bench $pid
t1=$(now)
rss=$(awk '/VmHWM/{print $2}' /proc/$pid/status)
kill $pid; wait $pid 2>/dev/null || true
secs=$(echo "$t1 - $t0" | bc -l)
rate=$(echo "$n / $secs" | bc -l)
printf "  tributary (default config): %d records in %.1f s: %.0f records/s, peak RSS %.0f MB\n" "$n" "$secs" "$rate" "$(echo "$rss / 1024" | bc -l)"

# 2. Debian's Perl harvester, same endpoint.
read -r pn psecs < <(perl "$root/bench/oai/harvest.pl" http://127.0.0.1:18731/oai/request)
prate=$(echo "$pn / $psecs" | bc -l)
printf "  HTTP::OAI (Perl): %d records in %.1f s: %.0f records/s\n" "$pn" "$psecs" "$prate"

# 3. Killed half way, then restarted.
setup oai_bench_kill
: >"$work/pages.log"
t0=$(now)
"$bin" run --config "$work/oai_bench_kill.json" >"$work/kill.log" 2>&1 &
pid=$!
while [ "$(held oai_bench_kill)" -lt $((n / 2)) ]; do sleep 0.1; done
kill -9 $pid; wait $pid 2>/dev/null || true
at_kill=$(held oai_bench_kill)
"$bin" run --config "$work/oai_bench_kill.json" >>"$work/kill.log" 2>&1 &
pid=$!
wait_all oai_bench_kill $pid
t1=$(now)
kill $pid; wait $pid 2>/dev/null || true
twice=$(sort -n "$work/pages.log" | uniq -d | wc -l)
ksecs=$(echo "$t1 - $t0" | bc -l)
printf "  killed at %d records held, restarted: %d pages (%d records) fetched twice; %.1f s in all, %.1f s lost\n" \
  "$at_kill" "$twice" "$((twice * 100))" "$ksecs" "$(echo "$ksecs - $secs" | bc -l)"
awk -v r="$rate" -v p="$prate" 'BEGIN { ok = r >= 1400 && r > p; printf "  goal: >= 1,400 records/s and ahead of HTTP::OAI: %s\n", ok ? "PASS" : "FAIL"; exit !ok }' || status=1
exit $status

#!/usr/bin/env bash
# The default config against a Source that refuses past 150 requests/s or 4
# at once (503 + Retry-After: 1; bench/limited_server.py, 10 ms an answer),
# called by bench/run.sh sync. Targets (#38): at least 120 requests/s
# sustained (80% of the limit) from the tenth second on, at most 1% of the
# requests refused. The rate over time comes from the server's log.
#   bench/polite.sh ROOT PG_CONNINFO
set -euo pipefail
root=$1
pg=$2
bin=${TRIBUTARY_BIN:-"$root/build/bench/aggregator/tributary"}
n=${BENCH_POLITE_RESOURCES:-3000}
rate=${BENCH_POLITE_RATE:-150}
concurrent=${BENCH_POLITE_CONCURRENT:-4}
port=18702
work=$(mktemp -d /tmp/tributary-bench-polite.XXXXXX)
server_pid=
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$work"' EXIT
python3 "$root/bench/static_source.py" "$work/www" "http://127.0.0.1:$port" "$n" 1024
python3 "$root/bench/limited_server.py" "$work/www" "$port" "$work/requests.log" --rate "$rate" \
  --concurrent "$concurrent" &
server_pid=$!
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
: >"$work/requests.log"
psql "$pg" -qc "DROP DATABASE IF EXISTS bench_polite" -c "CREATE DATABASE bench_polite" >/dev/null
printf '{"database": "%s dbname=bench_polite", "data_dir": "%s/data",\n "sources": [{"name": "polite", "url": "http://127.0.0.1:%s/"}]}\n' \
  "$pg" "$work" "$port" >"$work/config.json"
"$bin" migrate --config "$work/config.json" >/dev/null
echo "-- default config against a server refusing past $rate requests/s or $concurrent at once (503 + Retry-After: 1, 10 ms an answer): $n x 1 KB"
status=0
t0=$(date +%s.%N)
"$bin" sync --config "$work/config.json" --baseline >"$work/sync.out" 2>&1 || status=1
t1=$(date +%s.%N)
sed 's/^/  /' "$work/sync.out" | head -3
grep -q "failed 0" "$work/sync.out" || { echo "FAIL: resources failed"; status=1; }
awk -v n="$n" -v t0="$t0" -v t1="$t1" -v limit="$rate" '
  { t = int($1); if (!start) start = t; s = t - start; if ($2 == 503) refused[s]++; else ok[s]++; if (s > last) last = s }
  END {
    printf "rate over time (s: accepted/refused):";
    for (i = 0; i <= last; i++) printf " %d:%d/%d", i, ok[i], refused[i];
    printf "\n";
    for (i = 0; i <= last; i++) { tot_ok += ok[i]; tot_ref += refused[i] }
    # Sustained: whole seconds from the tenth to the last but one.
    for (i = 10; i < last; i++) { sus += ok[i]; secs++ }
    sustained = secs ? sus / secs : 0;
    share = tot_ref / (tot_ok + tot_ref);
    printf "%d resources in %.1f s; %d requests accepted, %d refused (%.2f%%); sustained from second 10: %.0f requests/s (%.0f%% of %d)  [target >= %d/s and <= 1%% refused: %s]\n",
      n, t1 - t0, tot_ok, tot_ref, 100 * share, sustained, 100 * sustained / limit, limit, 0.8 * limit,
      (sustained >= 0.8 * limit && share <= 0.01 ? "PASS" : "FAIL");
    exit !(sustained >= 0.8 * limit && share <= 0.01)
  }' "$work/requests.log" || status=1
exit $status

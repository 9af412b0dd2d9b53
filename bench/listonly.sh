#!/usr/bin/env bash
# A Source that offers only a Resource List (an index of 50,000-entry
# parts) behind nginx, followed by `tributary run` with the default config
# but `interval: 10s` (called by bench/run.sh listonly):
#   1. the baseline;
#   2. the cost of unchanged polls over BENCH_LISTONLY_IDLE seconds (60):
#      requests nginx answered, the daemon's CPU seconds, its RSS;
#   3. a 1% change (updated resources, spread over every part): the time
#      from the change to its last entry in our change log (what our
#      Change List serves).
#   bench/listonly.sh ROOT PG_CONNINFO
set -euo pipefail
root=$1
pg=$2
bin=${TRIBUTARY_BIN:-"$root/build/bench/aggregator/tributary"}
n=${BENCH_LISTONLY_RESOURCES:-1000000}
idle=${BENCH_LISTONLY_IDLE:-60}
work=$(mktemp -d /tmp/tributary-bench-listonly.XXXXXX)
port=18720
api=18721
source "$root/bench/nginx.sh"
daemon=0
cleanup() { if [ "$daemon" -gt 0 ]; then kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null || true; fi; nginx_stop "$work"; rm -rf "$work"; }
trap cleanup EXIT
t=$(date +%s.%N)
python3 "$root/bench/listonly_source.py" "$work/www" "http://127.0.0.1:$port" "$n"
echo "source written: $n resources in $(( (n + 49999) / 50000 )) parts ($(awk -v a="$t" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s)"
nginx_start "$work" \
  "log_format tiny '\$msec \$status \$request_uri';" \
  "map_hash_max_size 1048576; map_hash_bucket_size 128;" \
  "map \$uri \$version { default 0; include $work/www/versions.map; }" \
  "server { listen 127.0.0.1:$port; root $work/www; access_log $work/access.log tiny;
    location /res/ { default_type text/plain; return 200 \"\$uri v\$version\"; } }"
psql "$pg" -qc "DROP DATABASE IF EXISTS bench_listonly" -c "CREATE DATABASE bench_listonly" >/dev/null
db="$pg dbname=bench_listonly"
cat >"$work/config.json" <<CFG
{"database": "$db", "data_dir": "$work/data", "listen": "127.0.0.1:$api",
 "sources": [{"name": "listonly", "url": "http://127.0.0.1:$port/", "interval": "10s"}]}
CFG
"$bin" migrate --config "$work/config.json" >/dev/null
t0=$(date +%s.%N)
"$bin" run --config "$work/config.json" >"$work/daemon.log" 2>&1 &
daemon=$!
q() { psql "$db" -Atqc "$1"; }
until [ "$(q "SELECT count(*) FROM resource WHERE state = 'live'" 2>/dev/null || echo 0)" -ge "$n" ] &&
      [ "$(q "SELECT count(*) FROM sync_run WHERE status IN ('succeeded','partial')" 2>/dev/null || echo 0)" -ge 1 ]; do
  kill -0 "$daemon" || { echo "FAIL: the daemon died"; tail "$work/daemon.log"; exit 1; }
  sleep 1
done
t1=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" -v n="$n" 'BEGIN { printf "baseline: %d resources in %.1f s (%.0f/s)\n", n, b - a, n / (b - a) }'
sleep 12 # the first poll after the baseline
cpu() { awk '{print $14 + $15}' "/proc/$daemon/stat"; }
hz=$(getconf CLK_TCK)
c0=$(cpu); r0=$(wc -l <"$work/access.log"); runs0=$(q "SELECT count(*) FROM sync_run")
sleep "$idle"
c1=$(cpu); r1=$(wc -l <"$work/access.log"); runs1=$(q "SELECT count(*) FROM sync_run")
rss=$(awk '/VmRSS/ {print $2}' "/proc/$daemon/status"); hwm=$(awk '/VmHWM/ {print $2}' "/proc/$daemon/status")
polls=$((runs1 - runs0))
awk -v c="$((c1 - c0))" -v hz="$hz" -v r="$((r1 - r0))" -v p="$polls" -v s="$idle" -v rss="$rss" -v hwm="$hwm" 'BEGIN {
  printf "unchanged polls: %d in %d s; %d requests (%.1f per poll); daemon CPU %.2f s (%.3f s per poll); RSS %.0f MiB (peak %.0f MiB)\n",
    p, s, r, p ? r / p : 0, c / hz, p ? c / hz / p : 0, rss / 1024, hwm / 1024 }'
# PY_RESYNC=<a checkout of resync/resync>: the reference client follows
# the same Source, by baseline, then by `--audit` after the same change.
py_dst=$work/py-resync
if [ -n "${PY_RESYNC:-}" ]; then
  mkdir -p "$py_dst"
  t=$(date +%s.%N)
  (cd "$py_dst" && /usr/bin/python3 "$PY_RESYNC/resync-sync" --baseline --delay 0 \
    --capabilitylist "http://127.0.0.1:$port/capabilitylist.xml" "http://127.0.0.1:$port/=$py_dst/" >"$work/py-baseline.log" 2>&1) ||
    { echo "py-resync baseline failed:"; tail -5 "$work/py-baseline.log"; }
  awk -v a="$t" -v b="$(date +%s.%N)" -v n="$n" 'BEGIN { printf "py-resync resync-sync --baseline of the same Source: %.1f s (%.0f/s)\n", b - a, n / (b - a) }'
fi
before=$(q "SELECT count(*) FROM change_log WHERE change = 'updated'")
want=$((n / 100))
python3 "$root/bench/listonly_source.py" "$work/www" "http://127.0.0.1:$port" "$n" --change 0.01 --seed 7
nginx -s reload -c "$work/nginx.conf" -p "$work"
tc=$(date +%s.%N)
c2=$(cpu)
until [ "$(q "SELECT count(*) FROM change_log WHERE change = 'updated'")" -ge $((before + want)) ]; do
  kill -0 "$daemon" || { echo "FAIL: the daemon died"; exit 1; }
  awk -v a="$tc" -v b="$(date +%s.%N)" 'BEGIN { exit !(b - a > 600) }' && { echo "FAIL: not all changes logged after 600 s"; exit 1; }
  sleep 0.2
done
td=$(date +%s.%N)
c3=$(cpu)
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$daemon/status")
awk -v a="$tc" -v b="$td" -v w="$want" -v c="$((c3 - c2))" -v hz="$hz" -v hwm="$hwm" 'BEGIN {
  printf "1%% change (%d updated, spread over every part): in our change log %.1f s after the change; daemon CPU %.1f s; peak RSS %.0f MiB\n",
    w, b - a, c / hz, hwm / 1024 }'
fetched=$(awk -v t="$tc" '$1 >= t && $3 ~ /^\/res\// { n++ } END { print n + 0 }' "$work/access.log")
echo "resources fetched for it: $fetched (of $n; the other 99% not fetched again)"
if [ -n "${PY_RESYNC:-}" ]; then
  t=$(date +%s.%N)
  (cd "$py_dst" && /usr/bin/python3 "$PY_RESYNC/resync-sync" --audit --checksum \
    --capabilitylist "http://127.0.0.1:$port/capabilitylist.xml" "http://127.0.0.1:$port/=$py_dst/" >"$work/py-audit.log" 2>&1) || true
  awk -v a="$t" -v b="$(date +%s.%N)" 'BEGIN { printf "py-resync resync-sync --audit --checksum after the same change: %.1f s to report it (it applies nothing; a --baseline would then fetch)\n", b - a }'
  grep -iE "changed|NOT IN SYNC|IN SYNC" "$work/py-audit.log" | tail -2 | sed 's/^/  /'
fi

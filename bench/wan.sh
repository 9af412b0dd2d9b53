#!/usr/bin/env bash
# A Source 50 ms away (#54): Tributary's default baseline and incremental
# against the reference client's, through tools/delay_proxy.py (25 ms each
# way; this project's hosts have no netem), from nginx serving a static
# Source of 1 KB resources.
#   bench/wan.sh ROOT PG_CONNINFO
#   PY_RESYNC=<resync/resync checkout>   adds the reference client's runs
#
# Tributary: BENCH_WAN_RESOURCES (default 10,000) resources, then a Change
# List of BENCH_WAN_CHANGES (1,000) updates, RUNS rounds (default 3), each
# from an empty database, with the default config (the source's name and
# url, nothing else). py-resync takes ~0.1 s a resource at this distance,
# so it reads a Source of BENCH_WAN_PY_RESOURCES (1,000) and a Change List
# of BENCH_WAN_PY_CHANGES (100), PY_RUNS rounds (default 1): the figures
# compared are resources a second. BENCH_WAN_DELAY_MS sets the one-way delay.
set -euo pipefail
root=$1
pg=$2
bin=${TRIBUTARY_BIN:-"$root/build/bench/aggregator/tributary"}
n=${BENCH_WAN_RESOURCES:-10000}
changes=${BENCH_WAN_CHANGES:-1000}
py_n=${BENCH_WAN_PY_RESOURCES:-1000}
py_changes=${BENCH_WAN_PY_CHANGES:-100}
runs=${RUNS:-3}
py_runs=${PY_RUNS:-1}
delay=${BENCH_WAN_DELAY_MS:-25}
nginx_port=18711 proxy_port=18712 py_nginx_port=18713 py_proxy_port=18714
work=$(mktemp -d /tmp/tributary-bench-wan.XXXXXX)
source "$root/bench/nginx.sh"
proxies=()
cleanup() {
  for p in "${proxies[@]}"; do kill "$p" 2>/dev/null || true; done
  nginx_stop "$work"
  rm -rf "$work"
}
trap cleanup EXIT
url="http://127.0.0.1:$proxy_port"
py_url="http://127.0.0.1:$py_proxy_port"
python3 "$root/bench/static_source.py" "$work/www" "$url" "$n" 1024
python3 "$root/bench/static_source.py" "$work/www-py" "$py_url" "$py_n" 1024
nginx_start "$work" "server { listen 127.0.0.1:$nginx_port; root $work/www; }" \
  "server { listen 127.0.0.1:$py_nginx_port; root $work/www-py; }"
python3 "$root/tools/delay_proxy.py" "$proxy_port" "$nginx_port" "$delay" & proxies+=($!)
python3 "$root/tools/delay_proxy.py" "$py_proxy_port" "$py_nginx_port" "$delay" & proxies+=($!)
for _ in $(seq 50); do curl -sf -o /dev/null "$url/capabilitylist.xml" && break; sleep 0.1; done
rtt=$(curl -s -o /dev/null -w '%{time_total}' "$url/res/0")
echo "Source behind a delaying proxy: ${delay} ms each way; one GET on a new connection took ${rtt} s"
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
rate() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.0f", n / s }'; }
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
base_rates=() inc_rates=()
for i in $(seq "$runs"); do
  python3 "$root/bench/static_source.py" "$work/www" "$url" "$n" 1024
  psql "$pg" -qc "DROP DATABASE IF EXISTS bench_wan" -c "CREATE DATABASE bench_wan" >/dev/null 2>&1
  rm -rf "$work/data"
  printf '{"database": "%s dbname=bench_wan", "data_dir": "%s/data",\n "sources": [{"name": "wan", "url": "%s/"}]}\n' \
    "$pg" "$work" "$url" >"$work/config.json"
  "$bin" migrate --config "$work/config.json" >/dev/null
  t0=$(date +%s.%N)
  /usr/bin/time -f '%e s wall, %U s user, %S s sys, %M KB peak RSS' -o "$work/time.txt" \
    "$bin" sync --config "$work/config.json" --baseline >"$work/base.log" 2>&1 || true
  t1=$(date +%s.%N)
  grep -q "created $n, .*failed 0" "$work/base.log" || { echo "baseline $i: not every resource held"; tail -3 "$work/base.log"; exit 1; }
  b=$(secs "$t0" "$t1")
  base_rates+=("$(rate "$n" "$b")")
  python3 "$root/bench/static_changes.py" "$work/www" "$url" "$changes" 1024 "$i"
  t0=$(date +%s.%N)
  "$bin" sync --config "$work/config.json" --incremental >"$work/inc.log" 2>&1 || true
  t1=$(date +%s.%N)
  grep -q "updated $changes, .*failed 0" "$work/inc.log" || { echo "incremental $i: not every change applied"; tail -3 "$work/inc.log"; exit 1; }
  c=$(secs "$t0" "$t1")
  inc_rates+=("$(rate "$changes" "$c")")
  printf 'tributary round %d: baseline %d in %s s (%s/s; %s), incremental %d in %s s (%s/s)\n' \
    "$i" "$n" "$b" "${base_rates[-1]}" "$(cat "$work/time.txt")" "$changes" "$c" "${inc_rates[-1]}"
done
echo "tributary (default config): baseline median $(median "${base_rates[@]}")/s, incremental median $(median "${inc_rates[@]}")/s"
if [ -z "${PY_RESYNC:-}" ]; then
  echo "py-resync: not run (set PY_RESYNC to a checkout of resync/resync)"
  exit 0
fi
py_base=() py_inc=()
for i in $(seq "$py_runs"); do
  python3 "$root/bench/static_source.py" "$work/www-py" "$py_url" "$py_n" 1024
  py="$work/py-$i"
  mkdir -p "$py"
  t0=$(date +%s.%N)
  (cd "$py" && /usr/bin/python3 "$PY_RESYNC/resync-sync" --baseline --delay 0 \
    --capabilitylist "$py_url/capabilitylist.xml" "$py_url/=$py/" >"$work/py-base.log" 2>&1)
  t1=$(date +%s.%N)
  held=$(find "$py" -type f -path "$py/res/*" | wc -l)
  [ "$held" -ge "$py_n" ] || { echo "py-resync baseline $i: $held files"; tail -3 "$work/py-base.log"; exit 1; }
  b=$(secs "$t0" "$t1")
  py_base+=("$(rate "$py_n" "$b")")
  python3 "$root/bench/static_changes.py" "$work/www-py" "$py_url" "$py_changes" 1024 "$i"
  t0=$(date +%s.%N)
  (cd "$py" && /usr/bin/python3 "$PY_RESYNC/resync-sync" --incremental --delay 0 \
    --capabilitylist "$py_url/capabilitylist.xml" "$py_url/=$py/" >"$work/py-inc.log" 2>&1)
  t1=$(date +%s.%N)
  grep -qi "updated=$py_changes\|updated: $py_changes\|$py_changes updated" "$work/py-inc.log" ||
    echo "py-resync incremental $i said: $(tail -2 "$work/py-inc.log" | tr '\n' ' ')"
  c=$(secs "$t0" "$t1")
  py_inc+=("$(rate "$py_changes" "$c")")
  printf 'py-resync round %d: baseline %d in %s s (%s/s), incremental %d in %s s (%s/s)\n' \
    "$i" "$py_n" "$b" "${py_base[-1]}" "$py_changes" "$c" "${py_inc[-1]}"
done
mb=$(median "${base_rates[@]}") mi=$(median "${inc_rates[@]}")
pb=$(median "${py_base[@]}") pi=$(median "${py_inc[@]}")
echo "py-resync: baseline median ${pb}/s, incremental median ${pi}/s"
awk -v a="$mb" -v b="$pb" -v c="$mi" -v d="$pi" \
  'BEGIN { printf "ratio of medians: baseline %.1fx, incremental %.1fx (goal: >= 1,000/s and >= 100x)\n", a / b, c / d }'

#!/usr/bin/env bash
# What a default baseline costs the kernel, per resource (#54): system calls
# by name (`strace -c -f`, a run of its own: strace slows the process, the
# counts are what matter), and context switches and CPU migrations (`perf
# stat`, a run without strace), for 10,000 x 1 KB from nginx on loopback.
#   bench/syscalls.sh ROOT PG_CONNINFO [BINARY...]
# Each binary (default: build/bench's) is measured in turn: pass an older
# build first to have a before and an after.
set -euo pipefail
root=$1
pg=$2
shift 2
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=("$root/build/bench/aggregator/tributary")
n=${BENCH_SYSCALL_RESOURCES:-10000}
port=18721
work=$(mktemp -d /tmp/tributary-bench-syscalls.XXXXXX)
source "$root/bench/nginx.sh"
trap 'nginx_stop "$work"; rm -rf "$work"' EXIT
python3 "$root/bench/static_source.py" "$work/www" "http://127.0.0.1:$port" "$n" 1024
nginx_start "$work" "server { listen 127.0.0.1:$port; root $work/www; }"
fresh() {
  psql "$pg" -qc "DROP DATABASE IF EXISTS bench_sys" -c "CREATE DATABASE bench_sys" >/dev/null 2>&1
  rm -rf "$work/data"
  printf '{"database": "%s dbname=bench_sys", "data_dir": "%s/data",\n "sources": [{"name": "sys", "url": "http://127.0.0.1:%s/"}]}\n' \
    "$pg" "$work" "$port" >"$work/config.json"
  "$1" migrate --config "$work/config.json" >/dev/null
}
for bin in "${bins[@]}"; do
  echo "-- $bin"
  fresh "$bin"
  strace -f -c -o "$work/strace.txt" "$bin" sync --config "$work/config.json" --baseline >"$work/run.log" 2>&1 || true
  grep -q "created $n, .*failed 0" "$work/run.log" || { echo "not every resource held"; tail -3 "$work/run.log"; exit 1; }
  # The calls that matter, per resource: total, then the ten most made.
  awk -v n="$n" '$1 ~ /^[0-9.]+$/ && NF >= 5 { if ($NF == "total") printf "  system calls     %8d  %5.2f a resource\n", $4, $4 / n; else print $4, $NF }' \
    "$work/strace.txt" | sort -k1,1 -rn | awk -v n="$n" 'NF == 2 && NR <= 13 { printf "    %-14s %8d  %5.2f a resource\n", $2, $1, $1 / n } NF != 2'
  fresh "$bin"
  perf stat -e context-switches,cpu-migrations,task-clock -o "$work/perf.txt" \
    "$bin" sync --config "$work/config.json" --baseline >"$work/run.log" 2>&1 || true
  awk -v n="$n" '/context-switches|cpu-migrations/ { gsub(",", "", $1); printf "  %-16s %8d  %5.2f a resource\n", $2, $1, $1 / n }
                 /task-clock/ { gsub(",", "", $1); printf "  %-16s %8.0f ms of CPU\n", "task-clock", $1 }
                 /seconds time elapsed/ { printf "  %-16s %8.3f s wall (%.0f resources/s)\n", "elapsed", $1, n / $1 }' "$work/perf.txt"
  grep -i "warn\|turned off" "$work/run.log" | head -3 || true
done

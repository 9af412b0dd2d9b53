#!/usr/bin/env bash
# Builds the benchmarks optimised (build/bench) and prints their figures.
#   bench/run.sh            # all benchmarks
#   bench/run.sh parse      # one of them (parse, sync)
#   TMPDIR=/dev/shm bench/run.sh sync   # blobs on tmpfs: the engine without this disk
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/deploy/install-deps.sh" >/dev/null
cmake -S "$root" -B "$root/build/bench" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRIBUTARY_BUILD_TESTS=OFF >/dev/null
cmake --build "$root/build/bench" -j "$(nproc)" >/dev/null
which=${1:-all}
echo "machine: $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r)"
status=0
if [ "$which" = all ] || [ "$which" = parse ]; then
  echo "== bench/parse"
  "$root/build/bench/bench/bench_parse" || status=1
fi
if [ "$which" = all ] || [ "$which" = sync ]; then
  echo "== bench/sync (PostgreSQL 15 with default durability; blobs under ${TMPDIR:-/tmp})"
  source "$root/deploy/lib/pg-temp.sh"
  pg_temp_start
  "$root/build/bench/bench/bench_sync" --pg "$PG_TEMP_CONNINFO" || status=1
fi
exit $status

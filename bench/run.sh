#!/usr/bin/env bash
# Builds the benchmarks optimised (build/bench) and prints their figures.
#   bench/run.sh            # all benchmarks
#   bench/run.sh parse      # one of them
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/deploy/install-deps.sh" >/dev/null
cmake -S "$root" -B "$root/build/bench" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRIBUTARY_BUILD_TESTS=OFF >/dev/null
cmake --build "$root/build/bench" -j "$(nproc)" >/dev/null
which=${1:-all}
echo "machine: $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r)"
if [ "$which" = all ] || [ "$which" = parse ]; then
  echo "== bench/parse"
  "$root/build/bench/bench/bench_parse"
fi

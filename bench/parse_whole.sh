#!/usr/bin/env bash
# The reader as a user meets it (called by bench/run.sh parse): `tributary
# inspect` of the generated 50,000-entry Change List, whole process (start,
# read, validate, report), five runs; with PY_RESYNC=<a checkout of
# resync/resync>, the reference client's ChangeList.parse of the same file,
# five runs alternated with ours, and the ratio of the medians.
#   bench/parse_whole.sh ROOT CHANGELIST
set -euo pipefail
root=$1
doc=$2
bin=${TRIBUTARY_BIN:-"$root/build/bench/aggregator/tributary"}
runs=${BENCH_PARSE_RUNS:-5}
secs() { # command... -> wall seconds
  local a b
  a=$(date +%s.%N)
  "$@" >/dev/null 2>&1
  b=$(date +%s.%N)
  awk -v a="$a" -v b="$b" 'BEGIN { printf "%.4f", b - a }'
}
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
ours=()
theirs=()
for _ in $(seq "$runs"); do
  ours+=("$(secs "$bin" inspect "$doc")")
  if [ -n "${PY_RESYNC:-}" ]; then
    theirs+=("$(secs env PYTHONPATH="$PY_RESYNC" /usr/bin/python3 -c \
      "import sys; from resync.change_list import ChangeList; ChangeList().parse(sys.argv[1])" "$doc")")
  fi
done
m=$(median "${ours[@]}")
echo "tributary inspect, 50,000-entry Change List, whole process: median ${m} s (runs: ${ours[*]})"
if [ -n "${PY_RESYNC:-}" ]; then
  p=$(median "${theirs[@]}")
  echo "py-resync ChangeList.parse of the same file: median ${p} s (runs: ${theirs[*]})"
  awk -v a="$m" -v b="$p" 'BEGIN { r = b / a; printf "ratio of the medians: %.0fx  [target >= 100x: %s]\n", r, (r >= 100 ? "PASS" : "FAIL"); exit !(r >= 100) }'
fi

#!/usr/bin/env bash
# Builds Tributary and runs every test (unit + integration) against a
# throwaway PostgreSQL 15 cluster that lives in a temporary directory and is
# removed afterwards. Exits non-zero on any failure.
#
#   deploy/test.sh                 # everything
#   deploy/test.sh -R inspect      # extra arguments go to ctest
#   TRIBUTARY_SANITIZE=1 deploy/test.sh   # ASan + UBSan build (build/asan)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root"

log() { printf 'test.sh: %s\n' "$*"; }

# 1. Dependencies (fast no-op when everything is installed).
bash "$here/install-deps.sh"

# 2. Configure and build.
if [ "${TRIBUTARY_SANITIZE:-0}" = "1" ]; then
  build="$root/build/asan"
  extra=(-DTRIBUTARY_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug)
else
  build="$root/build/test"
  extra=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
fi
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S "$root" -B "$build" -G Ninja -DTRIBUTARY_WERROR=ON "${extra[@]}" >/dev/null
log "building in $build"
cmake --build "$build" -j "$jobs"

# 3. A throwaway PostgreSQL 15 cluster (deploy/lib/pg-temp.sh). Durability
#    settings are relaxed: the tests check atomicity, not the disk.
source "$here/lib/pg-temp.sh"
log "starting PostgreSQL"
PG_TEMP_OPTIONS="-c fsync=off -c synchronous_commit=off -c full_page_writes=off" pg_temp_start
export TRIBUTARY_TEST_PG="$PG_TEMP_CONNINFO"

# 4. Every test, through ctest.
log "running tests"
status=0
ctest --test-dir "$build" --output-on-failure -j "$jobs" "$@" || status=$?
exit $status

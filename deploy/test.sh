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

# 3. A throwaway PostgreSQL 15 cluster, reachable over a unix socket in its
#    own directory (no port to collide with). initdb refuses to run as root,
#    so as root the cluster belongs to the postgres user.
pgbin=/usr/lib/postgresql/15/bin
tmp=$(mktemp -d /tmp/tributary-pg.XXXXXX)
as_pg=()
if [ "$(id -u)" -eq 0 ]; then
  chown postgres: "$tmp"
  as_pg=(runuser -u postgres --)
fi
chmod 700 "$tmp"
cleanup() {
  "${as_pg[@]}" "$pgbin/pg_ctl" -D "$tmp/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

log "starting PostgreSQL in $tmp"
"${as_pg[@]}" "$pgbin/initdb" -D "$tmp/data" -U postgres -A trust --no-sync -E UTF8 --locale=C.UTF-8 >"$tmp/initdb.log" 2>&1 ||
  { cat "$tmp/initdb.log"; exit 1; }
"${as_pg[@]}" "$pgbin/pg_ctl" -D "$tmp/data" -l "$tmp/postgres.log" -w -t 60 \
  -o "-k $tmp -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off" start >/dev/null ||
  { cat "$tmp/postgres.log"; exit 1; }
export TRIBUTARY_TEST_PG="host=$tmp port=5432 user=postgres dbname=postgres"

# 4. Every test, through ctest.
log "running tests"
status=0
ctest --test-dir "$build" --output-on-failure -j "$jobs" "$@" || status=$?
exit $status

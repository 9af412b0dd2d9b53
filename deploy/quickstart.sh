#!/usr/bin/env bash
# README command 1: from a fresh Debian 12 clone to a running Tributary.
# Installs the dependencies, builds, starts a private PostgreSQL cluster
# under ./var (created once, reused later), a simulated upstream Source
# (`tributary simulate`) and `tributary run` with config/quickstart.json, and
# prints the URLs. Ctrl-C stops all of it.
#
#   deploy/quickstart.sh
#   QUICKSTART_RESOURCES=50000 QUICKSTART_CHANGE_RATE=5 deploy/quickstart.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root"
log() { printf 'quickstart: %s\n' "$*"; }

bash "$here/install-deps.sh"

build="$root/build/release"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRIBUTARY_BUILD_TESTS=OFF \
  -DTRIBUTARY_BUILD_BENCH=OFF >/dev/null
log "building in $build"
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)"
bin="$build/aggregator/tributary"

# A private PostgreSQL 15 cluster under ./var/pg, reachable on 127.0.0.1:55432
# only. initdb refuses to run as root, so as root it belongs to postgres.
pgbin=/usr/lib/postgresql/15/bin
var="$root/var"
mkdir -p "$var/data"
as=()
if [ "$(id -u)" -eq 0 ]; then
  as=(runuser -u postgres --)
fi
if [ "$(id -u)" -eq 0 ] && ! runuser -u postgres -- test -x "$var"; then
  log "the postgres user cannot reach $var (a parent directory is closed to it); run as a regular user"
  exit 1
fi
if [ ! -f "$var/pg/PG_VERSION" ]; then
  log "creating the PostgreSQL cluster in $var/pg"
  mkdir -p "$var/pg"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$var/pg"
  chmod 700 "$var/pg"
  "${as[@]}" "$pgbin/initdb" -D "$var/pg" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >"$var/initdb.log"
fi
pg_running() { "${as[@]}" "$pgbin/pg_ctl" -D "$var/pg" status >/dev/null 2>&1; }
if ! pg_running; then
  "${as[@]}" "$pgbin/pg_ctl" -D "$var/pg" -l "$var/pg/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p 55432 -k /tmp" start >/dev/null
fi
conn="host=127.0.0.1 port=55432 user=postgres"
if [ "$(psql "$conn dbname=postgres" -Atc "SELECT 1 FROM pg_database WHERE datname = 'tributary'")" != 1 ]; then
  psql "$conn dbname=postgres" -qc "CREATE DATABASE tributary"
fi
[ -f "$var/admin-token" ] || (umask 077 && openssl rand -hex 24 >"$var/admin-token")

"$bin" check-config config/quickstart.json
"$bin" migrate --config config/quickstart.json

pids=()
stop() {
  trap - INT TERM EXIT
  log "stopping"
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  "${as[@]}" "$pgbin/pg_ctl" -D "$var/pg" -m fast stop >/dev/null 2>&1 || true
  log "stopped (the database and blobs stay in $var; run again to continue)"
  exit 0
}
trap stop INT TERM EXIT

"$bin" simulate --listen 127.0.0.1:8090 --resources "${QUICKSTART_RESOURCES:-10000}" \
  --change-rate "${QUICKSTART_CHANGE_RATE:-2}" --seed 1 --mirror >"$var/simulate.log" 2>&1 &
pids+=($!)
"$bin" run --config config/quickstart.json > >(tee -a "$var/tributary.log") 2>&1 &
pids+=($!)

for _ in $(seq 100); do
  curl -fsS http://127.0.0.1:8080/healthz >/dev/null 2>&1 && break
  sleep 0.1
done
cat <<MSG

  Tributary is running (Ctrl-C stops everything):
    status page:         http://127.0.0.1:8080/status
    status API:          http://127.0.0.1:8080/api/v1/status
    our Source:          http://127.0.0.1:8080/.well-known/resourcesync
    simulated upstream:  http://127.0.0.1:8090/.well-known/resourcesync
    admin token:         $var/admin-token
      curl -X POST -H "Authorization: Bearer \$(cat var/admin-token)" \\
           -d '{"mode":"audit"}' http://127.0.0.1:8080/api/v1/sources/simulated/sync

MSG
wait

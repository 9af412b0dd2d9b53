#!/usr/bin/env bash
# README command 1: from a fresh Debian 12 clone to a running Tributary.
# Installs the dependencies, builds, starts a private PostgreSQL cluster
# under ./var (created once, reused later), a simulated upstream Source
# (`tributary simulate`) and `tributary run` with config/quickstart.json, and
# prints the URLs. Ctrl-C (or SIGTERM) stops all of it, PostgreSQL too.
# PostgreSQL listens on a Unix socket under ./var only (no TCP port, so
# nothing else on the machine can be in its way).
#
#   deploy/quickstart.sh
#   QUICKSTART_RESOURCES=50000 QUICKSTART_CHANGE_RATE=5 deploy/quickstart.sh
# For tests: QUICKSTART_BIN (a built binary: no install, no build),
# QUICKSTART_VAR (instead of ./var), QUICKSTART_PORT and
# QUICKSTART_SIMULATE_PORT (instead of 8080 and 8090).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root"
log() { printf 'quickstart: %s\n' "$*"; }

if [ -n "${QUICKSTART_BIN:-}" ]; then
  bin=$QUICKSTART_BIN
else
  bash "$here/install-deps.sh"
  build="$root/build/release"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRIBUTARY_BUILD_TESTS=OFF \
    -DTRIBUTARY_BUILD_BENCH=OFF >/dev/null
  log "building in $build"
  cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)"
  bin="$build/aggregator/tributary"
fi
port=${QUICKSTART_PORT:-8080}
sim_port=${QUICKSTART_SIMULATE_PORT:-8090}

# A private PostgreSQL 15 cluster under ./var/pg, reachable through a Unix
# socket in ./var/run only. initdb refuses to run as root, so as root it
# belongs to postgres.
pgbin=/usr/lib/postgresql/15/bin
var="${QUICKSTART_VAR:-$root/var}"
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
# The socket's folder: ./var/run, or one under /tmp when that path is too
# long for a socket's name (about 100 bytes).
sock="$var/run"
if [ ${#sock} -gt 90 ]; then
  sock="/tmp/tributary-quickstart-$(id -u)-$(printf '%s' "$var" | md5sum | cut -c1-12)"
fi
mkdir -p "$sock"
[ "$(id -u)" -eq 0 ] && chown postgres: "$sock"
export PGHOST="$sock" PGPORT=5432
pg_running() { "${as[@]}" "$pgbin/pg_ctl" -D "$var/pg" status >/dev/null 2>&1; }
if ! pg_running; then
  if ! "${as[@]}" "$pgbin/pg_ctl" -D "$var/pg" -l "$var/pg/server.log" -w -t 60 \
      -o "-c listen_addresses='' -k $sock -p 5432" start >/dev/null; then
    log "PostgreSQL did not start; the last lines of its log ($var/pg/server.log):"
    tail -n 15 "$var/pg/server.log" | sed 's/^/    /' >&2
    log "fix what it says (another server on this data directory? a full disk?), or remove $var/pg to start afresh"
    exit 1
  fi
fi
conn="user=postgres"
if [ "$(psql "$conn dbname=postgres" -Atc "SELECT 1 FROM pg_database WHERE datname = 'tributary'")" != 1 ]; then
  psql "$conn dbname=postgres" -qc "CREATE DATABASE tributary"
fi
[ -f "$var/admin-token" ] || (umask 077 && openssl rand -hex 24 >"$var/admin-token")

# The shipped config, with this run's folder and ports.
config="$var/quickstart.json"
sed -e "s|\"var/|\"$var/|g" -e "s|127.0.0.1:8080|127.0.0.1:$port|g" -e "s|127.0.0.1:8090|127.0.0.1:$sim_port|g" \
  "$root/config/quickstart.json" >"$config"
"$bin" check-config "$config"
"$bin" migrate --config "$config"

pids=()
stopping=0
stop() {
  # Once, whichever signal came first; the traps stay set (resetting the
  # trap of the signal being handled broke bash: "run_pending_traps: bad
  # value in trap_list[15]", and PostgreSQL kept running).
  [ "$stopping" = 1 ] && return
  stopping=1
  log "stopping"
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  "${as[@]}" "$pgbin/pg_ctl" -D "$var/pg" -m fast stop >/dev/null 2>&1 || true
  log "stopped (the database and blobs stay in $var; run again to continue)"
  exit 0
}
trap stop INT TERM EXIT

"$bin" simulate --listen "127.0.0.1:$sim_port" --resources "${QUICKSTART_RESOURCES:-10000}" \
  --change-rate "${QUICKSTART_CHANGE_RATE:-2}" --seed 1 --mirror >"$var/simulate.log" 2>&1 &
pids+=($!)
"$bin" run --config "$config" > >(tee -a "$var/tributary.log") 2>&1 &
pids+=($!)

for _ in $(seq 100); do
  curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done
cat <<MSG

  Tributary is running (Ctrl-C stops everything):
    status page:         http://127.0.0.1:$port/status
    status API:          http://127.0.0.1:$port/api/v1/status
    our Source:          http://127.0.0.1:$port/.well-known/resourcesync
    simulated upstream:  http://127.0.0.1:$sim_port/.well-known/resourcesync
    admin token:         $var/admin-token
      curl -X POST -H "Authorization: Bearer \$(cat $var/admin-token)" \\
           -d '{"mode":"audit"}' http://127.0.0.1:$port/api/v1/sources/simulated/sync
    PostgreSQL:          PGHOST=$sock psql -U postgres tributary

MSG
wait

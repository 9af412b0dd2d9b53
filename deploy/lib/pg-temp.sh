# Sourced by deploy/test.sh and bench/run.sh: a throwaway PostgreSQL 15
# cluster in a temporary directory, reachable over a unix socket in that
# directory (no port to collide with). initdb refuses to run as root, so as
# root the cluster belongs to the postgres user.
#
#   pg_temp_start        sets PG_TEMP_DIR and PG_TEMP_CONNINFO, stops on EXIT
pg_temp_start() {
  local pgbin=/usr/lib/postgresql/15/bin
  PG_TEMP_DIR=$(mktemp -d /tmp/tributary-pg.XXXXXX)
  PG_TEMP_AS=()
  if [ "$(id -u)" -eq 0 ]; then
    chown postgres: "$PG_TEMP_DIR"
    PG_TEMP_AS=(runuser -u postgres --)
  fi
  chmod 700 "$PG_TEMP_DIR"
  trap pg_temp_stop EXIT INT TERM
  "${PG_TEMP_AS[@]}" "$pgbin/initdb" -D "$PG_TEMP_DIR/data" -U postgres -A trust --no-sync -E UTF8 \
    --locale=C.UTF-8 >"$PG_TEMP_DIR/initdb.log" 2>&1 || { cat "$PG_TEMP_DIR/initdb.log"; return 1; }
  "${PG_TEMP_AS[@]}" "$pgbin/pg_ctl" -D "$PG_TEMP_DIR/data" -l "$PG_TEMP_DIR/postgres.log" -w -t 60 \
    -o "-k $PG_TEMP_DIR -c listen_addresses='' -c max_connections=200 ${PG_TEMP_OPTIONS:-}" start >/dev/null ||
    { cat "$PG_TEMP_DIR/postgres.log"; return 1; }
  PG_TEMP_CONNINFO="host=$PG_TEMP_DIR port=5432 user=postgres dbname=postgres"
}

pg_temp_stop() {
  if [ -n "${PG_TEMP_DIR:-}" ] && [ -d "$PG_TEMP_DIR" ]; then
    "${PG_TEMP_AS[@]}" /usr/lib/postgresql/15/bin/pg_ctl -D "$PG_TEMP_DIR/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$PG_TEMP_DIR"
  fi
}

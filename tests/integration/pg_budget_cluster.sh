#!/usr/bin/env bash
# For the connection-budget test (test_connection_budget.cpp): a PostgreSQL
# 15 cluster of its own with max_connections = 40 (the shared test cluster
# allows 200), and PgBouncer in front of it in transaction mode, both in DIR
# and reachable over Unix sockets there: PostgreSQL on port 5432, PgBouncer
# on port 6432.
#
#   pg_budget_cluster.sh start DIR    # prints nothing; fails with the logs
#   pg_budget_cluster.sh stop DIR
#
# As root, both run as the postgres user (initdb and PgBouncer refuse root).
set -euo pipefail

cmd=$1
dir=$2
pgbin=/usr/lib/postgresql/15/bin
as=()
if [ "$(id -u)" -eq 0 ]; then
  as=(runuser -u postgres --)
fi

case "$cmd" in
start)
  mkdir -p "$dir"
  if [ "$(id -u)" -eq 0 ]; then
    chown postgres: "$dir"
  fi
  chmod 700 "$dir"
  "${as[@]}" "$pgbin/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 --locale=C.UTF-8 \
    >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
  "${as[@]}" "$pgbin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
    -o "-k $dir -c listen_addresses='' -c max_connections=40 -c fsync=off -c synchronous_commit=off" \
    start >/dev/null || { cat "$dir/postgres.log" >&2; exit 1; }
  # Transaction mode: a client holds a server connection for one
  # transaction. 27 server connections at most: with the three nodes'
  # session connections, which go to PostgreSQL directly, 30 of the 40.
  cat >"$dir/pgbouncer.ini" <<EOF
[databases]
* = host=$dir port=5432

[pgbouncer]
listen_addr =
listen_port = 6432
unix_socket_dir = $dir
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
default_pool_size = 27
max_db_connections = 27
max_client_conn = 200
server_reset_query =
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
EOF
  echo '"postgres" ""' >"$dir/userlist.txt"
  if [ "$(id -u)" -eq 0 ]; then
    chown postgres: "$dir/pgbouncer.ini" "$dir/userlist.txt"
  fi
  "${as[@]}" /usr/sbin/pgbouncer -d "$dir/pgbouncer.ini" || { cat "$dir/pgbouncer.log" >&2; exit 1; }
  for _ in $(seq 100); do
    [ -S "$dir/.s.PGSQL.6432" ] && exit 0
    sleep 0.1
  done
  echo "PgBouncer did not start" >&2
  cat "$dir/pgbouncer.log" >&2
  exit 1
  ;;
stop)
  if [ -f "$dir/pgbouncer.pid" ]; then
    kill "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true
  fi
  "${as[@]}" "$pgbin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
  ;;
esac

# Sourced by the benchmarks: one way to run nginx on loopback.
#   nginx_start WORK 'server { ... }' ...   writes WORK/nginx.conf (static
#                                            files, keep-alive, no access log
#                                            unless a server sets one) and starts it
#   nginx_stop WORK
nginx_start() {
  local work=$1
  shift
  {
    cat <<NGINX
user root;
worker_processes 2;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
  keepalive_requests 100000;
  types { application/xml xml; }
  default_type text/plain;
NGINX
    printf '  %s\n' "$@"
    echo '}'
  } >"$work/nginx.conf"
  nginx -c "$work/nginx.conf" -p "$work"
}

nginx_stop() {
  kill "$(cat "$1/nginx.pid" 2>/dev/null)" 2>/dev/null || true
}

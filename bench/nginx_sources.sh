#!/usr/bin/env bash
# Three baselines with the default config against static Sources served by
# nginx on loopback (called by bench/run.sh sync):
#   1. healthy: 10,000 x 1 KB; target >= 10,000 resources/s; and the same
#      at 100,000 x 1 KB (BENCH_NGINX_LARGE), with peak RSS;
#   2. overloaded: nginx's limit_req answers 503 with Retry-After: 1 past
#      BENCH_THRESHOLD requests/s (default 500, burst 20); the baseline must
#      finish with 0 failed and mostly within the threshold. The rate over
#      time comes from nginx's access log.
#   bench/nginx_sources.sh ROOT PG_CONNINFO
set -euo pipefail
root=$1
pg=$2
bin=${TRIBUTARY_BIN:-"$root/build/bench/aggregator/tributary"}
n=${BENCH_NGINX_RESOURCES:-10000}
threshold=${BENCH_THRESHOLD:-500}
n_limited=${BENCH_LIMITED_RESOURCES:-5000}
n_large=${BENCH_NGINX_LARGE:-100000}
work=$(mktemp -d /tmp/tributary-bench-nginx.XXXXXX)
port=18700
limited_port=18701
large_port=18702
source "$root/bench/nginx.sh"
trap 'nginx_stop "$work"; rm -rf "$work"' EXIT
python3 "$root/bench/static_source.py" "$work/www" "http://127.0.0.1:$port" "$n" 1024
python3 "$root/bench/static_source.py" "$work/limited" "http://127.0.0.1:$limited_port" "$n_limited" 1024
python3 "$root/bench/static_source.py" "$work/large" "http://127.0.0.1:$large_port" "$n_large" 1024
nginx_start "$work" \
  "log_format rate '\$msec \$status';" \
  "limit_req_zone \$server_port zone=limited:1m rate=${threshold}r/s;" \
  "server { listen 127.0.0.1:$port; root $work/www; }" \
  "server { listen 127.0.0.1:$large_port; root $work/large; access_log off; }" \
  "server { listen 127.0.0.1:$limited_port; root $work/limited; access_log $work/limited.log rate;
    limit_req zone=limited burst=20 nodelay; limit_req_status 503; add_header Retry-After 1 always; }"
status=0
run_case() { # name port -> prints tributary sync's line, sets $secs and $rss_mib (peak RSS)
  local name=$1 port=$2
  psql "$pg" -qc "DROP DATABASE IF EXISTS bench_$name" -c "CREATE DATABASE bench_$name" >/dev/null
  printf '{"database": "%s dbname=bench_%s", "data_dir": "%s/data-%s",\n "sources": [{"name": "%s", "url": "http://127.0.0.1:%s/"}]}\n' \
    "$pg" "$name" "$work" "$name" "$name" "$port" >"$work/$name.json"
  "$bin" migrate --config "$work/$name.json" >/dev/null
  local t0 t1
  t0=$(date +%s.%N)
  /usr/bin/time -f %M -o "$work/$name.rss" "$bin" sync --config "$work/$name.json" --baseline \
    >"$work/$name.out" 2>&1 || status=1
  t1=$(date +%s.%N)
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
  rss_mib=$(awk '{ printf "%.0f", $1 / 1024 }' "$work/$name.rss")
  sed 's/^/  /' "$work/$name.out" | head -5
}
echo "-- default config (no max_requests_per_second, concurrency 8) against nginx: $n x 1 KB"
run_case healthy "$port"
awk -v n="$n" -v s="$secs" 'BEGIN { r = n / s; printf "baseline of %d x 1 KB from nginx: %.2f s wall (process start to exit), %.0f resources/s  [target >= 10,000: %s]\n", n, s, r, (r >= 10000 ? "PASS" : "FAIL"); exit !(r >= 10000) }' || status=1
grep -q "failed 0" "$work/healthy.out" || status=1
echo "peak RSS: $rss_mib MiB"

echo "-- default config against nginx: $n_large x 1 KB"
run_case large "$large_port"
awk -v n="$n_large" -v s="$secs" -v m="$rss_mib" 'BEGIN { printf "baseline of %d x 1 KB from nginx: %.2f s wall, %.0f resources/s, peak RSS %d MiB\n", n, s, n / s, m }'
grep -q "failed 0" "$work/large.out" || status=1

echo "-- default config against nginx refusing past $threshold requests/s (limit_req burst 20, 503 + Retry-After: 1): $n_limited x 1 KB"
run_case limited "$limited_port"
grep -q "failed 0" "$work/limited.out" && echo "failed: 0" || { echo "FAIL: resources failed"; status=1; }
# Requests per second as nginx saw them: accepted and refused.
awk -v thr="$threshold" '
  { t = int($1); if (!start) start = t; s = t - start; if ($2 == 503) refused[s]++; else ok[s]++; if (s > last) last = s }
  END {
    printf "rate over time (s: accepted/refused per second):";
    for (i = 0; i <= last; i++) printf " %d:%d/%d", i, ok[i], refused[i];
    printf "\n";
    for (i = 0; i <= last; i++) { tot_ok += ok[i]; tot_ref += refused[i]; if (ok[i] + refused[i] > thr * 1.1) over++ }
    share = tot_ref / (tot_ok + tot_ref);
    printf "accepted %d, refused %d (%.1f%% of requests); seconds with more than %d requests: %d of %d  [target: refused < 5%%: %s]\n",
      tot_ok, tot_ref, 100 * share, thr * 1.1, over, last + 1, (share < 0.05 ? "PASS" : "FAIL");
    exit !(share < 0.05)
  }' "$work/limited.log" || status=1
exit $status

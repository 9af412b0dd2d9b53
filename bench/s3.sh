#!/usr/bin/env bash
# Content on S3 (issue #18), every setting at its default except
# content.store: `tributary sync --baseline` against static Sources served
# by nginx on loopback, content in the local packed store and then in a
# throwaway Ceph RGW (deploy/lib/rgw-temp.sh; its OSD keeps objects in
# RAM, memstore), and `tributary serve` answering content requests from
# each. Called by bench/run.sh s3.
#   1. baselines: 10,000 x 1 KB and 100 x 10 MB, local and s3;
#      target: >= 5,000 resources/s for the small case on s3;
#   2. serving the 10,000 small resources: a node with the local store,
#      and a node of the s3 store with an empty data_dir; one pass asking
#      each resource once (curl, 32 at a time: on s3 every request a Range
#      GET from RGW, then kept as a local cache), and wrk -t2 -c32 in
#      rotation; target: s3 >= 0.5 x local.
#   bench/s3.sh ROOT PG_CONNINFO
set -euo pipefail
root=$1
pg=$2
bin=${TRIBUTARY_BIN:-"$root/build/bench/aggregator/tributary"}
work=$(mktemp -d /tmp/tributary-bench-s3.XXXXXX)
small_port=18800
large_port=18801
serve_port=18802
source "$root/bench/nginx.sh"
source "$root/deploy/lib/rgw-temp.sh"
RGW_TEMP_BYTES=$((4 << 30)) rgw_temp_start
serve_pid=
trap '[ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null; nginx_stop "$work"; rgw_temp_stop; rm -rf "$work"' EXIT
export BENCH_S3_ACCESS_KEY=$RGW_TEMP_ACCESS_KEY BENCH_S3_SECRET_KEY=$RGW_TEMP_SECRET_KEY
python3 "$root/bench/static_source.py" "$work/small" "http://127.0.0.1:$small_port" 10000 1024
python3 "$root/bench/static_source.py" "$work/large" "http://127.0.0.1:$large_port" 100 $((10 << 20))
nginx_start "$work" \
  "server { listen 127.0.0.1:$small_port; root $work/small; }" \
  "server { listen 127.0.0.1:$large_port; root $work/large; }"
status=0

config() { # name store port -> writes $work/<name>.json
  local name=$1 store=$2 port=$3 content='{"store": "local"}'
  if [ "$store" = s3 ]; then
    content="{\"store\": \"s3\", \"endpoint\": \"$RGW_TEMP_ENDPOINT\", \"bucket\": \"bench-${name//_/-}\",
      \"access_key_env\": \"BENCH_S3_ACCESS_KEY\", \"secret_key_env\": \"BENCH_S3_SECRET_KEY\"}"
  fi
  printf '{"database": "%s dbname=bench_s3_%s", "data_dir": "%s/data-%s", "listen": "127.0.0.1:%s",\n "content": %s,\n "sources": [{"name": "%s", "url": "http://127.0.0.1:%s/"}]}\n' \
    "$pg" "$name" "$work" "$name" "$serve_port" "$content" "${name%%_*}" "$port" >"$work/$name.json"
}

baseline() { # name store port count bytes
  local name=$1 store=$2 port=$3 count=$4 bytes=$5
  psql "$pg" -qc "DROP DATABASE IF EXISTS bench_s3_$name" -c "CREATE DATABASE bench_s3_$name" >/dev/null
  config "$name" "$store" "$port"
  "$bin" migrate --config "$work/$name.json" >/dev/null
  local t0 t1
  t0=$(date +%s.%N)
  "$bin" sync --config "$work/$name.json" --baseline >"$work/$name.out" 2>&1 || status=1
  t1=$(date +%s.%N)
  grep -q "failed 0" "$work/$name.out" || { echo "FAIL: $name: resources failed"; sed 's/^/  /' "$work/$name.out" | head -5; status=1; }
  awk -v what="$name" -v n="$count" -v b="$bytes" -v a="$t0" -v z="$t1" 'BEGIN {
    s = z - a; printf "baseline %-14s %6d resources in %6.2f s: %7.0f resources/s, %6.1f MB/s\n", what, n, s, n / s, n * b / s / 1e6 }' |
    tee -a "$work/rates"
}

echo "-- baselines (tributary sync --baseline, default config; content.store local, then s3 on RGW)"
baseline small_local local "$small_port" 10000 1024
baseline small_s3 s3 "$small_port" 10000 1024
baseline large_local local "$large_port" 100 $((10 << 20))
baseline large_s3 s3 "$large_port" 100 $((10 << 20))
rate_of() { awk -v w="$1" '$2 == w { print $8 }' "$work/rates"; }
objects=$(psql "$pg dbname=bench_s3_small_s3" -Atc "SELECT count(DISTINCT object) FROM content_object")
echo "small on s3: 10000 blobs in $objects objects"
awk -v r="$(rate_of small_s3)" 'BEGIN { printf "small on s3: %.0f resources/s  [target >= 5,000: %s]\n", r, (r >= 5000 ? "PASS" : "FAIL"); exit !(r >= 5000) }' || status=1

echo "-- serving the 10,000 small resources (wrk -t2 -c32, a different resource each request)"
cat >"$work/rotate.lua" <<'LUA'
paths = {}
for line in io.lines(os.getenv("BENCH_PATHS")) do paths[#paths + 1] = line end
local n = 0
function setup(thread)
  thread:set("offset", n * 5000)
  n = n + 1
end
counter = 0
function request()
  counter = counter + 1
  return wrk.format("GET", paths[(offset + counter - 1) % #paths + 1])
end
LUA
serve() { # name -> starts tributary serve on $serve_port with that config
  "$bin" serve --config "$work/$1.json" >"$work/serve-$1.log" 2>&1 &
  serve_pid=$!
  for _ in $(seq 200); do curl -sf -o /dev/null "http://127.0.0.1:$serve_port/robots.txt" && break; sleep 0.1; done
}
stop_serve() { kill "$serve_pid"; wait "$serve_pid" 2>/dev/null || true; serve_pid=; }
wrk_rate() { # seconds -> "requests/s requests"
  wrk -t2 -c32 -d"$1"s -s "$work/rotate.lua" "http://127.0.0.1:$serve_port" |
    awk '/Requests\/sec/ { r = int($2) } / requests in / { n = $1 } END { print r, n }'
}
serve small_local
curl -sf "http://127.0.0.1:$serve_port/sets/small/resourcelist.xml" | grep -o '<loc>[^<]*' | sed 's/<loc>//' >"$work/locs"
if grep -q resourcelist- "$work/locs"; then # an index: the parts' entries
  while read -r part; do curl -sf "$part" | grep -o '<loc>[^<]*' | sed 's/<loc>//'; done <"$work/locs" >"$work/locs2"
  mv "$work/locs2" "$work/locs"
fi
sed "s#^http://127.0.0.1:$serve_port##" "$work/locs" >"$work/paths"
export BENCH_PATHS="$work/paths"
echo "paths: $(wc -l <"$work/paths")"
# One pass over every resource, each asked once: 32 curl processes at a
# time, 100 URLs each on one kept-alive connection.
pass() { # -> requests/s of one pass
  local t0 t1
  t0=$(date +%s.%N)
  xargs -P 32 -n 100 curl -s <"$work/locs" >/dev/null
  t1=$(date +%s.%N)
  awk -v n="$(wc -l <"$work/locs")" -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", n / (b - a) }'
}
local_pass=$(pass)
read -r local_rate _ <<<"$(wrk_rate 10)"
stop_serve
# Another machine: the s3 store, the same database and bucket, its own
# (empty) data_dir: the first pass reads every resource from RGW.
sed "s#data-small_s3#data-small_s3-reader#" "$work/small_s3.json" >"$work/small_s3-reader.json"
serve small_s3-reader
cpu() { # CPU seconds used so far by the given pids
  local t=0 p
  for p in "$@"; do
    t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat")))
  done
  awk -v t="$t" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f", t / hz }'
}
ceph_pids=$(cat "$RGW_TEMP_DIR"/run/*.pid | tr '\n' ' ')
ceph_before=$(cpu $ceph_pids)
ours_before=$(cpu "$serve_pid")
t0=$(date +%s.%N)
cold_pass=$(pass)
t1=$(date +%s.%N)
ceph_cpu=$(awk -v a="$(cpu $ceph_pids)" -v b="$ceph_before" 'BEGIN { printf "%.1f", a - b }')
ours_cpu=$(awk -v a="$(cpu "$serve_pid")" -v b="$ours_before" 'BEGIN { printf "%.1f", a - b }')
cold_secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
warm_pass=$(pass)
read -r warm_rate _ <<<"$(wrk_rate 10)"
stop_serve
printf 'one pass, each resource once (curl):  local %6d/s   s3 cold (Range GETs from RGW) %6d/s   s3 again %6d/s\n' \
  "$local_pass" "$cold_pass" "$warm_pass"
printf 'wrk -t2 -c32 -d10s, in rotation:      local %6d/s   s3 (every one read once before) %6d/s\n' "$local_rate" "$warm_rate"
echo "cold pass: $cold_secs s wall on $(nproc) cores; CPU: Ceph (radosgw, mon, osd) $ceph_cpu s, tributary serve $ours_cpu s"
awk -v c="$cold_pass" -v l="$local_pass" 'BEGIN { r = c / l; printf "s3 cold / local, one pass: %.2f  [target >= 0.5: %s]\n", r, (r >= 0.5 ? "PASS" : "FAIL"); exit !(r >= 0.5) }' || status=1
awk -v c="$warm_rate" -v l="$local_rate" 'BEGIN { r = c / l; printf "s3 / local, wrk: %.2f  [target >= 0.5: %s]\n", r, (r >= 0.5 ? "PASS" : "FAIL"); exit !(r >= 0.5) }' || status=1
exit $status

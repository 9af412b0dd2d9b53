#!/usr/bin/env bash
# Load on `tributary run` while it syncs (called by bench/run.sh load):
#   - the daemon, default config (a source named, nothing else), applies a
#     backlog of BENCH_LOAD_CHANGES (default 50,000) changes of 1 KB from a
#     static Source served by nginx;
#   - meanwhile, for BENCH_LOAD_SECONDS (default 60): wrk with 256
#     connections of well-behaved clients (our documents, the status API,
#     /metrics, the status page; asking for gzip as py-resync's HTTP
#     library does; the probe below asks without), a 404 flood (wrk, 64 connections, random
#     2 KiB URIs under the set, each a store lookup), and slowloris (1,200
#     connections dribbling a request head, 300 from each of four loopback
#     addresses: past the per-client cap of 512 nothing is refused; from a
#     fifth address, 600, past it);
#   - the daemon's resident memory, every second.
# Goal: 0 errors for the well-behaved clients; their p99; RSS bounded.
#   bench/load.sh ROOT PG_CONNINFO
#   BENCH_KEEP_LOG=/tmp/run.log bench/run.sh load   # keeps the daemon's log
set -euo pipefail
root=$1
pg=$2
bin=${TRIBUTARY_BIN:-"$root/build/bench/aggregator/tributary"}
changes=${BENCH_LOAD_CHANGES:-50000}
secs=${BENCH_LOAD_SECONDS:-60}
work=$(mktemp -d /tmp/tributary-bench-load.XXXXXX)
up_port=18800
port=18801
base="http://127.0.0.1:$port"
source "$root/bench/nginx.sh"
daemon=""
cleanup() {
  [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  nginx_stop "$work"
  [ -n "${BENCH_KEEP_LOG:-}" ] && cp "$work/run.log" "$BENCH_KEEP_LOG"
  rm -rf "$work"
}
trap cleanup EXIT
python3 "$root/bench/backlog_source.py" "$work/www" "http://127.0.0.1:$up_port" "$changes" 1024
nginx_start "$work" "server { listen 127.0.0.1:$up_port; root $work/www; }"
psql "$pg" -qc "DROP DATABASE IF EXISTS bench_load" -c "CREATE DATABASE bench_load" >/dev/null
cat >"$work/config.json" <<CFG
{"database": "$pg dbname=bench_load", "data_dir": "$work/data", "listen": "127.0.0.1:$port",
 "sources": [{"name": "load", "url": "http://127.0.0.1:$up_port/"}]}
CFG
"$bin" migrate --config "$work/config.json" >/dev/null
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
"$bin" run --config "$work/config.json" >"$work/run.log" 2>&1 &
daemon=$!
started=$(date +%s.%N)
for _ in $(seq 300); do curl -sf -o /dev/null "$base/sets/load/capabilitylist.xml" && break; sleep 0.1; done
curl -sf -o /dev/null "$base/sets/load/capabilitylist.xml" || { echo "FAIL: the set never appeared"; tail "$work/run.log"; exit 1; }

(while kill -0 "$daemon" 2>/dev/null; do ps -o rss= -p "$daemon" 2>/dev/null || true; sleep 1; done) >"$work/rss.log" &
sampler=$!
# The backlog's progress: when every change is held.
(while kill -0 "$daemon" 2>/dev/null; do
   live=$(curl -s "$base/api/v1/sources/load" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["resources"]["live"])' 2>/dev/null || echo 0)
   if [ "$live" -ge "$changes" ]; then
     awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f\n", b - a }' >"$work/backlog.done"
     break
   fi
   sleep 1
 done) &
watcher=$!

cat >"$work/good.lua" <<'LUA'
local paths = {"/.well-known/resourcesync", "/sets/load/capabilitylist.xml", "/sets/load/resourcelist.xml",
               "/api/v1/status", "/api/v1/sources/load", "/metrics", "/status", "/healthz", "/readyz",
               "/sets/load/changelist.xml"}
local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", paths[(i % #paths) + 1], {["Accept-Encoding"] = "gzip, deflate"})
end
-- Every answer that is not 2xx, by status, content type and the start of
-- its body, so that a failure names itself.
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) bad = {} end
function response(status, headers, body)
  if status < 200 or status > 299 then
    local k = status .. " " .. (headers["Content-Type"] or "-") .. " " .. string.sub(string.gsub(body or "", "%s+", " "), 1, 160)
    bad[k] = (bad[k] or 0) + 1
  end
end
function done(summary, latency, requests)
  for _, t in ipairs(threads) do
    for k, v in pairs(t:get("bad")) do io.write(string.format("not 2xx: %d x %s\n", v, k)) end
  end
end
LUA
cat >"$work/flood.lua" <<'LUA'
local n = 0
request = function()
  n = n + 1
  local t = {}
  for k = 1, 256 do t[k] = string.format("%08x", math.random(0, 0x7fffffff)) end
  return wrk.format("GET", "/sets/load/resources/http%3A%2F%2F127.0.0.1%2Fres%2F" .. n .. "-" .. table.concat(t))
end
LUA
# Our Change List appears with the first changes applied: wait for it so
# that every well-behaved path exists.
for _ in $(seq 300); do curl -sf -o /dev/null "$base/sets/load/changelist.xml" && break; sleep 0.1; done

python3 "$root/bench/slowloris.py" 127.0.0.1 "$port" 1200 5 "$secs" 127.0.0.2 127.0.0.3 127.0.0.4 127.0.0.5 >"$work/slow.out" 2>&1 &
slow=$!
python3 "$root/bench/slowloris.py" 127.0.0.1 "$port" 600 5 "$secs" 127.0.0.6 >"$work/slow-capped.out" 2>&1 &
slow_capped=$!
# A probe beside wrk: each well-behaved path in turn, with its own time, so
# that a slow answer can be told apart by path.
(end=$(( $(date +%s) + secs )); while [ "$(date +%s)" -lt "$end" ]; do
   for p in /.well-known/resourcesync /sets/load/capabilitylist.xml /sets/load/resourcelist.xml /api/v1/status \
            /api/v1/sources/load /metrics /status /healthz /readyz /sets/load/changelist.xml; do
     curl -s -o /dev/null -m 20 -w "%{http_code} %{time_total} $p\n" "$base$p"
   done
 done) >"$work/probe.out" 2>&1 &
probe=$!
wrk -t1 -c64 -d"${secs}s" -s "$work/flood.lua" --latency "$base" >"$work/flood.out" 2>&1 &
flood=$!
wrk -t2 -c256 -d"${secs}s" -s "$work/good.lua" --latency --timeout 10s "$base" >"$work/good.out" 2>&1 || true
wait "$flood" "$slow" "$slow_capped" "$probe" || true
for _ in $(seq 600); do [ -f "$work/backlog.done" ] && break; sleep 1; done
kill "$sampler" "$watcher" 2>/dev/null || true
rss_after=$(ps -o rss= -p "$daemon" | tr -d ' ')

status=0
wrk_line() { # file label
  local f=$1 label=$2
  local rps p50 p99 non2xx sock
  rps=$(awk '/Requests\/sec/{print $2}' "$f")
  p50=$(awk '$1=="50%"{print $2}' "$f")
  p99=$(awk '$1=="99%"{print $2}' "$f")
  non2xx=$(awk -F: '/Non-2xx/{gsub(/ /,"",$2); print $2}' "$f")
  sock=$(grep -o 'Socket errors:.*' "$f" || true)
  printf '%s: %s requests/s, p50 %s, p99 %s, non-2xx %s%s\n' "$label" "$rps" "$p50" "$p99" "${non2xx:-0}" "${sock:+, $sock}"
}
wrk_line "$work/good.out" "well-behaved (wrk -t2 -c256 -d${secs}s, 10 paths: documents, status API, metrics, page; gzip accepted)"
non2xx=$(awk -F: '/Non-2xx/{gsub(/ /,"",$2); print $2}' "$work/good.out")
if [ -n "$non2xx" ] || grep -q 'Socket errors' "$work/good.out"; then
  echo "FAIL: errors for well-behaved clients"
  grep '^not 2xx:' "$work/good.out" | head -20 | sed 's/^/  /' || true
  status=1
else
  echo "errors for well-behaved clients: 0  [target 0: PASS]"
fi
wrk_line "$work/flood.out" "404 flood (wrk -t1 -c64, random 2 KiB URIs under the set)"
cat "$work/slow.out" "$work/slow-capped.out"
# The probe: the slowest answer of each path, and any that was not 200.
sort -k3,3 -k2,2gr "$work/probe.out" | awk '!seen[$3]++ { printf "  probe %-32s slowest %.3f s\n", $3, $2 }'
awk '$1 != 200 { bad++ } END { printf "  probe: %d requests, %d not 200\n", NR, bad }' "$work/probe.out"
sort -n "$work/rss.log" | awk -v after="$rss_after" '
  NR == 1 { min = $1 } { max = $1; n++ }
  END { printf "daemon RSS: %.0f MiB at the start, %.0f MiB at most, %.0f MiB after the load (%d samples)\n",
        min / 1024, max / 1024, after / 1024, n }'
if [ -f "$work/backlog.done" ]; then
  echo "backlog of $changes changes applied in $(cat "$work/backlog.done") s from the daemon's start, under the load"
else
  echo "FAIL: the backlog was not applied within the wait"
  status=1
fi
echo "daemon log lines at error level: $(grep -c '"level":"error"\|ERROR\| error ' "$work/run.log" || true)"
# Responses that took the daemon over 5 s from request to last byte, by path.
echo "daemon's slow responses (over 5 s, request to last byte): $(grep -c 'slow response' "$work/run.log" || true) lines"
grep 'slow response' "$work/run.log" | head -10 | sed 's/^/  /' || true
exit $status

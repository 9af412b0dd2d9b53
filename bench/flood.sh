#!/usr/bin/env bash
# The push surfaces under a flood (issue #35): simulate --hub -> A -> B, as
# bench/push.sh, default config but push.callback_allow_hosts for the
# loopback addresses in play. B's lag (upstream change -> visible in B's
# Change List, pushed through A's hub) is measured unloaded, then while
# bench/flood.py floods A: 10,000 subscription requests with callbacks that
# never answer or answer after 14 s, 100 subscribers whose deliveries are
# answered after 14 s, 1,000 forged notifications to A's own callback (a
# leaked token, far-future datetimes). Goals: B's p99 within 2 s of its
# unloaded value; A's peak RSS within 256 MB.
#   bench/flood.sh ROOT PG_CONNINFO
set -euo pipefail
root=$1
pg=$2
bin=${TRIBUTARY_BIN:-"$root/build/bench/aggregator/tributary"}
rate=4
window=${BENCH_FLOOD_SECONDS:-60}
work=$(mktemp -d /tmp/tributary-bench-flood.XXXXXX)
status=0
api() { python3 -c "import json,sys,urllib.request; d=json.load(urllib.request.urlopen('$1'))['data']; print($2)" 2>/dev/null || echo; }
for db in flood_a flood_b; do
  psql "$pg" -qc "DROP DATABASE IF EXISTS $db" >/dev/null
  psql "$pg" -qc "CREATE DATABASE $db" >/dev/null
done
cat >"$work/a.json" <<CFG
{"database": "$pg dbname=flood_a", "data_dir": "$work/a", "listen": "127.0.0.1:18711",
 "push": {"callback_allow_hosts": ["127.0.0.1", "127.0.0.2", "127.0.0.3"]},
 "sources": [{"name": "sim", "url": "http://127.0.0.1:18710/"}]}
CFG
cat >"$work/b.json" <<CFG
{"database": "$pg dbname=flood_b", "data_dir": "$work/b", "listen": "127.0.0.1:18712",
 "sources": [{"name": "a", "url": "http://127.0.0.1:18711/"}]}
CFG
"$bin" migrate --config "$work/a.json" >/dev/null
"$bin" migrate --config "$work/b.json" >/dev/null
"$bin" simulate --hub --listen 127.0.0.1:18710 --resources 500 --change-rate "$rate" >"$work/sim.log" 2>&1 &
sim=$!
"$bin" run --config "$work/a.json" >"$work/a.log" 2>&1 &
a=$!
"$bin" run --config "$work/b.json" >"$work/b.log" 2>&1 &
b=$!
waited=0
while [ $waited -lt 1500 ]; do
  ok=$(api http://127.0.0.1:18712/api/v1/status "d['sources'][0]['last_success'] is not None")
  if [ "$ok" = True ]; then
    [ "$(api http://127.0.0.1:18711/api/v1/push "d['subscriptions'][0]['state']")" = active ] &&
      [ "$(api http://127.0.0.1:18712/api/v1/push "d['subscriptions'][0]['state']")" = active ] || ok=False
  fi
  [ "$ok" = True ] && break
  sleep 0.2
  waited=$((waited + 1))
done
echo "  unloaded:"
python3 "$root/bench/push_lag.py" http://127.0.0.1:18710/ http://127.0.0.1:18712 a 30 "$work/unloaded" 3 100 || status=1
token=$(psql "$pg dbname=flood_a" -Atc "SELECT token FROM push_subscription LIMIT 1")
upstream_topic=$(psql "$pg dbname=flood_a" -Atc "SELECT topic FROM push_subscription LIMIT 1")
our_topic=$(api http://127.0.0.1:18711/api/v1/push "d['subscribers'][0]['topic']")
echo "  flooded:"
python3 "$root/bench/flood.py" http://127.0.0.1:18711 "$our_topic" "/push/$token" "$window" "$upstream_topic" &
flood=$!
python3 "$root/bench/push_lag.py" http://127.0.0.1:18710/ http://127.0.0.1:18712 a "$window" "$work/flooded" 3 200 || status=1
wait "$flood" || status=1
hwm=$(awk '/VmHWM/ {print int($2 / 1024)}' "/proc/$a/status")
runs=$(grep -c 'run finished' "$work/a.log" || true)
held=$(grep -c 'applied nothing' "$work/a.log" || true)
echo "    A: peak RSS ${hwm} MB, runs ${runs}, notified runs that applied nothing ${held}"
echo "    A's subscribers: $(api http://127.0.0.1:18711/api/v1/push "len(d['subscribers'])")"
kill -TERM "$a" "$b"; wait "$a" "$b" || status=1
kill "$sim"; wait "$sim" 2>/dev/null || true
read -r _ _ _ p99_unloaded _ <"$work/unloaded" || true
read -r _ _ _ p99_flooded _ <"$work/flooded" || true
verdict=$(python3 -c "print('PASS' if float('${p99_flooded:-999}') <= float('${p99_unloaded:-0}') + 2 else 'FAIL')")
rss=$(python3 -c "print('PASS' if int('${hwm:-9999}') <= 256 else 'FAIL')")
echo "genuine subscriber p99 ${p99_unloaded:-?} s unloaded, ${p99_flooded:-?} s flooded [goal: within 2 s: $verdict]; A peak RSS ${hwm} MB [goal <= 256 MB: $rss]"
[ "$verdict" = PASS ] && [ "$rss" = PASS ] || status=1
rm -rf "$work"
exit $status

#!/usr/bin/env bash
# Push (issue #16): how long an upstream change takes to be visible in the
# Change List of the second of two chained Tributaries, over >= 200
# changes, with notifications pushed (the default) and with polling alone
# at a 60 s interval. Called by bench/run.sh push.
#
#   Source: `tributary simulate --hub` (500 resources, 4 changes/s), whose
#   hub pushes every change at once; A follows it, B follows A.
#   push: every setting at its default (interval 15 min: polling is only
#   the safety net), except that A's hub may call B back on 127.0.0.1
#   (push.callback_allow_hosts; by default private addresses are refused).
#   poll: interval 60 s and push.subscribe false.
#   Measured from when both are baselined (and subscribed, with push), over
#   the next BENCH_PUSH_CHANGES (240) changes. Goal with push: p99 <= 1 s.
#   bench/push.sh ROOT PG_CONNINFO
set -euo pipefail
root=$1
pg=$2
bin=${TRIBUTARY_BIN:-"$root/build/bench/aggregator/tributary"}
changes=${BENCH_PUSH_CHANGES:-240}
rate=${BENCH_PUSH_RATE:-4}
status=0

api() { python3 -c "import json,sys,urllib.request; d=json.load(urllib.request.urlopen('$1'))['data']; print($2)" 2>/dev/null || echo; }

one() { # push | poll
  local mode=$1 work sim a b waited=0
  work=$(mktemp -d /tmp/tributary-bench-push.XXXXXX)
  for db in push_a push_b; do
    psql "$pg" -qc "DROP DATABASE IF EXISTS $db" >/dev/null
    psql "$pg" -qc "CREATE DATABASE $db" >/dev/null
  done
  local push_a push_b interval
  if [ "$mode" = push ]; then
    push_a='"push": {"callback_allow_hosts": ["127.0.0.1"]},'
    push_b=''
    interval=''
  else
    push_a='"push": {"subscribe": false},'
    push_b='"push": {"subscribe": false},'
    interval=', "interval": "60s"'
  fi
  cat >"$work/a.json" <<CFG
{"database": "$pg dbname=push_a", "data_dir": "$work/a", "listen": "127.0.0.1:18701", $push_a
 "sources": [{"name": "sim", "url": "http://127.0.0.1:18700/"$interval}]}
CFG
  cat >"$work/b.json" <<CFG
{"database": "$pg dbname=push_b", "data_dir": "$work/b", "listen": "127.0.0.1:18702", $push_b
 "sources": [{"name": "a", "url": "http://127.0.0.1:18701/"$interval}]}
CFG
  "$bin" migrate --config "$work/a.json" >/dev/null
  "$bin" migrate --config "$work/b.json" >/dev/null
  # Enough changes for the setup (up to 30 s) and then $changes more.
  "$bin" simulate --hub --listen 127.0.0.1:18700 --resources 500 --change-rate "$rate" \
    --max-changes $((changes + 30 * rate)) >"$work/sim.log" 2>&1 &
  sim=$!
  "$bin" run --config "$work/a.json" >"$work/a.log" 2>&1 &
  a=$!
  "$bin" run --config "$work/b.json" >"$work/b.log" 2>&1 &
  b=$!
  # Ready: B has a successful run (so both are baselined), and with push
  # both subscriptions are active.
  while [ $waited -lt 300 ]; do
    local ok
    ok=$(api http://127.0.0.1:18702/api/v1/status "d['sources'][0]['last_success'] is not None")
    if [ "$mode" = push ] && [ "$ok" = True ]; then
      [ "$(api http://127.0.0.1:18701/api/v1/push "d['subscriptions'][0]['state']")" = active ] &&
        [ "$(api http://127.0.0.1:18702/api/v1/push "d['subscriptions'][0]['state']")" = active ] || ok=False
    fi
    [ "$ok" = True ] && break
    sleep 0.2
    waited=$((waited + 1))
  done
  local window=$((changes / rate + 10))
  [ "$mode" = poll ] && window=$((changes / rate + 150))
  echo "  $mode:"
  python3 "$root/bench/push_lag.py" http://127.0.0.1:18700/ http://127.0.0.1:18702 a "$window" "$work/result" || status=1
  echo "    notifications accepted: A $(grep -c 'notification accepted' "$work/a.log" || true), B $(grep -c 'notification accepted' "$work/b.log" || true)"
  kill -TERM "$a" "$b"; wait "$a" "$b" || status=1
  kill "$sim"; wait "$sim" 2>/dev/null || true
  read -r n missing p50 p99 max <"$work/result" || true
  eval "${mode}_p99=\${p99:-999}"
  rm -rf "$work"
}

for m in ${BENCH_PUSH_MODES:-push poll}; do
  one "$m"
done
push_p99=${push_p99:-999}
poll_p99=${poll_p99:-n/a}
verdict=$(python3 -c "print('PASS' if float('$push_p99') <= 1.0 else 'FAIL')")
echo "push p99 ${push_p99} s against poll (60 s) p99 ${poll_p99} s  [goal with push: p99 <= 1 s: $verdict]"
[ "$verdict" = PASS ] || status=1
exit $status

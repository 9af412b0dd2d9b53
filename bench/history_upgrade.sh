#!/usr/bin/env bash
# The history an older Tributary published, checked and mended (#49):
#   bench/history_upgrade.sh OLD_BIN NEW_BIN CONNINFO
# A Source simulated at 20 changes/s (2,000 resources, 2,400 changes); Tributary A
# (OLD_BIN) follows it while an operator asks for a baseline, an audit, a CLI repair
# and another baseline, 20 s apart; Tributary B (OLD_BIN) follows A. Then both are
# stopped, NEW_BIN migrates A's database and runs check-history on it, then
# check-history --repair; A (NEW_BIN) serves again and B (NEW_BIN) follows it: B's
# live resources are compared with the Source's by md5.
set -euo pipefail
old=$1 new=$2 pg=$3
work=$(mktemp -d /tmp/tributary-history-upgrade.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
sim_port=$(port) a_port=$(port) b_port=$(port)
for db in hu_a hu_b; do
  psql "$pg" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
  psql "$pg" -qc "CREATE DATABASE $db" >/dev/null
done
echo token >"$work/token"
cfg() { # name db port source_url
  cat >"$work/$1.json" <<EOF
{"database": "$pg dbname=$2", "data_dir": "$work/$1-data", "listen": "127.0.0.1:$3",
 "admin_token_file": "$work/token", "sources": [{"name": "$5", "url": "$4", "interval": "2s"}]}
EOF
}
cfg a hu_a "$a_port" "http://127.0.0.1:$sim_port/" sim
cfg b hu_b "$b_port" "http://127.0.0.1:$a_port/" agg
"$new" simulate --listen "127.0.0.1:$sim_port" --resources 2000 --change-rate 20 --max-changes 2400 --seed 49 \
  --size 256 >"$work/sim.log" 2>&1 & pids+=($!)
"$old" migrate --config "$work/a.json" >/dev/null
"$old" migrate --config "$work/b.json" >/dev/null
"$old" run --config "$work/a.json" >"$work/a.log" 2>&1 & a=$!; pids+=($a)
"$old" run --config "$work/b.json" >"$work/b.log" 2>&1 & b=$!; pids+=($b)
act() { curl -s -o /dev/null -w "%{http_code}" -X POST -H "Authorization: Bearer token" \
  -H "Content-Type: application/json" --data "$2" "http://127.0.0.1:$a_port/api/v1/sources/sim/$1"; echo " $1 $2"; }
sleep 20; act sync '{"mode":"baseline"}'
sleep 20; act audit ''
sleep 20; "$old" sync --config "$work/a.json" --source sim --audit --repair --wait | head -1
sleep 20; act sync '{"mode":"baseline"}'
# The Source makes its last change at 120 s; both sides then catch up.
sleep 75
kill "$a" "$b"; wait "$a" "$b" 2>/dev/null || true
curl -s "http://127.0.0.1:$sim_port/resourcelist.xml" >/dev/null
sleep 2
upstream() { # md5 of every live resource the Source lists, sorted
  python3 - "http://127.0.0.1:$sim_port/resourcelist.xml" <<'EOF'
import re, sys, urllib.request
def entries(url):
    body = urllib.request.urlopen(url).read().decode()
    if "<sitemapindex" in body:
        return [m for loc in re.findall(r"<loc>([^<]+)</loc>", body) for m in entries(loc)]
    return re.findall(r'hash="md5:([0-9a-f]+)', body)
print("\n".join(sorted(entries(sys.argv[1]))))
EOF
}
held() { psql "$pg dbname=$1" -Atc "SELECT md5 FROM resource WHERE state = 'live' ORDER BY md5"; }
upstream >"$work/source.md5"
echo "old A vs Source: $(diff <(held hu_a) "$work/source.md5" | grep -c '^[<>]' || true) md5 lines differ"
echo "old B vs Source: $(diff <(held hu_b) "$work/source.md5" | grep -c '^[<>]' || true) md5 lines differ"
echo "old A: (URI, change, time) logged more than once: $(psql "$pg dbname=hu_a" -Atc "SELECT count(*) FROM (SELECT uri, change, upstream_datetime FROM change_log WHERE upstream_datetime IS NOT NULL GROUP BY 1, 2, 3 HAVING count(*) > 1) d")"
"$new" migrate --config "$work/a.json"
"$new" check-history --config "$work/a.json" --limit 5 || true
"$new" check-history --config "$work/a.json" --repair --limit 0 || true
"$new" run --config "$work/a.json" >"$work/a2.log" 2>&1 & pids+=($!)
"$new" migrate --config "$work/b.json" >/dev/null
"$new" run --config "$work/b.json" >"$work/b2.log" 2>&1 & pids+=($!)
for i in $(seq 1 60); do
  sleep 2
  if diff -q <(held hu_b) "$work/source.md5" >/dev/null; then
    echo "B (new) equals the Source after $((i * 2)) s, following A after its repair"
    break
  fi
done
echo "B vs Source: $(diff <(held hu_b) "$work/source.md5" | grep -c '^[<>]' || true) md5 lines differ"
"$new" check-history --config "$work/b.json" --limit 5 || true
echo "work: $work"

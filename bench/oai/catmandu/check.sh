#!/usr/bin/env bash
# Tributary against an OAI-PMH provider it did not write: Debian's
# Dancer::Plugin::Catmandu::OAI (libdancer-plugin-catmandu-oai-perl), over
# the records in a JSON file (lib/ holds the small store it needs in place
# of Elasticsearch). A follows the provider (kind oai-pmh), B follows A as a
# ResourceSync Source; after a baseline and then a change, an addition and a
# deletion at the provider, both must hold exactly the provider's records.
#   bench/oai/catmandu/check.sh <tributary binary> <PostgreSQL conninfo of a server we may create databases on>
set -euo pipefail
bin=$1
pg=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/tributary-catmandu.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
port_of() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
oai_port=$(port_of); a_port=$(port_of); b_port=$(port_of)
n=${RECORDS:-250}

records() { # $1: how many; $2: title suffix of record 2; $3: record 3 deleted (1/0)
  python3 - "$work/records.json" "$1" "$2" "$3" "$n" <<'PY'
import json, sys, datetime
out, n, suffix, deleted, first = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1", int(sys.argv[5])
now = datetime.datetime.utcnow().replace(microsecond=0).isoformat() + "Z"
recs = []
for i in range(1, n + 1):
    r = {"_id": str(i), "datestamp": "2026-01-%02dT10:00:00Z" % (i % 28 + 1), "title": ["Item %d" % i],
         "creator": ["Doe, J."], "identifier": ["http://hdl.handle.net/1/%d" % i]}
    if i > first:
        r["datestamp"] = now  # added since the baseline
    if i == 2 and suffix:
        r["title"] = ["Item 2" + suffix]; r["datestamp"] = now
    if i == 3 and deleted:
        r["deleted"] = True; r["datestamp"] = now
    recs.append(r)
json.dump(recs, open(out, "w"))
PY
}

records "$n" "" 0
OAI_RECORDS="$work/records.json" OAI_PORT=$oai_port OAI_LIMIT=100 perl "$here/app.pl" >"$work/provider.log" 2>&1 &
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$oai_port/oai?verb=Identify" >/dev/null && break; sleep 0.2; done

daemon() { # name port sources-json
  local db="tributary_catmandu_$1_$$"
  psql "$pg" -qc "CREATE DATABASE $db" >/dev/null
  echo tok >"$work/$1.token"
  cat >"$work/$1.json" <<JSON
{"database": "$pg dbname=$db", "data_dir": "$work/$1", "listen": "127.0.0.1:$2",
 "admin_token_file": "$work/$1.token", "sources": $3}
JSON
  "$bin" migrate --config "$work/$1.json" >/dev/null
  "$bin" run --config "$work/$1.json" >"$work/$1.log" 2>&1 &
}
daemon a "$a_port" "[{\"name\": \"cat\", \"kind\": \"oai-pmh\", \"url\": \"http://127.0.0.1:$oai_port/oai\", \"interval\": \"2s\"}]"
daemon b "$b_port" "[{\"name\": \"a\", \"url\": \"http://127.0.0.1:$a_port/.well-known/resourcesync\", \"interval\": \"2s\"}]"

vias() { curl -s "http://127.0.0.1:$1/sets/$2/resourcelist.xml" | grep -o 'rel="via" href="[^"]*"' | sort; }
want() { python3 - "$work/records.json" "$oai_port" <<'PY'
import json, sys, urllib.parse
for r in json.load(open(sys.argv[1])):
    if not r.get("deleted"):
        ident = urllib.parse.quote("oai:catmandu.example.org:" + r["_id"], safe="")
        print('rel="via" href="http://127.0.0.1:%s/oai?verb=GetRecord&amp;identifier=%s&amp;metadataPrefix=oai_dc"' % (sys.argv[2], ident))
PY
}
equal_within() { # seconds
  local start=$SECONDS
  while (( SECONDS - start < $1 )); do
    if [ "$(vias "$a_port" cat)" = "$(want | sort)" ] && [ "$(vias "$b_port" a)" = "$(want | sort)" ]; then
      echo "equal after $((SECONDS - start)) s: $(want | wc -l) records"; return 0
    fi
    sleep 1
  done
  echo "NOT EQUAL after $1 s: A $(vias "$a_port" cat | wc -l), B $(vias "$b_port" a | wc -l), provider $(want | wc -l)"
  return 1
}
echo "== baseline of $n records from the Catmandu provider"
equal_within 120
echo "== a change, an addition and a deletion at the provider"
sleep 1
records "$((n + 1))" ", revised" 1
equal_within 60
grep -h "run finished" "$work/a.log" | tail -1
echo "warnings and errors in A's log: $(grep -c ' warn \| error ' "$work/a.log" || true)"

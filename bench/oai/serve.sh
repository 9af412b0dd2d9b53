#!/usr/bin/env bash
# bench/run.sh oai-serve: our OAI-PMH face (#52) over BENCH_OAI_SERVE_RECORDS
# (default 1,000,000) resources held, `tributary serve` with the default
# config (oai page size 100), one harvester walking ListRecords through every
# token: records/s, page latency near the start and at the end of the list,
# peak RSS. The resources are written straight into the database as a sync
# and retention would leave them (half with their change-log entry, half
# compacted), so that the figure is the provider's alone.
set -euo pipefail
root=$1
pg=$2
n=${BENCH_OAI_SERVE_RECORDS:-1000000}
bin=${TRIBUTARY_BIN:-$root/build/bench/aggregator/tributary}
work=$(mktemp -d /tmp/tributary-oai-serve.XXXXXX)
db=oai_serve_$$
psql "$pg" -qc "CREATE DATABASE $db" >/dev/null
conn="$pg dbname=$db"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$work/config.json" <<JSON
{"database": "$conn", "data_dir": "$work/data", "listen": "127.0.0.1:$port",
 "sources": [{"name": "repo", "url": "https://repo.example.org/"}]}
JSON
"$bin" migrate --config "$work/config.json" >/dev/null
t0=$(date +%s.%N)
psql "$conn" -q <<SQL
INSERT INTO source (name, url) VALUES ('repo', 'https://repo.example.org/');
INSERT INTO feed (source_id, capability_list_url) VALUES (1, 'https://repo.example.org/capabilitylist.xml');
-- The older half as retention leaves it (the change log compacted, the
-- time kept on the row), the newer half with its change-log entry.
INSERT INTO resource (feed_id, uri, state, lastmod, length, sha256, type, logged_at)
SELECT 1, 'https://repo.example.org/record/' || g, CASE WHEN g % 50 = 0 THEN 'deleted' ELSE 'live' END,
       now() - interval '1 day', 1024, md5(g::text) || md5(g::text), 'application/xml',
       CASE WHEN g <= $n / 2 THEN now() - ($n - g) * interval '1 millisecond' END
FROM generate_series(1, $n) g;
INSERT INTO change_log (feed_id, uri, change, recorded_at, lastmod, length, sha256, type)
SELECT 1, 'https://repo.example.org/record/' || g, CASE WHEN g % 50 = 0 THEN 'deleted' ELSE 'created' END,
       now() - ($n - g) * interval '1 millisecond', now() - interval '1 day', 1024, md5(g::text) || md5(g::text),
       'application/xml'
FROM generate_series($n / 2 + 1, $n) g;
ANALYZE change_log;
ANALYZE resource;
SQL
echo "loaded $n resources in $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s"
"$bin" serve --config "$work/config.json" > "$work/serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; psql "$pg" -qc "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
for _ in $(seq 1 600); do
  curl -sf "http://127.0.0.1:$port/oai?verb=Identify" >/dev/null 2>&1 && break
  sleep 0.5
done
python3 "$root/bench/oai/walk.py" "http://127.0.0.1:$port/oai" "$n" "$pid" "tributary serve"

# Side by side: Debian's Catmandu OAI provider (Dancer::Plugin::Catmandu::OAI,
# bench/oai/catmandu) on the same number of records, 100 a page as ours,
# harvested by the same walker for BENCH_OAI_SERVE_CATMANDU_SECONDS (default
# 120): as far as it gets. Its store is ours (a JSON file, read at every
# search: Debian ships neither Elasticsearch nor MongoDB), which is what
# slows it most, so say so with its figure. BENCH_OAI_SERVE_CATMANDU=0 skips it.
if [ "${BENCH_OAI_SERVE_CATMANDU:-1}" = 1 ]; then
  cport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  python3 - "$work/records.json" "$n" <<'PY'
import json, sys
out, n = sys.argv[1], int(sys.argv[2])
with open(out, "w") as f:
    f.write("[")
    for i in range(1, n + 1):
        r = {"_id": str(i), "datestamp": "2026-01-01T00:00:00Z", "title": ["Item %d" % i],
             "identifier": ["https://repo.example.org/record/%d" % i]}
        if i % 50 == 0:
            r["deleted"] = True
        f.write(("," if i > 1 else "") + json.dumps(r))
    f.write("]")
PY
  OAI_RECORDS="$work/records.json" OAI_PORT=$cport OAI_LIMIT=100 perl "$root/bench/oai/catmandu/app.pl" \
    > "$work/catmandu.log" 2>&1 &
  cpid=$!
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$cport/oai?verb=Identify" >/dev/null 2>&1 && break
    sleep 0.5
  done
  python3 "$root/bench/oai/walk.py" "http://127.0.0.1:$cport/oai" "$n" "$cpid" \
    "Catmandu OAI provider (Debian; a JSON-file store of ours)" "${BENCH_OAI_SERVE_CATMANDU_SECONDS:-120}" || true
  kill $cpid 2>/dev/null || true
  wait $cpid 2>/dev/null || true
fi

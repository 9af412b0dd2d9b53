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
python3 - "http://127.0.0.1:$port/oai" "$n" "$pid" <<'PY'
import re, sys, time, urllib.request
base, n, pid = sys.argv[1], int(sys.argv[2]), sys.argv[3]
url = base + "?verb=ListRecords&metadataPrefix=oai_dc"
lat, records, deleted = [], 0, 0
start = time.monotonic()
while True:
    t = time.monotonic()
    body = urllib.request.urlopen(url, timeout=60).read().decode()
    lat.append(time.monotonic() - t)
    records += body.count("<record>")
    deleted += body.count('status="deleted"')
    m = re.search(r"<resumptionToken[^>]*>([^<]+)</resumptionToken>", body)
    if not m:
        break
    url = base + "?verb=ListRecords&resumptionToken=" + m.group(1)
wall = time.monotonic() - start
rss = 0
for line in open(f"/proc/{pid}/status"):
    if line.startswith("VmHWM:"):
        rss = int(line.split()[1]) // 1024
def ms(xs):
    xs = sorted(xs)
    return f"median {xs[len(xs)//2]*1000:.1f} ms, max {xs[-1]*1000:.1f} ms"
print(f"harvested {records} records ({deleted} deleted) in {len(lat)} pages, {wall:.1f} s: {records/wall:,.0f} records/s")
print(f"pages 1-10 (depth to 1,000): {ms(lat[:10])}; last 10 (depth {max(0, records-1000):,}): {ms(lat[-10:])}; all: {ms(lat)}")
print(f"peak RSS of tributary serve: {rss} MB")
if records != n:
    print(f"MISMATCH: {records} records harvested, {n} held")
    sys.exit(1)
PY

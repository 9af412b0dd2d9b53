#!/usr/bin/env python3
"""One harvester walking ListRecords (oai_dc) through every token of an
OAI-PMH provider, for bench/oai/serve.sh: records/s, page latency near the
start and at the end reached, the provider's peak RSS.

    walk.py BASE_URL EXPECTED PID LABEL [SECONDS]

With SECONDS, it stops there ("as far as it gets") and says how far it got;
without, it must harvest EXPECTED records or it fails."""
import re
import sys
import time
import urllib.parse
import urllib.request

base, n, pid, label = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
budget = float(sys.argv[5]) if len(sys.argv) > 5 else None
url = base + "?verb=ListRecords&metadataPrefix=oai_dc"
lat, records, deleted = [], 0, 0
start = time.monotonic()
stopped = False
while True:
    t = time.monotonic()
    body = urllib.request.urlopen(url, timeout=600).read().decode()
    lat.append(time.monotonic() - t)
    records += body.count("<record>")
    deleted += body.count('status="deleted"')
    m = re.search(r"<resumptionToken[^>]*>([^<]+)</resumptionToken>", body)
    if not m:
        break
    if budget is not None and time.monotonic() - start > budget:
        stopped = True
        break
    url = base + "?verb=ListRecords&resumptionToken=" + urllib.parse.quote(m.group(1), safe="")
wall = time.monotonic() - start
rss = 0
for line in open(f"/proc/{pid}/status"):
    if line.startswith("VmHWM:"):
        rss = int(line.split()[1]) // 1024


def ms(xs):
    xs = sorted(xs)
    return f"median {xs[len(xs) // 2] * 1000:.1f} ms, max {xs[-1] * 1000:.1f} ms"


how_far = f", stopped after {budget:.0f} s at {records:,} of {n:,}" if stopped else ""
print(f"{label}: harvested {records:,} records ({deleted:,} deleted) in {len(lat)} pages, {wall:.1f} s: "
      f"{records / wall:,.0f} records/s{how_far}")
print(f"{label}: pages 1-10 (depth to {min(records, 10 * (records // max(1, len(lat)))):,}): {ms(lat[:10])}; "
      f"last 10 (depth {max(0, records - 10 * (records // max(1, len(lat)))):,}): {ms(lat[-10:])}; all: {ms(lat)}")
print(f"{label}: peak RSS {rss} MB")
if not stopped and records != n:
    print(f"{label}: MISMATCH: {records} records harvested, {n} held")
    sys.exit(1)

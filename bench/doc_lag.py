#!/usr/bin/env python3
"""Samples how far our published Change List lags behind our change log.

Every 0.2 s: the number of changes our Change List (index + open part)
shows, against the change log in PostgreSQL; the lag of a sample is the age
of the oldest logged change not yet published (0 when none). Prints the
p50/p95/max over the window. Usage: doc_lag.py BASE_URL SET PART_SIZE CONNINFO SECONDS
"""
import re
import subprocess
import sys
import time
import urllib.request

base, set_name, part_size, conninfo, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], float(sys.argv[5])


def fetch(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def psql(sql):
    return subprocess.run(["psql", conninfo, "-Atc", sql], check=True, capture_output=True, text=True).stdout.strip()


lags = []
end = time.time() + seconds
while time.time() < end:
    index = fetch(f"{base}/sets/{set_name}/changelist-index.xml")
    parts = re.findall(r"<loc>([^<]+)</loc>", index)
    shown = (len(parts) - 1) * part_size + fetch(parts[-1]).count("<url>")
    row = psql(f"SELECT extract(epoch FROM clock_timestamp() - recorded_at) FROM change_log ORDER BY seq OFFSET {shown} LIMIT 1")
    lags.append(float(row) if row else 0.0)
    time.sleep(0.2)
lags.sort()
pick = lambda q: lags[min(len(lags) - 1, int(q * len(lags)))]
print(f"published Change List lag over {len(lags)} samples: p50 {pick(0.5):.2f} s, p95 {pick(0.95):.2f} s, max {lags[-1]:.2f} s")

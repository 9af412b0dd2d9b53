#!/usr/bin/env python3
"""Measures how long an upstream change takes to be visible in Tributary B's
Change List (bench/run.sh push).

    push_lag.py SOURCE_URL B_BASE B_SET SECONDS [RESULT_FILE [TAIL_SECONDS]]

Polls B's open Change List every 50 ms for SECONDS and notes when each entry
first showed, keyed by its original URI (rel="via") and the resource's
lastmod, which is the time of the change at the Source (the simulator's
lastmod and datetime are one). Then reads every change the Source
published and prints p50/p99/max of (first seen in B) - (change at the
Source) over the changes made after it started (the caller starts it once
both daemons are baselined, and subscribed when they push).
"""
import re
import sys
import time
import urllib.request
from datetime import datetime

source, b_base, b_set, seconds = sys.argv[1].rstrip("/"), sys.argv[2].rstrip("/"), sys.argv[3], float(sys.argv[4])


def fetch(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def epoch(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


ENTRY = re.compile(r"<url>(.*?)</url>", re.S)
seen = {}
start = time.time()
end = start + seconds
while time.time() < end:
    try:
        doc = fetch(f"{b_base}/sets/{b_set}/changelist.xml")
    except Exception:  # B not up yet
        time.sleep(0.05)
        continue
    now = time.time()
    for e in ENTRY.findall(doc):
        via = re.search(r'<rs:ln rel="via" href="([^"]+)"', e)
        lastmod = re.search(r"<lastmod>([^<]+)</lastmod>", e)
        if via and lastmod:
            seen.setdefault((via.group(1), round(epoch(lastmod.group(1)), 3)), now)
    time.sleep(0.05)

# Every change the Source published (its Change List index, then the parts).
changes = []
index = fetch(f"{source}/changelist.xml")
for part in re.findall(r"<loc>([^<]+)</loc>", index):
    for e in ENTRY.findall(fetch(part)):
        loc = re.search(r"<loc>([^<]+)</loc>", e).group(1)
        when = epoch(re.search(r'datetime="([^"]+)"', e).group(1))
        changes.append((loc, when))
delays = []
missing = 0
TAIL = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0
for loc, when in changes:
    # Changes made before the window, or in its last TAIL seconds (they had
    # no fair chance to be seen), are not counted.
    if when < start or when > end - TAIL:
        continue
    at = seen.get((loc, round(when, 3)))
    if at is None:
        missing += 1
    else:
        delays.append(at - when)
delays.sort()
if not delays:
    print("FAIL: no change measured")
    sys.exit(1)
pick = lambda q: delays[min(len(delays) - 1, int(q * len(delays)))]
print(f"{len(delays)} changes measured ({missing} never seen in B within the window): "
      f"p50 {pick(0.5):.2f} s, p99 {pick(0.99):.2f} s, max {delays[-1]:.2f} s")
with open(sys.argv[5] if len(sys.argv) > 5 else "/dev/null", "w") as out:
    out.write(f"{len(delays)} {missing} {pick(0.5):.3f} {pick(0.99):.3f} {delays[-1]:.3f}\n")
MIN = int(sys.argv[7]) if len(sys.argv) > 7 else 200
sys.exit(0 if len(delays) >= MIN and missing == 0 else 1)

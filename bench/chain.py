#!/usr/bin/env python3
"""Reports bench/run.sh chain: B's propagation delay and whether B equals
the union of the Sources.

    chain.py PG_CONNINFO DB_A DB_B SINCE SOURCE_URL...

Delay of a change: when Tributary B recorded it minus the change's time at
its original Source (A's upstream datetime for the same change). B's rows
name A's copies (/sets/<set>/resources/<percent-encoded original>) and
carry A's datetime, which is A's recorded time (nudged a microsecond when
equal), so each B row is matched to the A row of the same original URI
whose recorded time is nearest at or before it.
"""
import bisect
import re
import subprocess
import sys
import urllib.parse
import urllib.request
from datetime import datetime


def rows(conninfo, sql):
    out = subprocess.run(["psql", conninfo, "-AtF", "\t", "-c", sql], check=True, capture_output=True, text=True).stdout
    return [line.split("\t") for line in out.splitlines() if line]


def epoch(text):
    return datetime.fromisoformat(text.replace(" ", "T")).timestamp()


def original(uri):
    m = re.search(r"/resources/(.+)$", uri)
    return urllib.parse.unquote(m.group(1)) if m else uri


def main():
    pg, db_a, db_b, since, sources = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
    # Changes made at the Sources from 5 s after the start on (the first
    # seconds are both daemons' baselines).
    a = {}
    for uri, upstream, recorded in rows(f"{pg} dbname={db_a}",
                                        "SELECT uri, upstream_datetime, recorded_at FROM change_log "
                                        f"WHERE upstream_datetime > timestamptz '{since}' + interval '5 s' "
                                        "ORDER BY recorded_at"):
        times, sources_at = a.setdefault(uri, ([], []))  # recorded at A, and at the Source
        times.append(epoch(recorded))
        sources_at.append(epoch(upstream))
    delays = []
    for uri, upstream, recorded in rows(f"{pg} dbname={db_b}",
                                        "SELECT uri, upstream_datetime, recorded_at FROM change_log "
                                        f"WHERE upstream_datetime > '{since}'"):
        hist = a.get(original(uri))
        if not hist:
            continue
        i = bisect.bisect_right(hist[0], epoch(upstream) + 0.001) - 1
        if i >= 0:
            delays.append(epoch(recorded) - hist[1][i])
    delays.sort()
    status = 0
    if len(delays) < 200:
        print(f"FAIL: only {len(delays)} changes measured (need >= 200)")
        status = 1
    if delays:
        pick = lambda q: delays[min(len(delays) - 1, int(q * len(delays)))]
        p99 = pick(0.99)
        print(f"B's propagation delay over {len(delays)} upstream changes (Source -> A -> B, every 1 s): "
              f"p50 {pick(0.5):.2f} s, p99 {p99:.2f} s, max {delays[-1]:.2f} s  "
              f"[goal p99 <= 3 s: {'PASS' if p99 <= 3 else 'FAIL'}]")
        status = status or (0 if p99 <= 3 else 1)
    # B equals the union of the Sources: every live resource, by original
    # URI and MD5, as the Sources' Resource Lists give them now.
    want = {}
    for src in sources:
        xml = urllib.request.urlopen(src + "resourcelist.xml").read().decode()
        for loc, md5 in re.findall(r"<loc>([^<]+)</loc>.*?hash=\"md5:([0-9a-f]+)\"", xml):
            want[loc] = md5
    got = {}
    for uri, md5 in rows(f"{pg} dbname={db_b}", "SELECT uri, md5 FROM resource WHERE state = 'live'"):
        got[original(uri)] = md5
    missing = [u for u in want if u not in got]
    extra = [u for u in got if u not in want]
    wrong = [u for u in want if u in got and got[u] != want[u]]
    same = not missing and not extra and not wrong
    print(f"B against the union of the Sources ({len(want)} resources): {len(missing)} missing, {len(extra)} extra, "
          f"{len(wrong)} with other content  [{'PASS' if same else 'FAIL'}]")
    return status or (0 if same else 1)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Polls a set of ours (bench/scale.sh): every 0.25 s, one line
   <time> <the Resource List's at> <the newest datetime in our Change List>
(epoch seconds, "-" when not there yet). With --count: how many entries the
Resource List (its parts, when it has an index) holds.

The newest datetime is read from the Change List's last TAIL bytes: its
entries are in the order of their datetimes (the history checker in the
tests holds that), so the newest is the last. Parsing all of its up to
10,000 datetimes four times a second took 5-6 s of the host's processor
time through a baseline of a million, beside the daemon it measures."""
import re
import sys
import time
import urllib.request
from datetime import datetime

AT = re.compile(rb'<rs:md[^>]*\bat="([^"]+)"')
DATETIME = re.compile(rb'\bdatetime="([^"]+)"')
LOC = re.compile(rb'<loc>([^<]+)</loc>')
TAIL = 16384


def epoch(s):
    return datetime.fromisoformat(s.decode().replace('Z', '+00:00')).timestamp()


def get(url, limit=None):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read(limit) if limit else r.read()


def count(base):
    top = get(base + '/resourcelist.xml')
    if b'<sitemapindex' not in top[:2000]:
        return top.count(b'<url>')
    return sum(get(loc.decode()).count(b'<url>') for loc in LOC.findall(top))


def main():
    if sys.argv[1] == '--count':
        print(count(sys.argv[2]))
        return
    base = sys.argv[1]
    while True:
        rl = cl = '-'
        try:
            m = AT.search(get(base + '/resourcelist.xml', 4096))
            rl = '%.6f' % epoch(m.group(1)) if m else '-'
            times = DATETIME.findall(get(base + '/changelist.xml')[-TAIL:])
            cl = '%.6f' % max(epoch(t) for t in times) if times else '-'
        except Exception as e:  # not published yet, or busy: say so, go on
            print(e, file=sys.stderr)
        print('%.3f %s %s' % (time.time(), rl, cl), flush=True)
        time.sleep(0.25)


main()

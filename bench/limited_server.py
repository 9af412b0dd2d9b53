#!/usr/bin/env python3
"""Serves a directory (a Source written by static_source.py) the way an
overloaded repository behind a rate limiter does: past RATE requests/s (a
token bucket holding BURST) or past CONCURRENT requests at once, it answers
503 with Retry-After: 1. Every answer takes LATENCY_MS, as a repository's
do (nginx answers a static file in microseconds, so a limit on requests at
once would never bite). Each request is logged as "epoch-seconds status".

    limited_server.py DIR PORT LOG [--rate 150] [--burst 10] [--concurrent 4] [--latency-ms 10]
"""
import argparse
import http.server
import os
import socket
import threading
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument('dir')
    p.add_argument('port', type=int)
    p.add_argument('log')
    p.add_argument('--rate', type=float, default=150)
    p.add_argument('--burst', type=float, default=10)
    p.add_argument('--concurrent', type=int, default=4)
    p.add_argument('--latency-ms', type=float, default=10)
    a = p.parse_args()
    lock = threading.Lock()
    state = {'tokens': a.burst, 'at': time.monotonic(), 'in_flight': 0}
    log = open(a.log, 'w', buffering=1)

    def admit():
        with lock:
            now = time.monotonic()
            state['tokens'] = min(a.burst, state['tokens'] + (now - state['at']) * a.rate)
            state['at'] = now
            if state['in_flight'] >= a.concurrent or state['tokens'] < 1:
                return False
            state['tokens'] -= 1
            state['in_flight'] += 1
            return True

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'

        def setup(self):
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, *args):
            pass

        def answer(self, status, body, headers=()):
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            log.write(f'{time.time():.3f} {status}\n')

        def do_GET(self):
            if not admit():
                time.sleep(a.latency_ms / 1000)
                self.answer(503, b'slow down\n', [('Retry-After', '1')])
                return
            try:
                time.sleep(a.latency_ms / 1000)
                path = os.path.normpath(self.path.split('?')[0]).lstrip('/')
                full = os.path.join(a.dir, path)
                if '..' in path or not os.path.isfile(full):
                    self.answer(404, b'not found\n')
                    return
                with open(full, 'rb') as f:
                    body = f.read()
                ctype = 'application/xml' if full.endswith('.xml') or 'well-known' in full else 'text/plain'
                self.answer(200, body, [('Content-Type', ctype)])
            finally:
                with lock:
                    state['in_flight'] -= 1

    class Server(http.server.ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 128

    Server(('127.0.0.1', a.port), Handler).serve_forever()


if __name__ == '__main__':
    main()

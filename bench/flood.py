#!/usr/bin/env python3
"""Floods a Tributary's push surfaces (issue #35; bench/run.sh flood).

    flood.py A_BASE TOPIC CALLBACK_TOKEN_PATH SECONDS

From the client address 127.0.0.4, while SECONDS last:
  - 10,000 subscription requests to A's /hub: half with callbacks that
    never answer (127.0.0.3), half with callbacks that answer their
    verification after 14 s (127.0.0.2, /v-slow/);
  - 100 subscribers whose verification answers at once and whose
    deliveries are answered after 14 s (127.0.0.2, /d-slow/);
  - 1,000 forged notifications to A's own callback (CALLBACK_TOKEN_PATH,
    "/push/<token>": a leaked token), unsigned, with a far-future datetime.
Prints what A answered, by status.
"""
import collections
import http.client
import http.server
import socket
import socketserver
import sys
import threading
import time
import urllib.parse

a_base, topic, push_path, seconds = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3], float(sys.argv[4])
a = urllib.parse.urlsplit(a_base)
CLIENT = "127.0.0.4"


def never_answering(host):
    """A server that accepts and never says a word."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, 0))
    s.listen(4096)
    held = []

    def run():
        while True:
            c, _ = s.accept()
            held.append(c)

    threading.Thread(target=run, daemon=True).start()
    return s.getsockname()[1]


class Slow(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, body):
        data = body.encode()
        try:
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the hub gave up on us first: what it is meant to do

    def do_GET(self):
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        if self.path.startswith("/v-slow/"):
            time.sleep(14)
        self.answer(q.get("hub.challenge", [""])[0])

    def handle_one_request(self):
        try:
            super().handle_one_request()
        except OSError:
            self.close_connection = True

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)
        time.sleep(14)
        self.answer("")


class Threading(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 4096


def slow_server(host):
    srv = Threading((host, 0), Slow)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv.server_address[1]


statuses = collections.Counter()
lock = threading.Lock()


def post(path, body, content_type, headers=None, client=CLIENT):
    try:
        c = http.client.HTTPConnection(a.hostname, a.port, timeout=10, source_address=(client, 0))
        h = {"Content-Type": content_type}
        h.update(headers or {})
        c.request("POST", path, body=body, headers=h)
        r = c.getresponse()
        r.read()
        c.close()
        status = r.status
    except OSError:
        status = "error"
    with lock:
        statuses[(path.split("/")[1], status)] += 1
    return status


def subscribe(callback, client=CLIENT):
    return post("/hub", urllib.parse.urlencode({"hub.mode": "subscribe", "hub.topic": topic, "hub.callback": callback}),
                "application/x-www-form-urlencoded", client=client)


def forged(i):
    body = ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" '
            'xmlns:rs="http://www.openarchives.org/rs/terms/">'
            '<rs:md capability="changelist-notification"/>'
            f'<url><loc>http://127.0.0.1:18700/forged/{i}</loc>'
            '<rs:md change="updated" datetime="2999-01-01T00:00:00Z"/></url></urlset>')
    post(push_path, body, "application/xml", {"Link": f'<{a_base}/hub>; rel="hub", <{forged.topic}>; rel="self"'})


never = never_answering("127.0.0.3")
slow = slow_server("127.0.0.2")
# The 100 slow-answering subscribers first, from an address of their own,
# each retried while the hub says its verifications are busy (429).
for i in range(100):
    while subscribe(f"http://127.0.0.2:{slow}/d-slow/{i}", "127.0.0.5") == 429:
        time.sleep(0.2)
start = time.time()
work = []
for i in range(10000):
    if i % 2:
        work.append(lambda i=i: subscribe(f"http://127.0.0.3:{never}/cb/{i}"))
    else:
        work.append(lambda i=i: subscribe(f"http://127.0.0.2:{slow}/v-slow/{i}"))
forged.topic = sys.argv[5] if len(sys.argv) > 5 else ""
for i in range(1000):
    work.append(lambda i=i: forged(i))


def worker(items):
    for fn in items:
        if time.time() - start > seconds:
            return
        fn()


threads = [threading.Thread(target=worker, args=(work[k::16],)) for k in range(16)]
for t in threads:
    t.start()
for t in threads:
    t.join()
sent = time.time() - start
time.sleep(max(0.0, seconds - sent))
print(f"    flood sent in {sent:.1f} s: " +
      ", ".join(f"{what} {status}: {n}" for (what, status), n in sorted(statuses.items(), key=str)))

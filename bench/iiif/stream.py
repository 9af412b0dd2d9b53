#!/usr/bin/env python3
"""A local IIIF Change Discovery 1.0 stream for bench/run.sh iiif: N
activities (Create, Update, Delete over N/2 Manifests) in pages of 100,
shaped like the Rijksmuseum's, and the Manifests themselves. POST /append
adds one Update activity (endTime now) and answers the object's URL, for
the lag measurement.
    stream.py PORT ACTIVITIES"""
import datetime
import http.server
import json
import socketserver
import sys
import threading

port, n = int(sys.argv[1]), int(sys.argv[2])
base = "http://127.0.0.1:%d" % port
page_size = 100
objects = max(1, n // 2)
start = datetime.datetime(2025, 1, 1)
lock = threading.Lock()
items = []
version = {}
for k in range(n):
    obj = k % objects
    kind = "Create" if k < objects else ("Delete" if k % 10 == 0 else "Update")
    items.append((kind, obj, (start + datetime.timedelta(seconds=k)).isoformat() + "Z"))


def obj_url(o):
    return "%s/iiif/%d/manifest" % (base, o)


def page(i):
    with lock:
        total = len(items)
        pages = (total + page_size - 1) // page_size
        chunk = items[i * page_size:(i + 1) * page_size]
    p = {"@context": "http://iiif.io/api/discovery/1/context.json",
         "id": "%s/activity/page-%d" % (base, i), "type": "OrderedCollectionPage", "startIndex": i * page_size,
         "partOf": {"id": base + "/activity/all-changes", "type": "OrderedCollection"},
         "orderedItems": [{"type": kind, "object": {"id": obj_url(o), "type": "Manifest"}, "endTime": t}
                          for kind, o, t in chunk]}
    if i > 0:
        p["prev"] = {"id": "%s/activity/page-%d" % (base, i - 1), "type": "OrderedCollectionPage"}
    if i + 1 < pages:
        p["next"] = {"id": "%s/activity/page-%d" % (base, i + 1), "type": "OrderedCollectionPage"}
    return p


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go in separate writes: Nagle + delayed ACK cost 40 ms a response

    def reply(self, obj, status=200):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/ld+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = self.path
        if path == "/activity/all-changes":
            with lock:
                pages = (len(items) + page_size - 1) // page_size
                total = len(items)
            self.reply({"@context": "http://iiif.io/api/discovery/1/context.json", "id": base + path,
                        "type": "OrderedCollection", "totalItems": total,
                        "first": {"id": base + "/activity/page-0", "type": "OrderedCollectionPage"},
                        "last": {"id": "%s/activity/page-%d" % (base, pages - 1), "type": "OrderedCollectionPage"}})
        elif path.startswith("/activity/page-"):
            self.reply(page(int(path.rsplit("-", 1)[1])))
        elif path.startswith("/iiif/"):
            o = int(path.split("/")[2])
            self.reply({"@context": "http://iiif.io/api/presentation/3/context.json", "id": obj_url(o),
                        "type": "Manifest", "label": {"en": ["Object %d, version %d" % (o, version.get(o, 0))]},
                        "items": []})
        else:
            self.reply({"error": "not found"}, 404)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with lock:
            o = len(items) % objects
            version[o] = version.get(o, 0) + 1
            items.append(("Update", o, datetime.datetime.utcnow().isoformat(timespec="seconds") + "Z"))
        body = obj_url(o).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 256


Server(("127.0.0.1", port), Handler).serve_forever()

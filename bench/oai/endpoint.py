#!/usr/bin/env python3
"""A fast local OAI-PMH 2.0 endpoint for bench/run.sh oai: N records in
pages of 100, pre-rendered as DSpace renders them (oai_dc, a set each,
opaque tokens with cursor and completeListSize), served from memory by a
threaded server. Every record is dated in 2024, the earliest datestamp
said: a harvest window from 2025 on finds nothing, any other all of them. Logs each token asked for to `log` (one per line), so that
the bench can count pages fetched twice.
    endpoint.py PORT RECORDS LOG"""
import datetime
import http.server
import socketserver
import sys
import urllib.parse

port, n, log_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
base = "http://127.0.0.1:%d/oai/request" % port
page_size = 100
head = ('<?xml version="1.0" encoding="UTF-8"?>\n<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="http://www.openarchives.org/OAI/2.0/ '
        'http://www.openarchives.org/OAI/2.0/OAI-PMH.xsd">\n<responseDate>%s</responseDate>\n')


def record(i):
    stamp = "2024-%02d-%02dT%02d:%02d:%02dZ" % (i % 12 + 1, i % 28 + 1, i % 24, i % 60, (i * 7) % 60)
    return ('<record><header><identifier>oai:bench.example.org:123456789/%d</identifier><datestamp>%s</datestamp>'
            '<setSpec>col_123456789_%d</setSpec></header><metadata>'
            '<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" '
            'xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
            'xsi:schemaLocation="http://www.openarchives.org/OAI/2.0/oai_dc/ http://www.openarchives.org/OAI/2.0/oai_dc.xsd">'
            '<dc:title>Record %d: on the sediment transport of braided rivers, volume %d</dc:title>'
            '<dc:creator>Doe, Jane</dc:creator><dc:creator>Roe, Richard</dc:creator>'
            '<dc:subject>Hydrology</dc:subject><dc:date>%s</dc:date><dc:type>Article</dc:type>'
            '<dc:identifier>http://hdl.handle.net/123456789/%d</dc:identifier>'
            '<dc:description>An abstract of some length, as repositories carry: %s</dc:description>'
            '</oai_dc:dc></metadata></record>\n') % (i, stamp, i % 50, i, i % 9, stamp[:10], i, "lorem ipsum " * 20)


pages = []
for p in range(0, n, page_size):
    body = "".join(record(i) for i in range(p + 1, min(n, p + page_size) + 1))
    nxt = p + page_size
    if nxt < n:
        body += '<resumptionToken completeListSize="%d" cursor="%d">oai_dc////%d</resumptionToken>\n' % (n, p, nxt)
    elif p > 0:
        body += '<resumptionToken completeListSize="%d" cursor="%d"/>\n' % (n, p)
    pages.append(body.encode())
identify = ('<request verb="Identify">%s</request>\n<Identify><repositoryName>Bench</repositoryName><baseURL>%s</baseURL>'
            '<protocolVersion>2.0</protocolVersion><adminEmail>a@example.org</adminEmail>'
            '<earliestDatestamp>2024-01-01T00:00:00Z</earliestDatestamp><deletedRecord>persistent</deletedRecord>'
            '<granularity>YYYY-MM-DDThh:mm:ssZ</granularity></Identify>\n') % (base, base)
log = open(log_path, "a", buffering=1)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go in separate writes: Nagle + delayed ACK cost 40 ms a response

    def do_GET(self):
        q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
        verb = q.get("verb", [""])[0]
        now = datetime.datetime.utcnow().replace(microsecond=0).isoformat() + "Z"
        if verb == "Identify":
            body = (head % now + identify + "</OAI-PMH>\n").encode()
        elif verb == "ListRecords":
            token = q.get("resumptionToken", [""])[0]
            offset = int(token.rsplit("/", 1)[1]) if token else 0
            log.write("%d\n" % offset)
            frm = q.get("from", [""])[0]
            if frm and frm > "2024-12-31":
                body = (head % now + '<request verb="ListRecords">%s</request>\n<error code="noRecordsMatch"/>\n'
                        '</OAI-PMH>\n' % base).encode()
            else:
                body = (head % now + '<request verb="ListRecords">%s</request>\n<ListRecords>\n' % base).encode() + \
                    pages[offset // page_size] + b"</ListRecords>\n</OAI-PMH>\n"
        else:
            body = (head % now + '<error code="badVerb"/></OAI-PMH>\n').encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/xml;charset=UTF-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 128


Server(("127.0.0.1", port), Handler).serve_forever()

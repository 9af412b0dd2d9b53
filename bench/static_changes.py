#!/usr/bin/env python3
"""Changes a static Source written by static_source.py: rewrites COUNT of
its resources (the first COUNT, new bytes of the same size) and publishes
them in a Change List (`changelist.xml`, MD5 hashes and lengths, as
py-resync writes them), linked from the Capability List.

    static_changes.py DIR BASE_URL COUNT SIZE ROUND

ROUND makes each round's bytes differ from the last.
"""
import hashlib
import os
import sys
from datetime import datetime, timezone, timedelta

SM = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"'


def main():
    out, base, count, size, rnd = sys.argv[1], sys.argv[2].rstrip('/'), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    start = datetime.now(timezone.utc) - timedelta(seconds=count // 1000 + 2)
    stamp = lambda t: t.strftime('%Y-%m-%dT%H:%M:%SZ')
    entries = []
    for i in range(count):
        seed = hashlib.sha256(f'{rnd}:{i}'.encode()).hexdigest()
        body = (seed * (size // len(seed) + 1))[:size].encode()
        with open(os.path.join(out, 'res', str(i)), 'wb') as f:
            f.write(body)
        when = stamp(start + timedelta(milliseconds=i))
        entries.append(f'<url><loc>{base}/res/{i}</loc><lastmod>{when}</lastmod>'
                       f'<rs:md change="updated" datetime="{when}" hash="md5:{hashlib.md5(body).hexdigest()}" '
                       f'length="{size}" type="text/plain"/></url>')
    until = stamp(datetime.now(timezone.utc))
    with open(os.path.join(out, 'changelist.xml'), 'w') as f:
        f.write(f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {SM}>'
                f'<rs:ln rel="up" href="{base}/capabilitylist.xml"/>'
                f'<rs:md capability="changelist" from="{stamp(start - timedelta(days=1))}" until="{until}"/>')
        f.write('\n'.join(entries))
        f.write('</urlset>\n')
    with open(os.path.join(out, 'capabilitylist.xml'), 'w') as f:
        f.write(f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {SM}>'
                f'<rs:ln rel="up" href="{base}/.well-known/resourcesync"/><rs:md capability="capabilitylist"/>'
                f'<url><loc>{base}/resourcelist.xml</loc><rs:md capability="resourcelist"/></url>'
                f'<url><loc>{base}/changelist.xml</loc><rs:md capability="changelist"/></url></urlset>\n')


if __name__ == '__main__':
    main()

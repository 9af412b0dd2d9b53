#!/usr/bin/env python3
"""Writes a static ResourceSync Source with a backlog, for nginx to serve:
a Resource List at T0 listing nothing, and a Change List from T0 holding
COUNT `created` changes of SIZE-byte resources (MD5 and length, as
py-resync writes them). A Destination's first run baselines the empty list
at once, then applies the whole backlog.

    backlog_source.py DIR BASE_URL COUNT SIZE
"""
import hashlib
import os
import sys
from datetime import datetime, timedelta, timezone

SM = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"'


def stamp(t):
    return t.strftime('%Y-%m-%dT%H:%M:%SZ')


def main():
    out, base, count, size = sys.argv[1], sys.argv[2].rstrip('/'), int(sys.argv[3]), int(sys.argv[4])
    t0 = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(days=1)
    os.makedirs(os.path.join(out, '.well-known'), exist_ok=True)
    os.makedirs(os.path.join(out, 'res'), exist_ok=True)
    with open(os.path.join(out, '.well-known', 'resourcesync'), 'w') as f:
        f.write(f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {SM}><rs:md capability="description"/>'
                f'<url><loc>{base}/capabilitylist.xml</loc><rs:md capability="capabilitylist"/></url></urlset>\n')
    with open(os.path.join(out, 'capabilitylist.xml'), 'w') as f:
        f.write(f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {SM}>'
                f'<rs:ln rel="up" href="{base}/.well-known/resourcesync"/><rs:md capability="capabilitylist"/>'
                f'<url><loc>{base}/resourcelist.xml</loc><rs:md capability="resourcelist"/></url>'
                f'<url><loc>{base}/changelist.xml</loc><rs:md capability="changelist"/></url></urlset>\n')
    with open(os.path.join(out, 'resourcelist.xml'), 'w') as f:
        f.write(f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {SM}>'
                f'<rs:ln rel="up" href="{base}/capabilitylist.xml"/>'
                f'<rs:md at="{stamp(t0)}" capability="resourcelist" completed="{stamp(t0)}"/></urlset>\n')
    with open(os.path.join(out, 'changelist.xml'), 'w') as f:
        f.write(f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {SM}>'
                f'<rs:ln rel="up" href="{base}/capabilitylist.xml"/>'
                f'<rs:md capability="changelist" from="{stamp(t0)}"/>\n')
        for i in range(count):
            seed = hashlib.sha256(str(i).encode()).hexdigest()
            body = (seed * (size // len(seed) + 1))[:size].encode()
            with open(os.path.join(out, 'res', str(i)), 'wb') as r:
                r.write(body)
            when = stamp(t0 + timedelta(seconds=1 + i))
            f.write(f'<url><loc>{base}/res/{i}</loc><lastmod>{when}</lastmod>'
                    f'<rs:md change="created" datetime="{when}" hash="md5:{hashlib.md5(body).hexdigest()}" '
                    f'length="{size}" type="text/plain"/></url>\n')
        f.write('</urlset>\n')


if __name__ == '__main__':
    main()

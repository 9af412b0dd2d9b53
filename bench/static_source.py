#!/usr/bin/env python3
"""Writes a static ResourceSync Source for nginx to serve, shaped the way
static publishers lay one out: a Source Description under /.well-known,
one Capability List, one Resource List (MD5 hashes and lengths, as
py-resync writes them), and the resources as plain files.

    static_source.py DIR BASE_URL COUNT SIZE

STATIC_SOURCE_PART (default 50,000): entries per list before an index.
"""
import hashlib
import os
import sys
from datetime import datetime, timezone

SM = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"'


def main():
    out, base, count, size = sys.argv[1], sys.argv[2].rstrip('/'), int(sys.argv[3]), int(sys.argv[4])
    now = datetime.now(timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')
    os.makedirs(os.path.join(out, '.well-known'), exist_ok=True)
    os.makedirs(os.path.join(out, 'res'), exist_ok=True)
    with open(os.path.join(out, '.well-known', 'resourcesync'), 'w') as f:
        f.write(f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {SM}>'
                f'<rs:md capability="description"/>'
                f'<url><loc>{base}/capabilitylist.xml</loc><rs:md capability="capabilitylist"/></url></urlset>\n')
    with open(os.path.join(out, 'capabilitylist.xml'), 'w') as f:
        f.write(f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {SM}>'
                f'<rs:ln rel="up" href="{base}/.well-known/resourcesync"/><rs:md capability="capabilitylist"/>'
                f'<url><loc>{base}/resourcelist.xml</loc><rs:md capability="resourcelist"/></url></urlset>\n')
    entries = []
    for i in range(count):
        seed = hashlib.sha256(str(i).encode()).hexdigest()
        body = (seed * (size // len(seed) + 1))[:size].encode()
        with open(os.path.join(out, 'res', str(i)), 'wb') as f:
            f.write(body)
        entries.append(f'<url><loc>{base}/res/{i}</loc><lastmod>{now}</lastmod>'
                       f'<rs:md hash="md5:{hashlib.md5(body).hexdigest()}" length="{size}" type="text/plain"/></url>')
    # Past 50,000 entries a list is split, and the parts grouped by an index
    # (spec section 7), as py-resync writes them: resourcelist.xml is then
    # the index, and its parts resourcelist-00000.xml, ...
    part_size = int(os.environ.get('STATIC_SOURCE_PART', '50000'))  # more: one list past the limit
    parts = [entries[i:i + part_size] for i in range(0, len(entries), part_size)] or [[]]
    if len(parts) == 1:
        write_list(os.path.join(out, 'resourcelist.xml'), base, now, parts[0])
        return
    with open(os.path.join(out, 'resourcelist.xml'), 'w') as f:
        f.write(f'<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex {SM}>'
                f'<rs:ln rel="up" href="{base}/capabilitylist.xml"/>'
                f'<rs:md at="{now}" capability="resourcelist" completed="{now}"/>')
        for n, part in enumerate(parts):
            name = f'resourcelist-{n:05d}.xml'
            write_list(os.path.join(out, name), base, now, part, index=f'{base}/resourcelist.xml')
            f.write(f'<sitemap><loc>{base}/{name}</loc><rs:md at="{now}"/></sitemap>')
        f.write('</sitemapindex>\n')


def write_list(path, base, now, entries, index=None):
    with open(path, 'w') as f:
        f.write(f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {SM}>'
                f'<rs:ln rel="up" href="{base}/capabilitylist.xml"/>')
        if index:
            f.write(f'<rs:ln rel="index" href="{index}"/>')
        f.write(f'<rs:md at="{now}" capability="resourcelist" completed="{now}"/>')
        f.write('\n'.join(entries))
        f.write('</urlset>\n')


if __name__ == '__main__':
    main()

#!/usr/bin/env python3
"""Writes a Source that offers a Resource List and nothing else, the
commonest kind in the field: a Source Description, a Capability List naming
only a Resource List Index, and its parts of 50,000 entries (MD5 and
length, as py-resync writes them). nginx serves the resources themselves
from their URI (`return 200 "<uri> v<version>"`, the version from a map
this script writes), so a million resources need no million files.

    listonly_source.py DIR BASE_URL COUNT [--change SHARE --seed N]

With --change, a share of the resources gets a new version (updated), and
only the parts that name one are rewritten (their ETag changes, the
others' stays).
"""
import argparse
import hashlib
import os
import random
from datetime import datetime, timezone

SM = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"'
PART = 50000


def body(i, version):
    return f'/res/{i} v{version}'.encode()


def main():
    p = argparse.ArgumentParser()
    p.add_argument('dir')
    p.add_argument('base')
    p.add_argument('count', type=int)
    p.add_argument('--change', type=float, default=0.0)
    p.add_argument('--seed', type=int, default=1)
    a = p.parse_args()
    base = a.base.rstrip('/')
    os.makedirs(os.path.join(a.dir, '.well-known'), exist_ok=True)
    versions_path = os.path.join(a.dir, 'versions.txt')
    versions = {}
    if os.path.exists(versions_path):
        for line in open(versions_path):
            i, v = line.split()
            versions[int(i)] = int(v)
    changed = set()
    if a.change > 0:
        rnd = random.Random(a.seed)
        changed = set(rnd.sample(range(a.count), int(a.count * a.change)))
        for i in changed:
            versions[i] = versions.get(i, 0) + 1
        with open(versions_path, 'w') as f:
            for i, v in sorted(versions.items()):
                f.write(f'{i} {v}\n')
        with open(os.path.join(a.dir, 'versions.map'), 'w') as f:
            for i, v in sorted(versions.items()):
                f.write(f'/res/{i} {v};\n')
    elif not os.path.exists(os.path.join(a.dir, 'versions.map')):
        open(os.path.join(a.dir, 'versions.map'), 'w').close()
    now = datetime.now(timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')
    with open(os.path.join(a.dir, '.well-known', 'resourcesync'), 'w') as f:
        f.write(f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {SM}><rs:md capability="description"/>'
                f'<url><loc>{base}/capabilitylist.xml</loc><rs:md capability="capabilitylist"/></url></urlset>\n')
    with open(os.path.join(a.dir, 'capabilitylist.xml'), 'w') as f:
        f.write(f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {SM}>'
                f'<rs:ln rel="up" href="{base}/.well-known/resourcesync"/><rs:md capability="capabilitylist"/>'
                f'<url><loc>{base}/resourcelist.xml</loc><rs:md capability="resourcelist"/></url></urlset>\n')
    parts = (a.count + PART - 1) // PART
    with open(os.path.join(a.dir, 'resourcelist.xml'), 'w') as f:
        f.write(f'<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex {SM}>'
                f'<rs:ln rel="up" href="{base}/capabilitylist.xml"/><rs:md capability="resourcelist" at="{now}"/>\n')
        for k in range(parts):
            f.write(f'<sitemap><loc>{base}/resourcelist-{k}.xml</loc></sitemap>\n')
        f.write('</sitemapindex>\n')
    for k in range(parts):
        lo, hi = k * PART, min(a.count, (k + 1) * PART)
        path = os.path.join(a.dir, f'resourcelist-{k}.xml')
        if a.change > 0 and not any(lo <= i < hi for i in changed) and os.path.exists(path):
            continue
        with open(path, 'w') as f:
            f.write(f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {SM}>'
                    f'<rs:ln rel="up" href="{base}/capabilitylist.xml"/>'
                    f'<rs:md capability="resourcelist" at="{now}"/>\n')
            for i in range(lo, hi):
                b = body(i, versions.get(i, 0))
                f.write(f'<url><loc>{base}/res/{i}</loc>'
                        f'<rs:md hash="md5:{hashlib.md5(b).hexdigest()}" length="{len(b)}" type="text/plain"/></url>\n')
            f.write('</urlset>\n')


if __name__ == '__main__':
    main()

#!/usr/bin/env python3
"""Writes the package fuzz target's seed ZIPs (tests/fuzz/corpus/package/)
with Python's zipfile, as py-resync and other writers produce them: a valid
Resource Dump package, a Change Dump package with a deletion, and the
shapes the package checks refuse (zip slip, a symlink, a path the manifest
does not name). Run it again after changing it; the ZIPs are committed."""
import hashlib
import os
import stat
import sys
import zipfile

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "package")
os.makedirs(out, exist_ok=True)
NS = ('xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" '
      'xmlns:rs="http://www.openarchives.org/rs/terms/"')


def entry(loc, body, path, extra=""):
    sha = hashlib.sha256(body).hexdigest()
    return (f'<url><loc>{loc}</loc><rs:md hash="sha-256:{sha}" length="{len(body)}" '
            f'path="{path}"{extra}/></url>')


def manifest(kind, urls, head='at="2026-01-01T00:00:00Z"'):
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {NS}><rs:md capability="{kind}" {head}/>'
            + "".join(urls) + "</urlset>").encode()


def write(name, members, compression=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(os.path.join(out, name), "w", compression) as z:
        for arc, data in members:
            if isinstance(arc, zipfile.ZipInfo):
                z.writestr(arc, data)
            else:
                z.writestr(arc, data)


a, b = b"alpha\n", b"bravo " * 50
write("resourcedump.zip", [
    ("manifest.xml", manifest("resourcedump-manifest", [
        entry("http://fuzz.example/a", a, "/resources/a"),
        entry("http://fuzz.example/b", b, "/resources/b")])),
    ("resources/a", a), ("resources/b", b)])
write("resourcedump-stored.zip", [
    ("manifest.xml", manifest("resourcedump-manifest", [entry("http://fuzz.example/a", a, "resources/a")])),
    ("resources/a", a)], zipfile.ZIP_STORED)
write("changedump.zip", [
    ("manifest.xml", manifest("changedump-manifest", [
        entry("http://fuzz.example/a", a, "/changes/a", ' change="updated" datetime="2026-01-01T01:00:00Z"'),
        '<url><loc>http://fuzz.example/gone</loc><rs:md change="deleted" datetime="2026-01-01T02:00:00Z"/></url>'],
        'from="2026-01-01T00:00:00Z" until="2026-01-02T00:00:00Z"')),
    ("changes/a", a)])
write("zipslip.zip", [
    ("manifest.xml", manifest("resourcedump-manifest", [entry("http://fuzz.example/a", a, "/../../etc/a")])),
    ("../../etc/a", a)])
link = zipfile.ZipInfo("resources/a")
link.external_attr = (stat.S_IFLNK | 0o777) << 16
write("symlink.zip", [
    ("manifest.xml", manifest("resourcedump-manifest", [entry("http://fuzz.example/a", a, "/resources/a")])),
    (link, b"/etc/passwd")])
write("unnamed.zip", [
    ("manifest.xml", manifest("resourcedump-manifest", [entry("http://fuzz.example/a", a, "/resources/a")])),
    ("resources/a", a), ("resources/extra", b"not in the manifest")])

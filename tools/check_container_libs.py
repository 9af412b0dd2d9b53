#!/usr/bin/env python3
"""Checks that the container image's runtime stage (deploy/Containerfile)
installs every shared library the binary links, without running a container
(CI may have no container runtime).

    check_container_libs.py BINARY CONTAINERFILE

Each library `ldd BINARY` resolves is mapped to the Debian package that owns
it (`dpkg -S`, on this Debian 12 host, where the binary was built against the
same packages the image installs). A package is present in the image when
the runtime stage installs it, when one it installs depends on it (the
installed packages' Depends and Pre-Depends, followed), or when it is of
priority "required" (what debian:bookworm-slim holds). Any library whose
package is none of those fails the check, named with its package: the image
would not start (the binary dies at load with "cannot open shared object
file")."""
import os
import re
import subprocess
import sys


def runtime_packages(containerfile):
    text = open(containerfile).read()
    stages = re.split(r"^FROM ", text, flags=re.M)
    last = stages[-1]
    m = re.search(r"apt-get install[^\n]*?((?:\\\n|[^\n])*)", last)
    if not m:
        sys.exit("check_container_libs: no apt-get install in the last stage of " + containerfile)
    words = m.group(0).replace("\\\n", " ").split("&&")[0].split()
    return {w for w in words if not w.startswith("-") and w not in ("apt-get", "install", "DEBIAN_FRONTEND=noninteractive")}


def dpkg_field(package, fmt):
    r = subprocess.run(["dpkg-query", "-W", "-f", fmt, package], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else ""


def closure(packages):
    seen = set()
    todo = list(packages)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        deps = dpkg_field(p, "${Depends},${Pre-Depends}")
        for clause in deps.split(","):
            for alt in clause.split("|"):
                name = alt.strip().split(" ")[0].split(":")[0]
                if name and dpkg_field(name, "${Status}").endswith("installed"):
                    todo.append(name)
    return seen


def required():
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Priority}\n"], capture_output=True, text=True)
    return {line.split()[0] for line in r.stdout.splitlines() if line.endswith(" required")}


def owner(path):
    for candidate in {path, os.path.realpath(path), path.replace("/lib/", "/usr/lib/", 1),
                      os.path.realpath(path).replace("/usr/lib/", "/lib/", 1)}:
        r = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":")[0].strip()
    return None


def main():
    binary, containerfile = sys.argv[1], sys.argv[2]
    installs = runtime_packages(containerfile)
    present = closure(installs | required())
    libs = re.findall(r"=> (/\S+)", subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout)
    missing, unowned = [], []
    for lib in libs:
        pkg = owner(lib)
        if pkg is None:
            unowned.append(lib)
        elif pkg not in present:
            missing.append((lib, pkg))
    for lib in unowned:
        print("check_container_libs: no Debian package owns %s" % lib)
    for lib, pkg in missing:
        print("check_container_libs: %s (package %s) is not installed by the runtime stage of %s" %
              (lib, pkg, containerfile))
    print("check_container_libs: %d libraries, %d packages installed by the runtime stage, %d missing" %
          (len(libs), len(installs), len(missing) + len(unowned)))
    return 1 if missing or unowned else 0


if __name__ == "__main__":
    sys.exit(main())

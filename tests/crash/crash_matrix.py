#!/usr/bin/env python3
"""The crash matrix (#13): kills `tributary sync` and `tributary run` with
SIGKILL at random points against a Source that keeps changing, restarts, and
once the Source is quiet checks that nothing was lost or repeated.

    crash_matrix.py --bin BUILD/aggregator/tributary --pg CONNINFO [--trials 20] [--seed 1]
                    [--cases pg-restart,disk-full,concurrent] [--pg-stop CMD --pg-start CMD]

The Source is `tributary simulate` (Resource List, Change List index with
closing parts, Resource Dump, Change Dump), changing 25 times a second until
it has made its changes. Each trial takes the next scenario in turn:

  baseline-lists     `sync --baseline` from the Resource List, killed
  baseline-dump      `sync --baseline` from the Resource Dump, killed
  incremental-list   `sync --incremental` from the Change List, killed
  incremental-dump   `sync --incremental` from the Change Dump, killed
  audit-repair       `sync --audit --repair` (after the store was damaged), killed
  republish          `tributary run` (syncing, rendering, building dumps), killed

then runs until the Source is quiet and the run finds nothing new, and checks:

  - the store equals the Source: the same live URIs, each with the md5 the
    Source's final Resource List gives;
  - every change the Source made after our baseline's snapshot is in our
    change log exactly once (no (uri, datetime) twice, none missing);
  - a second Tributary that baselines from ours and then follows it holds
    the same resources with the same bytes;
  - `check-blobs` finds no problem;
  - with --py-resync, the reference Python client (py-resync's
    resync-sync) baselines from ours and its audit says IN SYNC.

Extra cases: PostgreSQL stopped for 30 s mid-sync under a running daemon
(needs --pg-stop and --pg-start; its first run must succeed within 10 s of
the return, and the time is printed); data_dir on a small full file system
(disk-full: a CLI baseline; disk-full-run: under the daemon, which must
charge no resource a retry and succeed within 10 s of space returning); two
daemons and a CLI run on one database at once. Prints one line per trial and a summary, and
exits 1 on any loss, repeat or failed check.
"""
import argparse
import calendar
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

SM = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
RS = "{http://www.openarchives.org/rs/terms/}"
SCENARIOS = ["baseline-lists", "baseline-dump", "incremental-list", "incremental-dump", "audit-repair", "republish"]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def wait_http(url, seconds=15):
    until = time.time() + seconds
    while time.time() < until:
        try:
            get(url, 2)
            return True
        except Exception:
            time.sleep(0.05)
    return False


def psql(conninfo, sql):
    out = subprocess.run(["psql", conninfo, "-AtF", "\t", "-c", sql], check=True, capture_output=True,
                         text=True).stdout
    return [line.split("\t") for line in out.splitlines() if line]


def micros(text):
    """'2026-11-22 20:03:54.865618+00' or '2026-11-22T20:03:54.865618Z' -> integer microseconds."""
    m = re.match(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d+))?", text)
    secs = calendar.timegm(tuple(int(m.group(i)) for i in range(1, 7)))
    frac = (m.group(7) or "0")[:6].ljust(6, "0")
    return secs * 1000000 + int(frac)


class Source:
    """tributary simulate on a port of its own."""

    def __init__(self, bin_path, work, seed, resources, changes, rate, part_size):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.changes = changes
        os.makedirs(work, exist_ok=True)
        self.log = open(os.path.join(work, "simulate.log"), "w")
        self.proc = subprocess.Popen([bin_path, "simulate", "--listen", f"127.0.0.1:{self.port}", "--resources",
                                      str(resources), "--change-rate", str(rate), "--seed", str(seed), "--size", "300",
                                      "--part-size", str(part_size), "--max-changes", str(changes)],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        if not wait_http(self.base + "/.well-known/resourcesync"):
            raise RuntimeError("simulate did not start")

    def change_entries(self):
        """Every change the Source published: (uri, change, datetime in µs)."""
        out = []
        index = ET.fromstring(get(self.base + "/changelist.xml"))
        for loc in index.iter(SM + "loc"):
            doc = ET.fromstring(get(loc.text))
            for url in doc.iter(SM + "url"):
                md = url.find(RS + "md")
                when = md.get("datetime") or url.findtext(SM + "lastmod")
                out.append((url.findtext(SM + "loc"), md.get("change"), micros(when)))
        return out

    def quiet(self):
        return len(self.change_entries()) >= self.changes

    def resource_list(self):
        """uri -> md5 hex."""
        out = {}
        doc = ET.fromstring(get(self.base + "/resourcelist.xml"))
        urls = list(doc.iter(SM + "url"))
        if doc.tag == SM + "sitemapindex":
            urls = []
            for loc in doc.iter(SM + "loc"):
                urls += list(ET.fromstring(get(loc.text)).iter(SM + "url"))
        for url in urls:
            md = url.find(RS + "md")
            out[url.findtext(SM + "loc")] = md.get("hash").split("md5:")[1].split()[0]
        return out

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        self.log.close()


class Tributary:
    """One Tributary: a database, a data_dir, a config."""

    def __init__(self, args, work, name, sources, strategy="auto", data_dir=None, sets=None):
        self.bin = args.bin
        self.db = name
        subprocess.run(["psql", args.pg, "-qc", f"DROP DATABASE IF EXISTS {name}"], check=True, capture_output=True)
        subprocess.run(["psql", args.pg, "-qc", f"CREATE DATABASE {name}"], check=True, capture_output=True)
        self.conninfo = f"{args.pg} dbname={name}"
        self.dir = os.path.join(work, name)
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.config = os.path.join(self.dir, "config.json")
        cfg = {"database": self.conninfo, "data_dir": data_dir or os.path.join(self.dir, "data"),
               "listen": f"127.0.0.1:{self.port}"}
        if args.default_config:
            # What a new user writes: every other setting at its default
            # (strategy auto, interval 15 min, Change List parts of 10,000).
            cfg["sources"] = [{"name": n, "url": u} for n, u in sources]
        else:
            # Parts of 40 close within a trial, a dump is rebuilt each second,
            # the daemon polls each second, and the scenario picks lists or dumps.
            cfg.update({"change_list_part_size": 40, "resource_dump_interval": "1s",
                        "sources": [{"name": n, "url": u, "interval": "1s", "strategy": strategy}
                                    for n, u in sources]})
        if sets:
            cfg["sets"] = sets
        with open(self.config, "w") as f:
            json.dump(cfg, f)
        self.cli("migrate")

    def cli(self, *words, check=False, timeout=600):
        r = subprocess.run([self.bin, *words, "--config", self.config], capture_output=True, text=True,
                           timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"tributary {' '.join(words)}: exit {r.returncode}\n{r.stdout}{r.stderr}")
        return r

    def spawn(self, *words, log="spawn.log"):
        out = open(os.path.join(self.dir, log), "a")
        return subprocess.Popen([self.bin, *words, "--config", self.config], stdout=out, stderr=subprocess.STDOUT)

    def sync_until_quiet(self, source, mode="--incremental", tries=40):
        """Runs until the Source is quiet and two runs in a row change nothing."""
        calm = 0
        for _ in range(tries):
            quiet = source.quiet()
            r = self.cli("sync", mode, "--wait")
            m = re.search(r"created (\d+), updated (\d+), deleted (\d+)", r.stdout)
            changed = not m or any(int(x) for x in m.groups())
            if r.returncode == 0 and quiet and not changed:
                calm += 1
                if calm == 2:
                    return True
            else:
                calm = 0
            time.sleep(0.3)
        return False


def kill_after(proc, seconds):
    """SIGKILL after `seconds` unless it ended; True when it was killed."""
    try:
        proc.wait(timeout=seconds)
        return False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return True


def check(args, source, trib, work, n, repaired=()):
    """The checks after a trial; returns (lost, repeated, problems). The
    `repaired` URIs were damaged on purpose: the audit logs their repair, a
    second entry for the same upstream change, as it must."""
    problems = []
    want = source.resource_list()
    held = {uri: md5 for uri, md5 in psql(trib.conninfo, "SELECT uri, md5 FROM resource WHERE state = 'live'")}
    if held != want:
        missing = set(want) - set(held)
        extra = set(held) - set(want)
        differ = [u for u in want if u in held and held[u] != want[u]]
        problems.append(f"store != Source: {len(missing)} missing, {len(extra)} extra, {len(differ)} differ")
    baseline_at = psql(trib.conninfo, "SELECT baseline_at FROM watermark")
    since = micros(baseline_at[0][0]) if baseline_at and baseline_at[0][0] else 0
    logged = {}
    for uri, change, when in psql(trib.conninfo, "SELECT uri, change, upstream_datetime FROM change_log "
                                                 "WHERE upstream_datetime IS NOT NULL"):
        key = (uri, micros(when))
        logged[key] = logged.get(key, 0) + (0 if uri in repaired and key in logged else 1)
    upstream = [(u, c, t) for u, c, t in source.change_entries() if t > since]
    missing = [(u, c, t) for u, c, t in upstream if (u, t) not in logged]
    lost = len(missing)
    if missing and os.environ.get("CRASH_DEBUG"):
        for u, c, t in missing[:5]:
            rows = psql(trib.conninfo, f"SELECT change, upstream_datetime, recorded_at FROM change_log WHERE uri = '{u}' ORDER BY seq")
            print(f"  lost {c} {u} at {t} (baseline_at {since}); logged: {rows}", file=sys.stderr)
    repeated = sum(times - 1 for times in logged.values() if times > 1)
    if repeated and os.environ.get("CRASH_DEBUG"):
        for (u, t), times in [kv for kv in logged.items() if kv[1] > 1][:5]:
            rows = psql(trib.conninfo, f"SELECT seq, change, upstream_datetime, recorded_at FROM change_log WHERE uri = '{u}' ORDER BY seq")
            print(f"  repeated {u} at {t} x{times} (repaired: {u in repaired}); logged: {rows}", file=sys.stderr)
    blobs = trib.cli("check-blobs")
    if "problems: 0" not in blobs.stdout:
        problems.append("check-blobs: " + blobs.stdout.strip().splitlines()[-1] if blobs.stdout else "check-blobs failed")
    # The history we publish holds what a follower relies on (#49).
    history = trib.cli("check-history")
    if history.returncode != 0:
        problems.append("check-history: " + " | ".join((history.stdout + history.stderr).strip().splitlines()[:4]))
    # A second Tributary follows ours: baseline, then incremental.
    serve = trib.spawn("serve", log="serve.log")
    try:
        if not wait_http(trib.base + "/.well-known/resourcesync"):
            problems.append("tributary serve did not start")
        else:
            follower = Tributary(args, work, f"crash_b{n}", [("a", trib.base + "/")])
            follower.cli("sync", "--baseline")
            follower.cli("sync", "--incremental")
            theirs = {}
            for uri, md5 in psql(follower.conninfo, "SELECT uri, md5 FROM resource WHERE state = 'live'"):
                m = re.search(r"/resources/(.+)$", uri)
                theirs[urllib.parse.unquote(m.group(1)) if m else uri] = md5
            if theirs != held:
                problems.append(f"the follower holds {len(theirs)} resources, {sum(1 for u in held if theirs.get(u) != held[u])} differ from ours")
            theirs_history = follower.cli("check-history")
            if theirs_history.returncode != 0:
                problems.append("the follower's check-history: " +
                                " | ".join((theirs_history.stdout + theirs_history.stderr).strip().splitlines()[:4]))
            subprocess.run(["psql", args.pg, "-qc", f"DROP DATABASE IF EXISTS {follower.db} WITH (FORCE)"],
                           capture_output=True)
            if args.py_resync:
                problems += py_resync_follows(args, trib, work, n, len(held))
    finally:
        serve.terminate()
        serve.wait()
    return lost, repeated, problems


def py_resync_follows(args, trib, work, n, live):
    """The reference Python client (resync-sync) baselines from ours, then
    audits: it must report IN SYNC with every live resource the same."""
    dest = os.path.join(work, f"py-resync-{n}")
    common = ["--noauth", "--hash", "md5", "--capabilitylist", trib.base + "/sets/up/capabilitylist.xml",
              trib.base + "/", dest]
    # The Debian interpreter, whose python3-requests/-dateutil/-defusedxml
    # deploy/install-deps.sh installs (not a virtualenv's on the PATH).
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    run = lambda mode: subprocess.run([python, os.path.join(args.py_resync, "resync-sync"), mode, *common],
                                      capture_output=True, text=True, cwd=args.py_resync, timeout=600)
    base = run("--baseline")
    audit = run("--audit")
    shutil.rmtree(dest, ignore_errors=True)
    if f"IN SYNC (same={live}, to create=0, to update=0, to delete=0)" not in audit.stdout + audit.stderr:
        tail = (base.stdout + base.stderr + audit.stdout + audit.stderr).strip().splitlines()[-2:]
        return ["py-resync: " + " / ".join(tail)]
    return []


def settle(args, source, trib, work, n, repaired=()):
    """Runs until the Source is quiet, then check(): (lost, repeated, problems)."""
    ok = trib.sync_until_quiet(source)
    lost, repeated, problems = check(args, source, trib, work, n, repaired)
    if not ok:
        problems.append("never became quiet")
    return lost, repeated, problems


def trial(args, n, scenario, rng, work):
    source = Source(args.bin, work, seed=n + 1, resources=args.resources, changes=args.changes, rate=25, part_size=40)
    strategy = "dumps" if scenario.endswith("dump") else "lists"
    trib = Tributary(args, work, f"crash_a{n}", [("up", source.base + "/")], strategy=strategy)
    kills = 0
    repaired = []
    try:
        if scenario.startswith("baseline"):
            for _ in range(args.kills):
                kills += kill_after(trib.spawn("sync", "--baseline", "--batch-size", "20"), rng.uniform(0.05, 0.6))
            trib.cli("sync", "--baseline", "--wait")
        elif scenario.startswith("incremental"):
            trib.cli("sync", "--baseline")  # partial while the Source changes: retried later
            time.sleep(3.0)  # changes pile up
            for _ in range(args.kills):
                kills += kill_after(trib.spawn("sync", "--incremental", "--batch-size", "2"), rng.uniform(0.05, 0.4))
                time.sleep(0.3)
        elif scenario == "audit-repair":
            trib.cli("sync", "--baseline")  # partial while the Source changes: retried later
            # Damage: a resource we hold gone, another one's hash wrong.
            repaired = [r[0] for r in psql(trib.conninfo, "UPDATE resource SET md5 = 'x', blob_sha256 = NULL WHERE uri IN "
                                                          "(SELECT uri FROM resource ORDER BY uri LIMIT 5) RETURNING uri")]
            for _ in range(args.kills):
                kills += kill_after(trib.spawn("sync", "--audit", "--repair", "--batch-size", "10"),
                                    rng.uniform(0.05, 0.3))
            trib.cli("sync", "--audit", "--repair", "--wait")
        else:  # republish: the daemon syncs, renders and builds dumps
            for _ in range(args.kills):
                kills += kill_after(trib.spawn("run", log="run.log"), rng.uniform(0.3, 3.0))
        return (kills, *settle(args, source, trib, work, n, set(repaired)))
    finally:
        source.stop()
        subprocess.run(["psql", args.pg, "-qc", f"DROP DATABASE IF EXISTS {trib.db} WITH (FORCE)"],
                       capture_output=True)


def case_pg_restart(args, work):
    """PostgreSQL stops for 30 s under a running daemon, then comes back."""
    source = Source(args.bin, work, seed=101, resources=args.resources, changes=args.changes, rate=25, part_size=40)
    trib = Tributary(args, work, "crash_pg", [("up", source.base + "/")])
    daemon = trib.spawn("run", log="run.log")
    try:
        time.sleep(2)
        subprocess.run(args.pg_stop, shell=True, check=True, capture_output=True)
        time.sleep(args.pg_down)
        subprocess.run(args.pg_start, shell=True, check=True, capture_output=True)
        back = time.time()
        # The daemon recovers by itself: wait for its runs to catch up, and
        # note when its first run succeeded after the database came back.
        deadline = time.time() + 120
        caught_up = False
        recovered = None
        while time.time() < deadline and not caught_up:
            time.sleep(0.2)
            try:
                if daemon.poll() is not None:
                    break
                status = json.loads(get(trib.base + "/api/v1/status"))
                s = status["data"]["sources"][0]
                if recovered is None and s["last_success"] and micros(s["last_success"]["finished_at"]) > back * 1e6:
                    recovered = time.time() - back
                caught_up = source.quiet() and s["last_success"] and s["resources"]["live"] == args.resources and \
                    s["state"] == "idle"
            except Exception:
                pass
        alive = daemon.poll() is None
        daemon.terminate()
        daemon.wait()
        lost, repeated, problems = settle(args, source, trib, work, 900)
        if not alive:
            problems.append("the daemon exited")
        if recovered is None:
            problems.append("no run succeeded within 120 s of PostgreSQL's return")
        elif recovered > 10:
            problems.append(f"the first run succeeded {recovered:.1f} s after PostgreSQL's return (more than 10 s)")
        return lost, repeated, problems, (f"first run succeeded {recovered:.1f} s after PostgreSQL returned "
                                          f"({args.pg_down:.0f} s down)" if recovered is not None else "")
    finally:
        if daemon.poll() is None:
            daemon.kill()
        source.stop()


def case_disk_full(args, work):
    """data_dir on a 24 MiB file system that fills up mid-baseline."""
    mnt = os.path.join(work, "small")
    os.makedirs(mnt)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", mnt], capture_output=True).returncode != 0:
        return None  # no permission to mount here
    try:
        source = Source(args.bin, work, seed=202, resources=args.resources * 10, changes=args.changes, rate=25,
                        part_size=40)
        trib = Tributary(args, work, "crash_full", [("up", source.base + "/")], data_dir=os.path.join(mnt, "data"))
        filler = os.path.join(mnt, "filler")
        with open(filler, "wb") as f:
            f.write(b"\0" * (22 * 1024 * 1024))
        full = trib.cli("sync", "--baseline")
        said = "No space left on device" in full.stdout
        os.remove(filler)
        lost, repeated, problems = settle(args, source, trib, work, 901)
        if full.returncode == 0:
            problems.append("the run on a full disk claimed success")
        if not said:
            problems.append("the run on a full disk did not say so: " + full.stdout[-300:])
        source.stop()
        return lost, repeated, problems
    finally:
        subprocess.run(["umount", "-l", mnt], capture_output=True)


def case_disk_full_run(args, work):
    """tributary run with data_dir on a 64 MiB file system that fills up mid-baseline, then space returns."""
    mnt = os.path.join(work, "small")
    os.makedirs(mnt)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", mnt], capture_output=True).returncode != 0:
        return None  # no permission to mount here
    daemon = None
    source = None
    try:
        source = Source(args.bin, work, seed=404, resources=args.resources * 10, changes=args.changes, rate=25,
                        part_size=40)
        trib = Tributary(args, work, "crash_fullrun", [("up", source.base + "/")], data_dir=os.path.join(mnt, "data"))
        filler = os.path.join(mnt, "filler")
        st = os.statvfs(mnt)
        with open(filler, "wb") as f:
            f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - 3 * 1024 * 1024))
        daemon = trib.spawn("run", log="run.log")
        problems = []
        full_seen = False
        deadline = time.time() + 120
        while time.time() < deadline and not full_seen:
            time.sleep(0.2)
            try:
                full_seen = json.loads(get(trib.base + "/api/v1/status"))["data"]["node"]["disk"]["full"]
            except Exception:
                pass
        if not full_seen:
            problems.append("the daemon never said the disk was full")
        retries = int(psql(trib.conninfo, "SELECT count(*) FROM retry")[0][0])
        if retries:
            problems.append(f"{retries} resources charged a retry for the full disk")
        os.remove(filler)
        freed = time.time()
        resumed = None
        deadline = time.time() + 120
        while time.time() < deadline and resumed is None:
            time.sleep(0.2)
            try:
                s = json.loads(get(trib.base + "/api/v1/status"))["data"]["sources"][0]
                if s["last_success"] and micros(s["last_success"]["finished_at"]) > freed * 1e6:
                    resumed = time.time() - freed
            except Exception:
                pass
        daemon.terminate()
        daemon.wait()
        if resumed is None:
            problems.append("no run succeeded within 120 s of space returning")
        elif resumed > 10:
            problems.append(f"the first run succeeded {resumed:.1f} s after space returned (more than 10 s)")
        lost, repeated, more = settle(args, source, trib, work, 903)
        return lost, repeated, problems + more, (f"first run succeeded {resumed:.1f} s after space returned"
                                                 if resumed is not None else "")
    finally:
        if daemon and daemon.poll() is None:
            daemon.kill()
        if source:
            source.stop()
        subprocess.run(["umount", "-l", mnt], capture_output=True)


def case_concurrent(args, work):
    """Two daemons and a CLI run on one database and data_dir at once."""
    source = Source(args.bin, work, seed=303, resources=args.resources, changes=args.changes, rate=25, part_size=40)
    trib = Tributary(args, work, "crash_conc", [("up", source.base + "/")])
    first = trib.spawn("run", log="run1.log")
    # The second daemon listens elsewhere: same database, same data_dir.
    other = json.load(open(trib.config))
    other["listen"] = f"127.0.0.1:{free_port()}"
    other_cfg = os.path.join(trib.dir, "config2.json")
    json.dump(other, open(other_cfg, "w"))
    second = subprocess.Popen([args.bin, "run", "--config", other_cfg], stdout=open(os.path.join(trib.dir, "run2.log"), "w"),
                              stderr=subprocess.STDOUT)
    try:
        for _ in range(3):
            trib.cli("sync", "--incremental", "--wait")
            time.sleep(0.5)
        while not source.quiet():
            time.sleep(0.5)
        time.sleep(4)
    finally:
        for p in (first, second):
            p.terminate()
            p.wait()
    lost, repeated, problems = settle(args, source, trib, work, 902)
    source.stop()
    return lost, repeated, problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--pg", required=True, help="conninfo of a PostgreSQL where databases may be created")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--kills", type=int, default=2, help="SIGKILLs per trial")
    ap.add_argument("--resources", type=int, default=2000)
    ap.add_argument("--changes", type=int, default=300, help="changes the Source makes, then it is quiet")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", default="", help="extra cases: pg-restart,disk-full,disk-full-run,concurrent")
    ap.add_argument("--pg-stop", default="", help="for pg-restart: a shell command that stops PostgreSQL")
    ap.add_argument("--pg-start", default="", help="for pg-restart: a shell command that starts it again")
    ap.add_argument("--pg-down", type=float, default=30)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS), help="the scenarios taken in turn")
    ap.add_argument("--default-config", action="store_true",
                    help="configs name the sources and nothing else (strategy auto: the scenario's lists/dump "
                         "choice is then the engine's)")
    ap.add_argument("--py-resync", default="", help="a checkout of resync/resync (its resync-sync script): the "
                                                     "reference Python client then also follows ours, and must audit IN SYNC")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="tributary-crash-")
    failed = False
    totals = {"kills": 0, "lost": 0, "repeated": 0}
    try:
        for n in range(args.trials):
            scenarios = args.scenarios.split(",")
            scenario = scenarios[n % len(scenarios)]
            started = time.time()
            kills, lost, repeated, problems = trial(args, n, scenario, rng, os.path.join(work, f"t{n}"))
            totals["kills"] += kills
            totals["lost"] += lost
            totals["repeated"] += repeated
            bad = lost or repeated or problems
            failed = failed or bool(bad)
            print(f"trial {n + 1:2d} {scenario:17s} kills {kills}  lost {lost}  repeated {repeated}  "
                  f"{'FAIL: ' + '; '.join(problems) if problems else 'ok'}  ({time.time() - started:.0f} s)", flush=True)
        print(f"crash matrix{' (default config)' if args.default_config else ''}: {args.trials} trials, {totals['kills']} SIGKILLs, lost {totals['lost']}, "
              f"repeated {totals['repeated']}: {'FAIL' if failed else 'PASS'}", flush=True)
        for case in [c for c in args.cases.split(",") if c]:
            started = time.time()
            fn = {"pg-restart": case_pg_restart, "disk-full": case_disk_full, "disk-full-run": case_disk_full_run,
                  "concurrent": case_concurrent}[case]
            if case == "pg-restart" and not (args.pg_stop and args.pg_start):
                print("case pg-restart: skipped (no --pg-stop/--pg-start)")
                continue
            result = fn(args, os.path.join(work, case))
            if result is None:
                print(f"case {case}: skipped (cannot mount a file system here)")
                continue
            lost, repeated, problems = result[:3]
            note = result[3] if len(result) > 3 and result[3] else ""
            bad = lost or repeated or problems
            failed = failed or bool(bad)
            print(f"case {case:13s} lost {lost}  repeated {repeated}  "
                  f"{'FAIL: ' + '; '.join(problems) if problems else 'ok'}  ({time.time() - started:.0f} s)"
                  f"{'  ' + note if note else ''}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

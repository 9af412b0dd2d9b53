#!/usr/bin/env python3
"""Where a process's threads spend a stretch of time: on a core, or
runnable and waiting for one (the kernel's schedstat, per thread, summed by
thread name), with the host's processor time split the same stretch
(/proc/stat) and how long some task stalled on a core or on I/O
(/proc/pressure). Used by bench/scale.sh (BENCH_SCALE_WAITS=1) through a
baseline; threads that end inside the stretch count up to their last
reading (read every 0.2 s). The stretch ends after SECONDS, or as soon as
the file STOP (if given) exists.

    bench/thread_waits.py PID SECONDS OUT [STOP]
"""
import collections
import os
import sys
import time


def host_times():
    return [int(x) for x in open("/proc/stat").readline().split()[1:9]]


def stalled_us(kind):
    """Microseconds some task stalled on `kind` (cpu, io; pressure stall
    information), or None where the kernel has none."""
    try:
        for line in open(f"/proc/pressure/{kind}"):
            if line.startswith("some"):
                return int(line.split("total=")[1])
    except (FileNotFoundError, OSError, IndexError, ValueError):
        return None
    return None


def main():
    pid, seconds, out = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    stop = sys.argv[4] if len(sys.argv) > 4 else None
    start, t0 = host_times(), time.time()
    stall_start = {k: stalled_us(k) for k in ("cpu", "io")}
    last = {}  # tid -> (name, ns on a core, ns waiting for one)
    while time.time() < t0 + seconds and not (stop and os.path.exists(stop)):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except FileNotFoundError:
            break
        for tid in tids:
            try:
                name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
                on, waiting, _ = open(f"/proc/{pid}/task/{tid}/schedstat").read().split()
                last[tid] = (name, int(on), int(waiting))
            except (FileNotFoundError, ProcessLookupError, ValueError):
                pass
        time.sleep(0.2)
    spent = [b - a for a, b in zip(start, host_times())]
    wall = time.time() - t0
    stalls = []
    for k, v in stall_start.items():
        now = stalled_us(k)
        if v is not None and now is not None and wall > 0:
            stalls.append(f"some task stalled on {k} {100 * (now - v) / 1e6 / wall:.0f}% of the time")
    total = sum(spent) or 1
    labels = ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"]
    by_name = collections.defaultdict(lambda: [0, 0])
    for name, on, waiting in last.values():
        by_name[name][0] += on
        by_name[name][1] += waiting
    with open(out, "w") as f:
        f.write(f"over {wall:.0f} s, the host: " +
                ", ".join(f"{l} {100 * s / total:.1f}%" for l, s in zip(labels, spent)) + "\n")
        if stalls:
            f.write("  pressure: " + "; ".join(stalls) + "\n")
        for name, (on, waiting) in sorted(by_name.items(), key=lambda kv: -kv[1][0]):
            if on >= 1e9:
                f.write(f"  {name:<16} on a core {on / 1e9:6.1f} s, waiting for one {waiting / 1e9:6.1f} s\n")


if __name__ == "__main__":
    main()

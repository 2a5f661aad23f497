#!/usr/bin/env python3
"""Shared memory of a chorusrun job, sampled while it runs.

usage: 2026-11-27-shm-growth.py BUILD_DIR N [N ...]

For each N, runs `chorusrun -n N chorus-perf -t allreduce -b 8 -e 8 -n 20 -w 2` (a barrier and
8-byte all-reduces) and every 20 ms reads /proc/<pid>/maps of the job's ranks: the shared
mappings of /dev/shm files and memfds, counted once per file (device and inode), summed. The
peak over the run is the job's shared memory; other processes' shared memory does not count.
Prints one markdown row per N.
"""
import os
import subprocess
import sys
import time


def descendants(root):
    children = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(pid))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            found.append(child)
            todo.append(child)
    return found


def shared_files(pids):
    files = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as f:
                lines = f.readlines()
        except OSError:
            continue
        for line in lines:
            parts = line.split(None, 5)
            if len(parts) < 6 or not parts[1].endswith("s"):
                continue
            path = parts[5].strip()
            if not (path.startswith("/dev/shm/") or path.startswith("/memfd:")):
                continue
            start, end = (int(x, 16) for x in parts[0].split("-"))
            key = (parts[3], parts[4])
            files[key] = max(files.get(key, 0), end - start)
    return files


def measure(build, n):
    env = dict(os.environ)
    cmd = [f"{build}/tools/chorusrun/chorusrun", "-n", str(n), "--timeout", "300",
           f"{build}/tools/chorus-perf/chorus-perf", "-t", "allreduce", "-b", "8", "-e", "8",
           "-n", "20", "-w", "2"]
    start = time.time()
    job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    peak, segments = 0, 0
    while job.poll() is None:
        files = shared_files(descendants(job.pid))
        total = sum(files.values())
        if total > peak:
            peak, segments = total, len(files)
        time.sleep(0.02)
    out = job.stdout.read().decode()
    seconds = time.time() - start
    if job.returncode != 0:
        sys.exit(f"n={n}: chorusrun exited {job.returncode}\n{out}")
    return peak, segments, seconds


def main():
    build = sys.argv[1]
    print("| ranks | segments | job MiB | MiB per rank | wall s |")
    print("|---|---|---|---|---|")
    for n in (int(x) for x in sys.argv[2:]):
        peak, segments, seconds = measure(build, n)
        mib = peak / 2**20
        print(f"| {n} | {segments} | {mib:.1f} | {mib / n:.2f} | {seconds:.1f} |", flush=True)


if __name__ == "__main__":
    main()

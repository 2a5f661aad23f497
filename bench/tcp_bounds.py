#!/usr/bin/env python3
"""The loopback TCP ceiling on this machine, and what it implies for each TCP collective cell.

    python3 bench/tcp_bounds.py                         # ceiling table only
    python3 bench/tcp_bounds.py --json RESULT.json      # + per-cell bound beside Gloo and Chorus

Builds bench/tcp_ceiling.cpp (g++) into --build (default build-bench/), runs it for every shape
(pairs, ring, all, fanin, fanout at 1..4 streams) and every --bytes per connection, sweeping
--writes and --bufs and keeping the best median per (shape, bytes), and prints the aggregate
GB/s (--save/--load keep it in a JSON file). The tool reuses one small user buffer, so the data
is cache-hot: the ceiling is optimistic and the bounds below are on the safe side. With --json (a bench/compare.py --json file, run
with --transport tcp) it prints, per cell of --min MiB and above:

    bytes  = what the collective must move over TCP in total, summed over all connections
             (n ranks, S = the nccl-tests size): allreduce 2(n-1)S, broadcast/allgather/
             reducescatter/alltoall (n-1)S, reduce (n-1)S (a pipelined chain), gather and
             scatter (n-1)S/n;
    bound  = bytes / ceiling, the ceiling being the best aggregate of any shape with at most n
             processes (an algorithm may also move one stream at a time), or for gather and
             scatter the best of fanin/fanout (the root takes or gives every byte);
    reach  = "no" when bound > Gloo/2: no TCP implementation can be 2x Gloo there (--assume G:
             the same at a ceiling of G GB/s, e.g. the best ever seen here);
    GB/s   = bytes / time: the aggregate TCP rate Gloo and Chorus reached in that cell.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHAPES = [("pairs", 1), ("pairs", 2), ("pairs", 3), ("pairs", 4), ("ring", 2), ("ring", 3),
          ("ring", 4), ("all", 3), ("all", 4), ("fanin", 1), ("fanin", 3), ("fanout", 3)]


def processes(shape, n):
    return {"pairs": 2 * n, "ring": n, "all": n}.get(shape, n + 1)


def build(out):
    out.mkdir(parents=True, exist_ok=True)
    exe = out / "tcp_ceiling"
    src = ROOT / "bench" / "tcp_ceiling.cpp"
    if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
        subprocess.run(["g++", "-std=c++20", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(exe),
                        str(src)], check=True)
    return exe


def run(exe, shape, n, a, size, write, buf):
    """Median aggregate GB/s of one tcp_ceiling run (its own process group, killed on timeout)."""
    proc = subprocess.Popen([str(exe), "--shape", shape, "--procs", str(n), "--bytes", size,
                             "--write", write, "--buf", buf, "--repeat", str(a.repeat)],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    if proc.returncode != 0:
        raise RuntimeError(f"tcp_ceiling {shape} {n} failed ({proc.returncode})")
    return float(out.split("aggregate ")[-1].split()[0])


def parse_size(text):
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    return int(float(text.rstrip("KMGkmg")) * scale)


def ceilings(exe, a):
    """{(shape, n, bytes per connection): (best median aggregate GB/s, write, buf)}; the rounds
    are interleaved over every configuration."""
    samples = {}
    for _ in range(a.rounds):
        for size in a.bytes.split(","):
            for shape, n in SHAPES:
                for write in a.writes.split(","):
                    for buf in a.bufs.split(","):
                        samples.setdefault((shape, n, parse_size(size), write, buf), []).append(
                            run(exe, shape, n, a, size, write, buf))
    best = {}
    for (shape, n, size, write, buf), values in samples.items():
        gbs = statistics.median(values)
        if gbs > best.get((shape, n, size), (0,))[0]:
            best[(shape, n, size)] = (gbs, write, buf)
    return best


def must_move(coll, n, size):
    if coll == "allreduce":
        return 2 * (n - 1) * size
    if coll in ("gather", "scatter"):
        return (n - 1) * size / n
    return (n - 1) * size


def ceiling_for(coll, n, size, best):
    """The best aggregate of the shapes such a cell can use, measured with the per-connection
    size nearest to one rank's share (S/n, or S for broadcast and reduce). Gather and scatter:
    the root takes or gives every byte (fanin/fanout, or one stream)."""
    share = size if coll in ("broadcast", "reduce") else size // n
    sizes = sorted({k[2] for k in best})
    nearest = min(sizes, key=lambda b: abs(b - share))
    root_shape = {"gather": "fanin", "scatter": "fanout"}.get(coll)
    if root_shape:
        return max(v[0] for (s, k, b), v in best.items() if b == nearest and
                   ((s == root_shape and k <= n - 1) or (s, k) == ("pairs", 1)))
    return max(v[0] for (s, k, b), v in best.items() if b == nearest and processes(s, k) <= n)


def cell_table(path, best, min_mib, assume):
    with open(path) as f:
        data = json.load(f)
    cells = {}
    for c in data["cells"]:
        if c["seconds"]:
            cells.setdefault((c["collective"], c["ranks"], c["size"]), {})[c["peer"]] = c["seconds"]
    extra = f" bound at {assume} GB/s ms | 2x reachable at {assume} |" if assume else ""
    print("\n| collective | ranks | size | TCP bytes | ceiling GB/s | bound ms | Gloo ms | "
          "Chorus ms | Gloo GB/s | Chorus GB/s | Gloo/2 ms | 2x reachable |" + extra)
    print("|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if assume else ""))
    for (coll, n, size), v in sorted(cells.items()):
        if size < min_mib << 20 or "gloo" not in v or "chorus" not in v:
            continue
        moved = must_move(coll, n, size)
        ceiling = ceiling_for(coll, n, size, best)
        bound = moved / (ceiling * 1e9) * 1e3
        gloo, chorus = v["gloo"] * 1e3, v["chorus"] * 1e3
        row = (f"| {coll} | {n} | {size >> 20} MiB | {moved / 2**20:.1f} MiB | {ceiling:.2f} | "
               f"{bound:.2f} | {gloo:.2f} | {chorus:.2f} | {moved / gloo / 1e6:.2f} | "
               f"{moved / chorus / 1e6:.2f} | {gloo / 2:.2f} | "
               f"{'no' if bound > gloo / 2 else 'yes'} |")
        if assume:
            best_bound = moved / (assume * 1e9) * 1e3
            row += f" {best_bound:.2f} | {'no' if best_bound > gloo / 2 else 'yes'} |"
        print(row)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--json", help="bench/compare.py --json result (run with --transport tcp)")
    p.add_argument("--build", default=str(ROOT / "build-bench"))
    p.add_argument("--bytes", default="512K,4M,32M",
                   help="bytes per connection, a list (each cell uses the nearest)")
    p.add_argument("--writes", default="64K,256K,4M", help="write sizes to try")
    p.add_argument("--bufs", default="0,4M", help="SO_SNDBUF/SO_RCVBUF to try (0: autotuning)")
    p.add_argument("--repeat", type=int, default=5, help="repeats inside one run")
    p.add_argument("--rounds", type=int, default=3, help="runs per configuration (median)")
    p.add_argument("--min", type=int, default=1, help="smallest cell size in MiB")
    p.add_argument("--assume", type=float, default=None,
                   help="also give each bound at this ceiling (GB/s), e.g. the best ever seen")
    p.add_argument("--skip-ceiling", action="store_true",
                   help="no measurement: every ceiling is --assume")
    p.add_argument("--save", help="write the measured ceilings to this JSON file")
    p.add_argument("--load", action="append", default=[],
                   help="ceilings from an earlier --save instead of measuring (repeatable: the "
                        "best of the files per shape)")
    a = p.parse_args()
    if a.skip_ceiling:
        best = {(shape, n, parse_size(b)): (a.assume, "-", "-") for shape, n in SHAPES
                for b in a.bytes.split(",")}
    elif a.load:
        best = {}
        for path in a.load:
            with open(path) as f:
                for row in json.load(f):
                    key = (row["shape"], row["n"], row["bytes"])
                    if row["gbs"] > best.get(key, (0,))[0]:
                        best[key] = (row["gbs"], row["write"], row["buf"])
    else:
        best = ceilings(build(Path(a.build)), a)
    if a.save:
        with open(a.save, "w") as f:
            json.dump([{"shape": s, "n": n, "bytes": b, "gbs": v[0], "write": v[1], "buf": v[2]}
                       for (s, n, b), v in sorted(best.items())], f, indent=1)
    print("| shape | streams | processes | bytes per stream | aggregate GB/s (median of rounds, "
          "best config) | write | buf |")
    print("|---|---|---|---|---|---|---|")
    for (shape, n, size), (gbs, write, buf) in sorted(best.items()):
        streams = n * (n - 1) if shape == "all" else n
        print(f"| {shape} | {streams} | {processes(shape, n)} | {size >> 10} KiB | {gbs:.2f} | "
              f"{write} | {buf} |")
    if a.json:
        cell_table(a.json, best, a.min, a.assume)
    sys.stdout.flush()


if __name__ == "__main__":
    main()

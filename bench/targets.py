#!/usr/bin/env python3
"""Checks issue 3's speed targets against bench/compare.py results (its --json files, or the
Markdown reports it writes to bench/results/, whose tables hold the same medians).

    bench/targets.sh            # runs the six measurements, then this script
    python3 bench/targets.py shm.json tiny.json small.json tcp.json eight.json eight-tiny.json > targets.md
    python3 bench/targets.py bench/results/<shm>.md ... > targets.md

Each JSON holds median times per (collective, ranks, peer, size) and the transport Chorus ran
on; where two files hold the same cell, the later one's stands (a re-measurement with more
iterations). A target is met when the ratio it names holds in every cell it covers; the report lists
every cell, so a miss says where and by how much. Ratios are peer time / Chorus time, which
for busbw targets is the same ratio (busbw = size / time x a factor common to both).
"""
import json
import re
import sys

ONE_MIB = 1 << 20


def report_cells(path):
    """compare.py --json's shape, read back from the tables of its Markdown report."""
    with open(path) as f:
        text = f.read()
    command = re.search(r"^Command: `([^`]*)`", text, re.M)
    tcp = command is not None and "--transport tcp" in command.group(1)
    cells, coll, ranks, header = [], None, None, None
    for line in text.splitlines():
        heading = re.match(r"### (\w+), (\d+) ranks", line)
        if heading:
            coll, ranks, header = heading.group(1), int(heading.group(2)), None
        elif line.startswith("| size"):
            header = [h.strip() for h in line.strip().strip("|").split("|")]
        elif header and line.startswith("| ") and line.split("|")[1].strip().isdigit():
            row = dict(zip(header, (v.strip() for v in line.strip().strip("|").split("|"))))
            for key, value in row.items():
                peer = re.match(r"(\w+) time \(us\)$", key)
                if peer:
                    seconds = float(value) * 1e-6 if re.match(r"^[\d.]+$", value) else None
                    cells.append({"collective": coll, "ranks": ranks, "peer": peer.group(1),
                                  "size": int(row["size (B)"]), "seconds": seconds})
    return {"transport": "tcp" if tcp else "auto", "cells": cells}


def load(paths):
    """{(transport, collective, ranks, peer, size): seconds}"""
    cells = {}
    for path in paths:
        if path.endswith(".md"):
            data = report_cells(path)
        else:
            with open(path) as f:
                data = json.load(f)
        transport = "tcp" if data["transport"] == "tcp" else "shm"
        for c in data["cells"]:
            if c["seconds"] is not None and c["size"] > 0:
                cells[(transport, c["collective"], c["ranks"], c["peer"], c["size"])] = c["seconds"]
    return cells


def ratios(cells, transport, collectives, ranks, peer, sizes):
    """[(collective, ranks, size, peer/chorus)] over the cells that exist for both."""
    out = []
    for (t, coll, n, p, size), chorus in sorted(cells.items()):
        if t != transport or p != "chorus" or coll not in collectives or n not in ranks:
            continue
        if not sizes(size):
            continue
        other = cells.get((t, coll, n, peer, size))
        if other is not None and chorus > 0:
            out.append((coll, n, size, other / chorus))
    return out


def fmt_size(size):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def check(title, rows, need):
    """One target: met when every ratio >= need. Returns (markdown lines, met)."""
    if not rows:
        return [f"### {title}: no data", ""], False
    misses = [r for r in rows if r[3] < need]
    worst = min(rows, key=lambda r: r[3])
    verdict = "met" if not misses else f"NOT met in {len(misses)} of {len(rows)} cells"
    lines = [f"### {title}: {verdict} (worst {worst[3]:.2f}x: {worst[0]} {worst[1]} ranks "
             f"{fmt_size(worst[2])})", "", "| collective | ranks | size | ratio | |",
             "|---|--:|--:|--:|---|"]
    for coll, n, size, ratio in rows:
        lines.append(f"| {coll} | {n} | {fmt_size(size)} | {ratio:.2f} | "
                     f"{'ok' if ratio >= need else f'short by {(need / ratio - 1) * 100:.0f}%'} |")
    return lines + [""], not misses


def main(paths):
    cells = load(paths)
    others = ["broadcast", "reduce", "allgather", "reducescatter", "alltoall", "gather", "scatter"]
    everything = ["allreduce"] + others
    two_four = {2, 4}
    targets = [
        ("all-reduce 8 B: no slower than Open MPI", 1.0,
         ratios(cells, "shm", {"allreduce"}, two_four, "ompi", lambda s: s == 8)),
        ("all-reduce 1 MiB: busbw >= 2x Open MPI", 2.0,
         ratios(cells, "shm", {"allreduce"}, two_four, "ompi", lambda s: s == ONE_MIB)),
        ("all-reduce 64 MiB: busbw >= 3x Open MPI", 3.0,
         ratios(cells, "shm", {"allreduce"}, two_four, "ompi", lambda s: s == 64 * ONE_MIB)),
        ("all-reduce up to 1 MiB: >= 10x Gloo", 10.0,
         ratios(cells, "shm", {"allreduce"}, two_four, "gloo", lambda s: s <= ONE_MIB)),
        ("every other collective: at least Open MPI's speed at every size", 1.0,
         ratios(cells, "shm", set(others), two_four, "ompi", lambda s: True)),
        ("reduce-scatter 16 MiB: >= 4x Open MPI", 4.0,
         ratios(cells, "shm", {"reducescatter"}, two_four, "ompi", lambda s: s == 16 * ONE_MIB)),
        ("TCP only: busbw >= 2x Gloo at 1 MiB and above", 2.0,
         ratios(cells, "tcp", set(everything), two_four, "gloo", lambda s: s >= ONE_MIB)),
        ("8 ranks on 2 cores: no collective slower than Open MPI", 1.0,
         ratios(cells, "shm", set(everything), {8}, "ompi", lambda s: True)),
    ]
    lines = ["# Issue 3 targets", "", "Inputs: " + ", ".join(f"`{p}`" for p in paths), ""]
    summary = []
    for title, need, rows in targets:
        block, met = check(title, rows, need)
        lines += block
        summary.append(f"- {'met' if met else 'NOT met'}: {title}")
    print("\n".join(lines[:4] + ["## Summary", ""] + summary + [""] + lines[4:]))
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1:]))

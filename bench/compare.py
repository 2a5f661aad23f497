#!/usr/bin/env python3
"""Side-by-side benchmark of Chorus against Open MPI and Gloo (see bench/README.md).

Builds the peer benchmarks (bench/peers/*), runs chorus-perf, mpi_collectives and
gloo_collectives on the same collectives, sizes and rank counts, repeats every run
R times (interleaving the peers so that machine noise spreads over all of them),
takes medians and prints one table per (collective, ranks). Also writes the tables
to bench/results/<date>.md and one busbw-vs-size SVG chart per collective.

Standard library only.
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import sys

import charts
import runners

ROOT = pathlib.Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
ALL_COLLECTIVES = ["allreduce", "broadcast", "reduce", "allgather", "reducescatter",
                   "alltoall", "gather", "scatter"]
PEERS = ["chorus", "ompi", "gloo"]
# Asked for by name only: chorus-perf's uneven alltoallv against MPI_Alltoallv with the same
# counts (Gloo has no alltoallv: --peers chorus,ompi).
EXTRA_COLLECTIVES = ["alltoallv"]


def parse_size(text):
    """'64M' -> 64 * 2**20 (K/M/G suffixes as in chorus-perf)."""
    shifts = {"k": 10, "m": 20, "g": 30}
    suffix = text[-1:].lower()
    if suffix in shifts:
        return int(text[:-1]) << shifts[suffix]
    return int(text)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", default="2,4", help="comma list of rank counts (default 2,4)")
    p.add_argument("--collectives", default=",".join(ALL_COLLECTIVES),
                   help="comma list, or 'all' (default all: " + ",".join(ALL_COLLECTIVES) + ")")
    p.add_argument("--peers", default=",".join(PEERS), help="comma list of chorus,ompi,gloo")
    p.add_argument("--min", default="8", help="smallest size in bytes (default 8)")
    p.add_argument("--max", default="64M", help="largest size in bytes (default 64M)")
    p.add_argument("--factor", type=float, default=8, help="size step factor (default 8)")
    p.add_argument("--repeat", type=int, default=5, help="runs per cell, median taken (default 5)")
    p.add_argument("--iters", type=int, default=20, help="timed iterations per size (default 20)")
    p.add_argument("--warmup", type=int, default=5, help="warm-up iterations (default 5)")
    p.add_argument("--big", default="4M",
                   help="sizes >= this use --big-iters/--big-warmup (default 4M)")
    p.add_argument("--big-iters", type=int, default=5)
    p.add_argument("--big-warmup", type=int, default=1)
    p.add_argument("--transport", choices=["default", "tcp", "shm"], default="default",
                   help="CHORUS_TRANSPORT for Chorus (default: Chorus chooses)")
    p.add_argument("--chorus-build", default=str(ROOT / "build"),
                   help="Chorus build dir with tools/chorusrun and tools/chorus-perf; "
                        "built with scripts/build.sh when missing (default build/)")
    p.add_argument("--peer-build", default=str(ROOT / "build-bench" / "peers"),
                   help="where the peer benchmarks are compiled (default build-bench/peers)")
    p.add_argument("--out", default=str(BENCH / "results"), help="results directory")
    p.add_argument("--charts", default=str(ROOT / "build" / "charts"),
                   help="where the busbw charts are drawn (default build/charts; '' for none); "
                        "they are not results: bench/charts.py redraws them from a report")
    p.add_argument("--json", default=None,
                   help="also write every median cell as JSON here (input of bench/targets.py)")
    p.add_argument("--timeout", type=float, default=600, help="seconds per run (default 600)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: ranks 2, max 1M, repeat 3, iters 10")
    a = p.parse_args(argv)
    if a.quick:
        a.ranks, a.max, a.repeat, a.iters, a.warmup = "2", "1M", 3, 10, 2
    if a.collectives == "all":
        a.collectives = ",".join(ALL_COLLECTIVES)
    a.ranks = [int(r) for r in a.ranks.split(",")]
    a.collectives = a.collectives.split(",")
    a.peers = a.peers.split(",")
    for name in a.collectives:
        if name not in ALL_COLLECTIVES + EXTRA_COLLECTIVES:
            p.error(f"unknown collective {name!r}")
        if name in EXTRA_COLLECTIVES and "gloo" in a.peers:
            p.error(f"{name} has no Gloo peer: use --peers chorus,ompi")
    for name in a.peers:
        if name not in PEERS:
            p.error(f"unknown peer {name!r}")
    if a.repeat < 1 or a.iters < 1 or a.factor <= 1 or min(a.ranks) < 2:
        p.error("--repeat and --iters must be >= 1, --factor > 1, --ranks >= 2")
    a.min, a.max, a.big = parse_size(a.min), parse_size(a.max), parse_size(a.big)
    return a


def size_ranges(a):
    """The sizes as (first, last, iters, warmup) runs. Sizes follow chorus-perf's
    ceil(size * factor) sequence from --min, plus --max itself when the sequence
    steps over it. Sequence sizes below --big run in one invocation with --iters;
    every other size runs alone (--big-iters from --big on), so --max need not be
    on the sequence."""
    sequence, size = [], a.min
    while size <= a.max:
        sequence.append(size)
        size = max(size + 1, int(-(-size * a.factor // 1)))
    small = [s for s in sequence if s < a.big]
    alone = [s for s in sequence if s >= a.big]
    if sequence[-1] != a.max:
        alone.append(a.max)
    ranges = [(small[0], small[-1], a.iters, a.warmup)] if small else []
    for s in alone:
        big = s >= a.big
        ranges.append((s, s, a.big_iters if big else a.iters, a.big_warmup if big else a.warmup))
    return ranges


def median(values):
    v = sorted(values)
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def collect(a, peers):
    """Runs everything; returns {(collective, ranks, peer): {size: [seconds...]}}
    and {(collective, ranks, size): algorithm Chorus chose} and a list of failures."""
    samples, algorithms, failures = {}, {}, []
    ranges = size_ranges(a)
    for n in a.ranks:
        for coll in a.collectives:
            for rep in range(a.repeat):
                order = peers[rep % len(peers):] + peers[:rep % len(peers)]
                for peer in order:
                    for first, last, iters, warmup in ranges:
                        label = f"{peer.name} {coll} n={n} {first}..{last} run {rep + 1}/{a.repeat}"
                        print(f"# running {label}", file=sys.stderr, flush=True)
                        try:
                            rows = peer.run(coll, n, first, last, a.factor, iters, warmup)
                        except runners.RunError as error:
                            failures.append(f"{label}: {error}")
                            print(f"# FAILED {label}: {error}", file=sys.stderr, flush=True)
                            continue
                        cell = samples.setdefault((coll, n, peer.name), {})
                        for size, seconds, algorithm in rows:
                            cell.setdefault(size, []).append(seconds)
                            if algorithm:
                                algorithms[(coll, n, size)] = algorithm
    return samples, algorithms, failures


def fmt_time(seconds):
    return "-" if seconds is None else f"{seconds * 1e6:.2f}"


def fmt_bw(bw):
    return "-" if bw is None else f"{bw:.3f}"


def fmt_ratio(peer_time, chorus_time):
    if peer_time is None or chorus_time is None or chorus_time <= 0:
        return "-"
    return f"{peer_time / chorus_time:.2f}"


def table(coll, n, medians, peer_names, algorithms):
    """Markdown table of one (collective, ranks): medians[peer][size] = seconds."""
    sizes = sorted({s for peer in peer_names for s in medians.get(peer, {})})
    heads = ["size (B)"]
    for peer in peer_names:
        heads += [f"{peer} time (us)", f"{peer} busbw (GB/s)"]
    others = [p for p in peer_names if p != "chorus"]
    if "chorus" in peer_names:
        heads += [f"chorus/{p}" for p in others] + ["chorus algorithm"]
    lines = [f"### {coll}, {n} ranks", "", "| " + " | ".join(heads) + " |",
             "|" + "---:|" * len(heads)]
    for size in sizes:
        cells = [str(size)]
        for peer in peer_names:
            t = medians.get(peer, {}).get(size)
            cells += [fmt_time(t), fmt_bw(runners.busbw(coll, n, size, t))]
        if "chorus" in peer_names:
            ct = medians.get("chorus", {}).get(size)
            cells += [fmt_ratio(medians.get(p, {}).get(size), ct) for p in others]
            cells.append(algorithms.get((coll, n, size), "-"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def load_text():
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def header(a, argv, peers, load_before):
    now = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    lines = [f"# Chorus vs peers, {now}", "",
             "Command: `python3 bench/compare.py " + " ".join(argv) + "`", "",
             f"Machine: {platform.node()}, {os.cpu_count()} cores, {platform.platform()}; "
             f"load average (1/5/15 min) {load_before} before, {load_text()} after "
             "(anything else running on the machine shows up in the numbers)", "",
             f"Sizes {a.min}..{a.max} x{a.factor:g}; {a.iters} timed iterations after "
             f"{a.warmup} warm-up ({a.big_iters}/{a.big_warmup} from {a.big} B); median of "
             f"{a.repeat} runs; fp32 sum, root 0, out of place.", "",
             "time = mean per iteration, max over ranks (median over runs); busbw as "
             "nccl-tests; chorus/peer = peer time / Chorus time (> 1: Chorus is faster).", ""]
    for peer in peers:
        lines.append(f"- {peer.name}: {peer.describe()}")
    lines.append("")
    return lines


def write_json(a, path, samples, algorithms, report):
    """Every (collective, ranks, peer, size) median, with the transport Chorus used."""
    cells = []
    for (coll, n, peer), by_size in sorted(samples.items()):
        for size, values in sorted(by_size.items()):
            cells.append({"collective": coll, "ranks": n, "peer": peer, "size": size,
                          "seconds": median(values), "runs": len(values),
                          "algorithm": algorithms.get((coll, n, size)) if peer == "chorus" else None})
    path.write_text(json.dumps({"transport": a.transport, "report": str(report),
                                "load_after": load_text(), "cells": cells}, indent=1) + "\n")


def main(argv):
    a = parse_args(argv)
    peer_build = pathlib.Path(a.peer_build)
    peers = runners.make_peers(a, ROOT, peer_build)
    load_before = load_text()
    samples, algorithms, failures = collect(a, peers)
    out_lines = header(a, argv, peers, load_before)
    peer_names = [p.name for p in peers]
    for coll in a.collectives:
        for n in a.ranks:
            medians = {p: {s: median(v) for s, v in samples.get((coll, n, p), {}).items()}
                       for p in peer_names}
            text = table(coll, n, medians, peer_names, algorithms)
            print(text + "\n", flush=True)
            out_lines += [text, ""]
    if failures:
        out_lines += ["## Failed runs", ""] + [f"- {f}" for f in failures] + [""]
        print("\n".join(["# failed runs:"] + failures), file=sys.stderr)
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H%M%S")
    report = out / f"{stamp}.md"
    shown = report.relative_to(ROOT) if report.is_relative_to(ROOT) else report
    report.write_text("\n".join(out_lines + [
        f"Charts: `python3 bench/charts.py {shown}` (busbw against size, drawn from these tables)."
    ]) + "\n")
    if a.json:
        write_json(a, pathlib.Path(a.json), samples, algorithms, report)
    charts_written = charts.write_charts(report, a.charts) if a.charts else []
    print(f"# wrote {report} and {len(charts_written)} charts in {a.charts}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

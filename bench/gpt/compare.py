#!/usr/bin/python3
"""The GPT model's layouts side by side: tokens/s, activation bytes per layer, ledger bytes.

Runs bench/gpt/gpt_bench (built with the training layer) for each layout with the same
global batch: the one-process run with --threads torch threads, then tp=1 (dp = ranks),
tp=ranks, tp=ranks with sequence parallelism, cp=ranks (Ulysses), under chorusrun with one torch thread per rank.
The layouts run one after the other, --repeats times, in rotated order; the report gives
each layout's median tokens/s over the repeats with its range, and its median ratio to the
one-process run of the same repeat.

Activation bytes per layer are measured with a counting CPU allocator and set beside the
formula (activation_formula below; docs/parallel.md derives it). They do not depend on the
machine's load, and the run fails when one is more than 10% from the formula.

    bench/gpt/compare.py --build build --ranks 2 --hidden 512 --repeats 5 --out report.md
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from openblas_env import openblas_env  # noqa: E402
sys.path.insert(0, HERE)
from activation_memory import activation_formula  # noqa: E402

LINE = re.compile(r"^gpt_bench (.*)$", re.M)


def run(cmd, env, timeout):
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{out.stdout}\n{out.stderr}")
    m = LINE.search(out.stdout)
    if not m:
        raise SystemExit(f"no result line from {' '.join(cmd)}:\n{out.stdout}")
    return dict(kv.split("=") for kv in m.group(1).split())


def layouts(ranks):
    """(name, ranks, tp, cp, sp): the one-process run first."""
    return [("one process", 1, 1, 1, False), (f"tp=1 (dp={ranks})", ranks, 1, 1, False),
            (f"tp={ranks}", ranks, ranks, 1, False), (f"tp={ranks}+SP", ranks, ranks, 1, True),
            (f"cp={ranks}", ranks, 1, ranks, False)]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default="build")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=8, help="global batch (samples per step)")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=2, help="torch threads of the one-process run")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--timeout", type=int, default=900)
    p.add_argument("--out", help="write the markdown report here too")
    o = p.parse_args()
    bench = os.path.join(o.build, "bench/gpt/gpt_bench")
    chorusrun = os.path.join(o.build, "tools/chorusrun/chorusrun")
    env = dict(os.environ, **openblas_env())
    results = {name: [] for name, *_ in layouts(o.ranks)}
    ratios = {name: [] for name, *_ in layouts(o.ranks)}
    rows = {}
    for repeat in range(o.repeats):
        order = layouts(o.ranks)
        order = order[repeat % len(order):] + order[:repeat % len(order)]
        this = {}
        for name, ranks, tp, cp, sp in order:
            dp = ranks // (tp * cp)
            args = [bench, "--tp", str(tp), "--cp", str(cp), "--layers", str(o.layers), "--hidden", str(o.hidden),
                    "--heads", str(o.heads), "--seq", str(o.seq), "--batch", str(o.batch // dp),
                    "--steps", str(o.steps), "--warmup", str(o.warmup)]
            if sp:
                args.append("--sequence-parallel")
            if ranks == 1:
                cmd = args + ["--threads", str(o.threads)]
            else:
                cmd = [chorusrun, "-n", str(ranks)] + args + ["--threads", "1"]
            r = run(cmd, env, o.timeout)
            rows[name] = r
            this[name] = float(r["tokens_per_s"])
            results[name].append(this[name])
        for name in this:
            ratios[name].append(this[name] / this["one process"])
        print(f"repeat {repeat + 1}: " + ", ".join(f"{n} {v:.0f}" for n, v in this.items()),
              file=sys.stderr)
    lines = [f"# GPT layouts at {o.ranks} ranks: layers {o.layers}, hidden {o.hidden}, "
             f"heads {o.heads}, seq {o.seq}, global batch {o.batch}", "",
             "Command: `bench/gpt/compare.py " + " ".join(sys.argv[1:]) + "`", "",
             f"One process with {o.threads} torch threads against {o.ranks} ranks of one thread "
             f"each; {o.repeats} repeats in rotated order, {o.steps} timed steps after "
             f"{o.warmup} warm-up steps each; medians over repeats (range).", "",
             "| layout | tokens/s | vs one process | activation bytes/layer | formula | "
             "ledger bytes/step (rank 0) | calls |",
             "|---|--:|--:|--:|--:|--:|--:|"]
    failures = []
    for name, ranks, tp, cp, sp in layouts(o.ranks):
        r = rows[name]
        dp = ranks // (tp * cp)
        measured = int(r["activation_bytes_per_layer"])
        formula = activation_formula(o.seq, o.batch // dp, o.hidden, o.heads, tp, sp, cp)
        if abs(measured - formula) > 0.10 * formula:
            failures.append(f"{name}: {measured} activation bytes per layer, formula {formula}")
        v = results[name]
        q = ratios[name]
        lines.append(f"| {name} | {statistics.median(v):.0f} ({min(v):.0f}-{max(v):.0f}) | "
                     f"{statistics.median(q):.2f} ({min(q):.2f}-{max(q):.2f}) | {measured} | "
                     f"{formula} | {r['ledger_bytes_per_step']} | {r['ledger_calls_per_step']} |")
    report = "\n".join(lines) + "\n"
    print(report)
    if o.out:
        with open(o.out, "w") as f:
            f.write(report)
    if failures:
        raise SystemExit("activation bytes off the formula by more than 10%:\n" +
                         "\n".join(failures))


if __name__ == "__main__":
    main()

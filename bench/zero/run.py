#!/usr/bin/env python3
"""bench/zero/run.py BUILD_DIR [options]: the ZeRO benchmark of bench/results/*-zero.md.

Runs zero_bench (fp32 Adam, the GPT model) under chorusrun and prints a markdown report:

1. memory per rank at 2 and 4 ranks for DDP and ZeRO-1/2/3 (--private-buckets, so that the
   counting allocator sees every byte): parameters, gradients and optimizer state beside
   PARALLEL.md section 3's formula, the allocator's bytes held and its peak over a step;
2. step time at 2 ranks, each ZeRO stage against DDP in --pairs (9) alternated pairs (the
   order inside a pair alternates too), the median of the per-pair ratios (with 5, one or two
   pairs disturbed by a preemption moved the median by 10%);
3. the largest GPT (in layers, then parameters) each strategy trains within --budget-mib per
   rank at --budget-ranks ranks (default 4): the peak measured at 2 and 4 layers, extrapolated
   linearly, then checked with zero_bench --budget-mib (the largest that runs, the next that
   fails).

Every command run is listed at the end of the report with the load average around it.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

STRATEGIES = ["ddp", "zero1", "zero2", "zero3"]
MEMORY_MODEL = ["--layers", "4", "--hidden", "256", "--heads", "4", "--seq", "32",
                "--batch", "2", "--steps", "2", "--warmup", "1", "--private-buckets"]
SPEED_MODEL = ["--layers", "4", "--hidden", "256", "--heads", "4", "--seq", "64",
               "--batch", "4", "--steps", "6", "--warmup", "1"]
BUDGET_MODEL = ["--hidden", "256", "--heads", "4", "--seq", "16", "--batch", "1",
                "--steps", "2", "--warmup", "1", "--private-buckets"]
MIB = 1 << 20


class Runner:
    def __init__(self, build):
        self.chorusrun = os.path.join(build, "tools", "chorusrun", "chorusrun")
        self.bench = os.path.join(build, "bench", "zero", "zero_bench")
        self.log = []  # (command, seconds, load before, load after, outcome)

    def run(self, ranks, args):
        """zero_bench's fields as a dict, or None when a rank went over the budget."""
        command = ["timeout", "900", self.chorusrun, "-n", str(ranks), self.bench] + args
        load = os.getloadavg()[0]
        start = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True)
        seconds = time.monotonic() - start
        over = "over the budget" in done.stderr
        self.log.append((" ".join(command[2:]), seconds, load, os.getloadavg()[0],
                         "over budget" if over else ("ok" if done.returncode == 0 else "failed")))
        if over:
            return None
        if done.returncode != 0:
            sys.exit("run.py: {} failed ({}):\n{}".format(" ".join(command), done.returncode,
                                                          done.stderr[-3000:]))
        line = next(l for l in done.stdout.splitlines() if l.startswith("zero_bench "))
        return dict(re.findall(r"(\w+)=(\S+)", line))


def mb(value):
    return "{:.2f}".format(float(value) / MIB)


def memory_section(runner):
    rows = ["| d | strategy | Ψ | params MiB | grads MiB | optimizer MiB | sum MiB | formula MiB"
            " | sum / formula | allocator held MiB | held / formula | step peak MiB | build peak"
            " MiB | ZeRO-3 gathered peak MiB |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for d in (2, 4):
        for s in STRATEGIES:
            f = runner.run(d, ["--strategy", s] + MEMORY_MODEL)
            total = sum(int(f[k]) for k in ("param_bytes", "grad_bytes", "optimizer_bytes"))
            formula = int(f["formula_bytes"])
            rows.append("| {} | {} | {} | {} | {} | {} | {} | {} | {:.3f} | {} | {:.3f} | {} | {} |"
                        " {} |".format(d, s, f["params"], mb(f["param_bytes"]),
                                       mb(f["grad_bytes"]), mb(f["optimizer_bytes"]), mb(total),
                                       mb(formula), total / formula, mb(f["held_bytes"]),
                                       int(f["held_bytes"]) / formula, mb(f["peak_bytes"]),
                                       mb(f["build_peak_bytes"]),
                                       mb(f["gathered_peak_bytes"]) if s == "zero3" else "-"))
    return rows


def speed_section(runner, pairs):
    rows = ["| stage | DDP ms (per pair) | ZeRO ms (per pair) | ratios | median ratio |",
            "|---|---|---|---|---|"]
    for s in ("zero1", "zero2", "zero3"):
        ddp, zero = [], []
        for p in range(pairs):
            order = ["ddp", s] if p % 2 == 0 else [s, "ddp"]
            for strategy in order:
                ms = float(runner.run(2, ["--strategy", strategy] + SPEED_MODEL)["step_ms_median"])
                (ddp if strategy == "ddp" else zero).append(ms)
        ratios = [z / d for z, d in zip(zero, ddp)]
        rows.append("| {} | {} | {} | {} | **{:.3f}** |".format(
            s, " ".join("{:.1f}".format(x) for x in ddp),
            " ".join("{:.1f}".format(x) for x in zero),
            " ".join("{:.3f}".format(x) for x in ratios), statistics.median(ratios)))
    return rows


def fits(runner, d, strategy, layers, budget):
    args = ["--strategy", strategy, "--layers", str(layers), "--budget-mib", str(budget)]
    return runner.run(d, args + BUDGET_MODEL)


def largest(runner, d, strategy, budget):
    """(predicted layers, largest layers that ran, its fields, the fields at 2 and 4 layers)."""
    small, large = (runner.run(d, ["--strategy", strategy, "--layers", str(n)] + BUDGET_MODEL)
                    for n in (2, 4))
    per_layer = (int(large["peak_bytes"]) - int(small["peak_bytes"])) / 2
    fixed = int(small["peak_bytes"]) - 2 * per_layer
    predicted = max(1, int((budget * MIB - fixed) // per_layer))
    layers, ran = predicted, fits(runner, d, strategy, predicted, budget)
    while ran is None and layers > 1:  # walk down to the first that runs
        layers -= 1
        ran = fits(runner, d, strategy, layers, budget)
    while ran is not None:  # then up to the first that fails
        above = fits(runner, d, strategy, layers + 1, budget)
        if above is None:
            break
        layers, ran = layers + 1, above
    return predicted, layers, ran, small, large


def budget_section(runner, budget, ranks):
    rows = ["| d | strategy | peak MiB at 2 / 4 layers | predicted layers | largest layers that"
            " ran (next fails) | Ψ | peak MiB | Ψ / DDP's Ψ |",
            "|---|---|---|---|---|---|---|---|"]
    for d in ranks:
        ddp_params = None
        for s in STRATEGIES:
            predicted, layers, f, small, large = largest(runner, d, s, budget)
            params = int(f["params"])
            ddp_params = ddp_params or params
            rows.append("| {} | {} | {} / {} | {} | {} | {} | {} | **{:.2f}** |".format(
                d, s, mb(small["peak_bytes"]), mb(large["peak_bytes"]), predicted, layers, params,
                mb(f["peak_bytes"]), params / ddp_params))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build")
    parser.add_argument("--pairs", type=int, default=9)
    parser.add_argument("--budget-mib", type=int, default=128)
    parser.add_argument("--budget-ranks", default="4", help="comma-separated rank counts")
    parser.add_argument("--sections", default="memory,speed,budget")
    args = parser.parse_args()
    if args.pairs < 1 or args.budget_mib < 1:
        parser.error("--pairs and --budget-mib must be at least 1")
    budget_ranks = [int(n) for n in args.budget_ranks.split(",")]
    runner = Runner(args.build)
    out = ["# ZeRO benchmark ({})".format(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())),
           "", "Load average at start: {:.1f} {:.1f} {:.1f}.".format(*os.getloadavg()), ""]
    sections = {"memory": ("Memory per rank (fp32 Adam): " + " ".join(MEMORY_MODEL),
                           lambda: memory_section(runner)),
                "speed": ("Step time at 2 ranks, alternated pairs: " + " ".join(SPEED_MODEL),
                          lambda: speed_section(runner, args.pairs)),
                "budget": ("Largest GPT within {} MiB per rank: ".format(args.budget_mib)
                           + " ".join(BUDGET_MODEL),
                           lambda: budget_section(runner, args.budget_mib, budget_ranks))}
    for name in args.sections.split(","):
        if name not in sections:
            parser.error("unknown section " + name)
        title, body = sections[name]
        out += ["## " + title, ""] + body() + [""]
    out += ["## Commands (seconds, load average before / after, outcome)", ""]
    out += ["- `{}`: {:.1f} s, load {:.1f} / {:.1f}, {}".format(*entry) for entry in runner.log]
    print("\n".join(out))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Before/after ratios of chorus-perf runs: usage DIR (files {base,new}-n<N>-r<R>.txt).

For every (ranks, collective, size) the median time over the repetitions of each build, then
new / base; prints per rank count the geometric mean, the spread and the cells beyond 1.25x.
"""
import glob
import math
import os
import re
import statistics
import sys


def parse(path):
    times, collective = {}, None
    for line in open(path):
        m = re.match(r"# Collective: (\w+)", line)
        if m:
            collective = m.group(1)
            continue
        fields = line.split()
        if collective and len(fields) >= 10 and fields[0].isdigit():
            times[(collective, int(fields[0]))] = float(fields[5])
    return times


def main():
    folder = sys.argv[1]
    runs = {}
    for path in glob.glob(os.path.join(folder, "*-n*-r*.txt")):
        build, n, _ = re.match(r"(\w+)-n(\d+)-r(\d+)", os.path.basename(path)).groups()
        for cell, t in parse(path).items():
            runs.setdefault((int(n), cell), {}).setdefault(build, []).append(t)
    print("| ranks | cells | geomean new/base | min | max | cells > 1.25x |")
    print("|---|---|---|---|---|---|")
    for n in sorted({k[0] for k in runs}):
        ratios = []
        for (m, cell), by in sorted(runs.items()):
            if m == n and len(by.get("base", [])) and len(by.get("new", [])):
                ratios.append((statistics.median(by["new"]) / statistics.median(by["base"]), cell))
        logs = [math.log(r) for r, _ in ratios]
        slow = ", ".join(f"{c[0]} {c[1]} B {r:.2f}x" for r, c in ratios if r > 1.25)
        print(f"| {n} | {len(ratios)} | {math.exp(sum(logs) / len(logs)):.3f} | "
              f"{min(ratios)[0]:.2f} | {max(ratios)[0]:.2f} | {slow or '-'} |")


if __name__ == "__main__":
    main()

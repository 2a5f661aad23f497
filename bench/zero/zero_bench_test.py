#!/usr/bin/python3
"""zero_bench's memory figures and its budget, at 3 ranks (uneven shards) on a small GPT:

- for DDP and each ZeRO stage, the parameter + gradient + optimizer bytes the strategy
  reports and the bytes the counting allocator sees held after a step are each within 10% of
  PARALLEL.md section 3's fp32 Adam formula;
- with --budget-mib below what the strategy needs, the job fails within seconds, a rank saying
  "over the budget of N MiB", and no rank hangs.

With --gathered-peak instead: ZeRO-3 with resharding keeps at most prefetch + 1 units gathered
(zero3.hpp), besides the GPT's embedding unit, which stays gathered from the embedding's
forward to its gradient (the head runs it too): checked at 2 ranks, prefetch 0, 1 and 2.

    zero_bench_test.py CHORUSRUN ZERO_BENCH [--gathered-peak]
"""
import re
import subprocess
import sys
import time

MODEL = ["--layers", "3", "--hidden", "48", "--heads", "4", "--seq", "8", "--batch", "2",
         "--steps", "1", "--warmup", "1", "--private-buckets"]


def run(chorusrun, bench, args):
    cmd = [chorusrun, "-n", "3", "--timeout", "60", bench] + MODEL + args
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def check_memory(chorusrun, bench, strategy, failures):
    out = run(chorusrun, bench, ["--strategy", strategy])
    if out.returncode != 0:
        failures.append("{}: exit {}\n{}".format(strategy, out.returncode, out.stderr))
        return
    f = dict(re.findall(r"(\w+)=(\S+)", out.stdout))
    formula = int(f["formula_bytes"])
    reported = sum(int(f[k]) for k in ("param_bytes", "grad_bytes", "optimizer_bytes"))
    held = int(f["held_bytes"])
    print("{}: reported {} held {} formula {}".format(strategy, reported, held, formula))
    for name, value in (("reported", reported), ("allocator-held", held)):
        if abs(value - formula) > 0.1 * formula:
            failures.append("{}: {} bytes {} not within 10% of the formula's {}".format(
                strategy, name, value, formula))


def check_budget(chorusrun, bench, strategy, failures):
    start = time.monotonic()
    out = run(chorusrun, bench, ["--strategy", strategy, "--budget-mib", "1"])
    seconds = time.monotonic() - start
    print("{} over budget: exit {} after {:.1f} s".format(strategy, out.returncode, seconds))
    if out.returncode == 0 or "over the budget of 1 MiB" not in out.stderr:
        failures.append("{}: a 1 MiB budget did not fail as it should (exit {}):\n{}".format(
            strategy, out.returncode, out.stderr))


def check_gathered_peak(chorusrun, bench, failures):
    h, seq, layers = 64, 8, 4
    block = 4 * (12 * h * h + 13 * h)  # QKV, output, two MLP matrices, biases, two norms
    embedding = 4 * (256 * h + seq * h + 2 * h)  # tied token embedding, positions, final norm
    for prefetch in (0, 1, 2):
        cmd = [chorusrun, "-n", "2", "--timeout", "60", bench, "--strategy", "zero3", "--layers",
               str(layers), "--hidden", str(h), "--seq", str(seq), "--batch", "1", "--steps", "1",
               "--warmup", "1", "--prefetch", str(prefetch)]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            failures.append("prefetch {}: exit {}\n{}".format(prefetch, out.returncode,
                                                              out.stderr))
            continue
        peak = int(dict(re.findall(r"(\w+)=(\S+)", out.stdout))["gathered_peak_bytes"])
        bound = (prefetch + 1) * block + embedding
        print("prefetch {}: gathered peak {} bytes, bound {} ({:.2f} blocks + the embedding)"
              .format(prefetch, peak, bound, (peak - embedding) / block))
        if peak > bound:
            failures.append("prefetch {}: {} bytes gathered at once, over prefetch + 1 = {} "
                            "blocks + the embedding unit ({} bytes)".format(
                                prefetch, peak, prefetch + 1, bound))


def main():
    chorusrun, bench = sys.argv[1], sys.argv[2]
    failures = []
    if sys.argv[3:] == ["--gathered-peak"]:
        check_gathered_peak(chorusrun, bench, failures)
        sys.exit("\n".join(failures) if failures else 0)
    for strategy in ("ddp", "zero1", "zero2", "zero3"):
        check_memory(chorusrun, bench, strategy, failures)
    for strategy in ("ddp", "zero3"):
        check_budget(chorusrun, bench, strategy, failures)
    if failures:
        sys.exit("\n".join(failures))


if __name__ == "__main__":
    main()

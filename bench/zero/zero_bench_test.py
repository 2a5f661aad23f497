#!/usr/bin/python3
"""zero_bench's memory figures and its budget, at 3 ranks (uneven shards) on a small GPT:

- for DDP and each ZeRO stage, the parameter + gradient + optimizer bytes the strategy
  reports and the bytes the counting allocator sees held after a step are each within 10% of
  PARALLEL.md section 3's fp32 Adam formula;
- with --budget-mib below what the strategy needs, the job fails within seconds, a rank saying
  "over the budget of N MiB", and no rank hangs.

    zero_bench_test.py CHORUSRUN ZERO_BENCH
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


def main():
    chorusrun, bench = sys.argv[1], sys.argv[2]
    failures = []
    for strategy in ("ddp", "zero1", "zero2", "zero3"):
        check_memory(chorusrun, bench, strategy, failures)
    for strategy in ("ddp", "zero3"):
        check_budget(chorusrun, bench, strategy, failures)
    if failures:
        sys.exit("\n".join(failures))


if __name__ == "__main__":
    main()

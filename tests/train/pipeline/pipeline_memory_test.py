#!/usr/bin/python3
"""The activations each schedule holds at its peak, measured by bench/gpt/pipeline_bubble's
counting allocator with real computations at p 2 and m 6: on stage 0 GPipe holds all m
micro-batches' activations, 1F1B and ZB-H1 at most p (PARALLEL.md's memory claims of the
schedules). The measure is in micro-batches' worth, calibrated on each stage by GPipe steps of
one and two micro-batches, so it allows half a micro-batch for a backward's transient buffers.

    pipeline_memory_test.py CHORUSRUN PIPELINE_BUBBLE
"""
import subprocess
import sys

P, M = 2, 6


def held(chorusrun, bench, schedule):
    cmd = [chorusrun, "-n", str(P), "--timeout", "60", bench, "--schedule", schedule,
           "--micro-batches", str(M), "--synthetic-compute", "0", "--hidden", "32",
           "--layers-per-chunk", "2", "--steps", "2"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stdout + out.stderr
    # "... peak B0,B1 held H0,H1"
    words = out.stdout.split()
    return [float(x) for x in words[words.index("held") + 1].split(",")]


def main():
    chorusrun, bench = sys.argv[1], sys.argv[2]
    failures = []
    for schedule, low, high in [("gpipe", M - 0.5, M + 0.5), ("1f1b", 0.5, P + 0.5),
                                ("zb-h1", 0.5, P + 0.5)]:
        stages = held(chorusrun, bench, schedule)
        print(f"{schedule} p {P} m {M}: micro-batches held per stage {stages}")
        if not low <= stages[0] <= high:
            failures.append(f"{schedule}: stage 0 held {stages[0]:.2f} micro-batches' worth of "
                            f"activations, expected {low} to {high}")
    if failures:
        sys.exit("\n".join(failures))


if __name__ == "__main__":
    main()

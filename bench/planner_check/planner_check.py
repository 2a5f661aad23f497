#!/usr/bin/env python3
"""bench/planner_check: chorus-plan's predictions against measured chorus-train steps.

    planner_check.py --build BUILD --ranks N [--synthetic-compute MS] [--layouts K] [--steps S]

1. A compute profile: with real compute, `chorusrun -n N chorus-train --write-compute-profile`
   times every block of the model, the embedding, the head and the optimizer at every
   micro-batch size a layout can use (1, 2, 4, ... up to the global batch) on N processes at
   once, as the N ranks of a layout compute (ranks that share the host's cores slow each
   other), to which the planner fits a fixed time plus a time per FLOP; with
   --synthetic-compute MS the profile says what the sleeps are (a block's forward MS ms at
   micro-batch 1 and tp 1, its backward 2·MS, in proportion to FLOPs; sleeps do not share
   cores, so at concurrency N too), so the planner's compute term is exact by construction and
   the check is of everything else (the bubble, the communication, what overlaps).
2. `chorus-plan --json` over N ranks of one host with that profile; the layouts chorus-train runs
   (no cp, no sequence parallelism with synthetic compute, no ZeRO, dense), one per command
   line: the best five and the rest evenly spaced down to the worst, K in all.
3. Each layout run by its command line for S steps with --peak-memory (and --synthetic-compute):
   the median step (rank 0's, the first step left out) and the peak bytes torch held on the
   most loaded rank.
4. A markdown report on stdout: predicted against measured step time and memory per layout,
   Kendall's tau of the two orders, the top five's errors, and where the predicted best landed.
   The measured memory counts the gradient buckets (host-shared or not) the counting allocator
   does not see (chorus-train --peak-memory). With synthetic compute no activation is held:
   memory is compared with the predicted model states plus the boundary tensors a synthetic
   pipeline keeps (synthetic_boundaries), on the rank where their sum is largest.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

MODEL = ["--layers", "8", "--hidden", "64", "--heads", "4", "--seq-len", "64"]
SIZES = {key[2:]: int(value) for key, value in zip(MODEL[::2], MODEL[1::2])}
VOCAB = 256  # chorus-train's byte vocabulary
STATE_BYTES = 4 + 4 + 8  # per fp32 parameter: itself, its gradient, Adam's two moments
MiB = 1024.0 * 1024.0


def run(command, timeout):
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        sys.exit("planner_check: %s exited with %d:\n%s%s" %
                 (" ".join(command), done.returncode, done.stdout, done.stderr))
    return done.stdout


def compute_profile(args, path):
    if args.synthetic_compute > 0:
        ms = args.synthetic_compute
        values = dict(zip(MODEL[::2], MODEL[1::2]))
        with open(path, "w") as out:
            out.write("# the sleeps of --synthetic-compute %g\n" % ms)
            out.write("hidden %s\nheads %s\nseq %s\nmicro_batch 1\ntp 1\nconcurrency %d\n" %
                      (values["--hidden"], values["--heads"], values["--seq-len"], args.ranks))
            out.write("layer_forward_ms %g\nlayer_backward_ms %g\n" % (ms, 2 * ms))
        return
    # Micro-batch --global-batch, and every power of two below it: every size a layout uses;
    # on as many processes at once as the layouts have ranks.
    run([args.run, "-n", str(args.ranks), "--timeout", "900", args.train, "--model", "gpt"] +
        MODEL + ["--batch", str(args.global_batch), "--write-compute-profile", path], 1200)


def runnable(layout, synthetic):
    if layout["cp"] != 1 or layout["ep"] != 1 or layout["zero"] != 0:
        return False
    return not (synthetic and layout["sequence_parallel"])


def choose(layouts, count):
    """The first five and the rest evenly spaced down to the last, `count` in all."""
    if len(layouts) <= count:
        return list(layouts)
    top, rest = layouts[:5], layouts[5:]
    wanted = count - len(top)
    picks = [rest[round(i * (len(rest) - 1) / max(wanted - 1, 1))] for i in range(wanted)]
    return top + picks


def measure(args, layout):
    words = layout["command"].split()
    assert words[0] == "chorusrun" and "chorus-train" in words, layout["command"]
    at = words.index("chorus-train")
    command = [args.run] + words[1:at] + ["--timeout", "300", args.train] + words[at + 1:] + [
        "--steps", str(args.steps), "--log-every", str(args.steps), "--no-eval",
        "--eval-every", "0", "--peak-memory"]
    if args.synthetic_compute > 0:
        command += ["--synthetic-compute", str(args.synthetic_compute)]
    out = run(command, 900)
    step = re.search(r"step_ms_median=([0-9.]+)", out)
    memory = re.search(r"memory peak_bytes=([0-9]+)", out)
    if not step or not memory:
        sys.exit("planner_check: no summary or memory line in:\n" + out)
    return float(step.group(1)) / 1000, float(memory.group(1))


def synthetic_boundaries(layout, rank):
    """Bytes of the boundary tensors pipeline rank `rank` of a synthetic run holds at its peak:
    with pp > 1 each of its chunks keeps every micro-batch's received input and that input's
    gradient (on virtual stages after the first) and its output and the output's received
    gradient (before the last) to the step's end, as GptPipeline's synthetic computations do;
    at any pp one more is being made, and with tp > 1 its all-reduced copy."""
    p, v, m = layout["pp"], layout["virtual_stages"], layout["micro_batches"]
    boundary = layout["micro_batch"] * SIZES["seq-len"] * SIZES["hidden"] * 4
    last = p * v - 1
    held = sum(2 * (s > 0) + 2 * (s < last) for s in (c * p + rank for c in range(v)))
    return (held * m + 1 + (layout["tp"] > 1)) * boundary


def synthetic_memory(layout):
    """The predicted peak of a synthetic run: the largest over its pipeline ranks of the model
    states (the planner's heaviest stage's; ranks that hold neither the first nor the last
    virtual stage without the embedding's) plus that rank's boundary tensors."""
    memory = layout["memory_bytes"]
    states = memory["parameters"] + memory["gradients"] + memory["optimizer"]
    embedding = (VOCAB * SIZES["hidden"] / layout["tp"] + SIZES["seq-len"] * SIZES["hidden"]) * \
        STATE_BYTES
    p = layout["pp"]
    return max(states - (embedding if 0 < rank < p - 1 else 0) +
               synthetic_boundaries(layout, rank) for rank in range(p))


def kendall_tau(xs, ys):
    """Kendall's tau-b of two lists of values (ties counted on either side)."""
    concordant = discordant = ties_x = ties_y = 0
    for i in range(len(xs)):
        for j in range(i + 1, len(xs)):
            dx, dy = xs[i] - xs[j], ys[i] - ys[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif dx * dy > 0:
                concordant += 1
            else:
                discordant += 1
    denominator = ((concordant + discordant + ties_x) * (concordant + discordant + ties_y)) ** 0.5
    return (concordant - discordant) / denominator if denominator else 0.0


def name(layout):
    text = "tp %d pp %d dp %d" % (layout["tp"], layout["pp"], layout["dp"])
    if layout["sequence_parallel"]:
        text += " sp"
    if layout["recompute"] != "none":
        text += " rc " + layout["recompute"]
    if layout["pp"] > 1:
        text += " " + layout["schedule"]
        if layout["virtual_stages"] > 1:
            text += " v%d" % layout["virtual_stages"]
    return text + " m %d b %d" % (layout["micro_batches"], layout["micro_batch"])


def report(args, chosen, measured, total):
    synthetic = args.synthetic_compute > 0
    mode = ("synthetic compute, %g ms per block forward at b 1" % args.synthetic_compute
            if synthetic else "real compute")
    print("### %d ranks, %s\n" % (args.ranks, mode))
    print("%d of the planner's %d layouts (its best five, then evenly spaced to its worst), "
          "%d steps each; memory: %s.\n" %
          (len(chosen), total, args.steps,
           "predicted model states and the synthetic pipeline's boundary tensors (no "
           "activations are held)" if synthetic
           else "predicted total per rank (with the pipeline's boundary tensors)"))
    print("| planner rank | layout | predicted (ms) | measured (ms) | error | "
          "predicted (MiB) | measured (MiB) | error |")
    print("|--:|---|--:|--:|--:|--:|--:|--:|")
    memory_errors = []
    for (rank, layout), (seconds, peak) in zip(chosen, measured):
        predicted_memory = (synthetic_memory(layout) if synthetic
                            else layout["memory_bytes"]["total"])
        memory_errors.append(peak / predicted_memory - 1)
        print("| %d | %s | %.1f | %.1f | %+.1f%% | %.2f | %.2f | %+.1f%% |" %
              (rank, name(layout), layout["step_s"] * 1e3, seconds * 1e3,
               100 * (seconds / layout["step_s"] - 1), predicted_memory / MiB, peak / MiB,
               100 * (peak / predicted_memory - 1)))
    predicted = [layout["step_s"] for _, layout in chosen]
    seconds = [s for s, _ in measured]
    best = min(range(len(seconds)), key=lambda i: seconds[i])
    top = [abs(seconds[i] / predicted[i] - 1) for i in range(min(5, len(chosen)))]
    print("\nKendall's tau (predicted against measured step time): %.2f. Top five: largest "
          "error %.1f%%. The predicted best measured %.1f ms, %.1f%% above the measured best "
          "(%s, %.1f ms). Memory: errors %+.1f%% to %+.1f%%.\n" %
          (kendall_tau(predicted, seconds), 100 * max(top), seconds[0] * 1e3,
           100 * (seconds[0] / seconds[best] - 1), name(chosen[best][1]), seconds[best] * 1e3,
           100 * min(memory_errors), 100 * max(memory_errors)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", required=True)
    parser.add_argument("--ranks", type=int, required=True)
    parser.add_argument("--synthetic-compute", type=float, default=0.0, metavar="MS")
    parser.add_argument("--layouts", type=int, default=10)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--global-batch", type=int, default=16)
    args = parser.parse_args()
    if args.layouts < 8 or args.steps < 2:
        parser.error("--layouts must be at least 8 and --steps at least 2")
    args.run = os.path.join(args.build, "tools/chorusrun/chorusrun")
    args.train = os.path.join(args.build, "tools/chorus-train/chorus-train")
    plan = os.path.join(args.build, "tools/chorus-plan/chorus-plan")
    with tempfile.TemporaryDirectory() as work:
        profile = os.path.join(work, "compute.profile")
        compute_profile(args, profile)
        result = json.loads(run([plan] + MODEL + [
            "--global-batch", str(args.global_batch), "--ranks-per-host", str(args.ranks),
            "--compute-profile", profile, "--json", "--top", "0"], 600))
    if result.get("warning"):
        print("planner_check: chorus-plan warns: " + result["warning"], file=sys.stderr)
    layouts = [l for l in result["layouts"] if runnable(l, args.synthetic_compute > 0)]
    unique, seen = [], set()
    for layout in layouts:
        if layout["command"] not in seen:
            seen.add(layout["command"])
            unique.append(layout)
    chosen = choose(list(enumerate(unique, 1)), args.layouts)
    measured = []
    for rank, layout in chosen:
        print("planner_check: %s" % layout["command"], file=sys.stderr)
        measured.append(measure(args, layout))
    report(args, chosen, measured, len(unique))


if __name__ == "__main__":
    main()

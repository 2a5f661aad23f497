#!/usr/bin/python3
"""Chorus DDP (chorus-train, C++) against PyTorch's own DDP on gloo (torch_ddp.py), same run.

Both train the same MLP on Fashion-MNIST with the same ranks, per-rank batch, optimizer and
one torch thread per rank (OMP_NUM_THREADS=1). Each configuration also runs without gradient
synchronisation (chorus-train --no-sync; the plain model in Python), so the exposed cost of
communication is measured at the same rank count (two ranks on two cores slow each other
down even without communication). Every configuration runs --repeats times, interleaved;
a run reports the median step time after its warm-up, the table the median over runs.

Separate runs differ by up to 20% on a shared machine even without communication, so the
overhead is also measured within one run: chorus-train --alternate-sync 1 takes synchronised
and unsynchronised steps in turn (each unsynchronised step followed by an untimed barrier, so
every step starts with the ranks together), and the ratio of the two medians is reported,
median over runs.

    bench/ddp/compare.py --build build --ranks 2 --steps 60 --repeats 3

With --against OTHER_BUILD it times only Chorus DDP, this build's chorus-train against the other
build's, runs alternated, and prints both medians and their ratio (a change's effect on the
step time).
"""
import argparse
import copy
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import spawn  # noqa: E402
from openblas_env import openblas_env  # noqa: E402

SUMMARY = re.compile(r"summary steps=\d+ samples_per_s=([\d.]+) step_ms_median=([\d.]+)")
UNSYNCED = re.compile(r"unsynced_step_ms_median=([\d.]+)")


def parse_summary(output):
    match = SUMMARY.search(output)
    if not match:
        raise RuntimeError("no summary line in:\n" + output)
    return float(match.group(2))


def chorus_train_output(args, steps, extra):
    """stdout of one chorus-train run of `steps` steps with the options `extra`."""
    command = [args.chorusrun, "-n", str(args.ranks), "--timeout", "600", args.chorus_train,
               "--model", "mlp", "--steps", str(steps), "--batch", str(args.batch),
               "--hidden", str(args.hidden), "--layers", str(args.layers), "--no-eval",
               "--log-every", str(steps), "--bucket-cap-mb", str(args.bucket_cap_mb)] + extra
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True, timeout=900)
    return out.stdout


def run_chorus(args, no_sync):
    return parse_summary(chorus_train_output(args, args.steps, ["--no-sync"] if no_sync else []))


def run_chorus_paired(args):
    """Synchronised over unsynchronised step median of one --alternate-sync 1 run."""
    output = chorus_train_output(args, 2 * args.steps, ["--alternate-sync", "1"])
    match = UNSYNCED.search(output)
    if not match:
        raise RuntimeError("no unsynced median in:\n" + output)
    return parse_summary(output) / float(match.group(1))


def run_torch(args, no_sync):
    command = ["/usr/bin/python3",  # Debian's torch lives in the system Python
               os.path.join(HERE, "torch_ddp.py"), "--steps", str(args.steps), "--warmup", "5",
               "--batch", str(args.batch), "--hidden", str(args.hidden), "--layers",
               str(args.layers)]
    if no_sync:
        command.append("--no-sync")
    return parse_summary(spawn.run_ranks(args.ranks, command, timeout=900))


def with_build(args, build):
    """args whose chorusrun and chorus-train are those of `build`."""
    out = copy.copy(args)
    out.chorusrun = os.path.join(build, "tools", "chorusrun", "chorusrun")
    out.chorus_train = os.path.join(build, "tools", "chorus-train", "chorus-train")
    return out


def compare_builds(args):
    """Chorus DDP of --build against --against, runs alternated: the median step time, and the
    synchronised over unsynchronised step ratio of --alternate-sync 1 runs (within a run, so
    far less noisy than step times of separate runs on a shared machine)."""
    builds = {"this build": with_build(args, args.build), "against": with_build(args, args.against)}
    times = {name: [] for name in builds}
    paired = {name: [] for name in builds}
    for _ in range(args.repeats):
        for name, build_args in builds.items():
            times[name].append(run_chorus(build_args, False))
            paired[name].append(run_chorus_paired(build_args))
    print(f"chorus DDP, MLP 784-{args.hidden}x{args.layers}-10, {args.ranks} ranks x batch "
          f"{args.batch}, {args.steps} steps (5 warm-up), median of {args.repeats} alternated runs")
    for name, values in times.items():
        runs = " ".join(f"{v:.2f}" for v in values)
        overheads = " ".join(f"{100 * (v - 1):+.1f}%" for v in paired[name])
        print(f"{name:10s} {builds[name].chorus_train}\n"
              f"  step ms {statistics.median(values):.2f} (runs {runs})\n"
              f"  synchronised vs unsynchronised steps {100 * (statistics.median(paired[name]) - 1):+.1f}%"
              f" (runs {overheads})")
    ratio = statistics.median(times["this build"]) / statistics.median(times["against"])
    paired_ratio = statistics.median(paired["this build"]) / statistics.median(paired["against"])
    print(f"this build / against: step time {ratio:.3f}, synchronised step {paired_ratio:.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--bucket-cap-mb", type=float, default=25)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--against", help="another build: time only Chorus DDP, both builds")
    args = parser.parse_args()
    os.environ.update(openblas_env())  # every rank of both trainers inherits it
    if args.against:
        compare_builds(args)
        return
    args = with_build(args, args.build)
    configs = {
        "pytorch DDP (gloo)": lambda: run_torch(args, False),
        "pytorch no sync": lambda: run_torch(args, True),
        "chorus DDP": lambda: run_chorus(args, False),
        "chorus no sync": lambda: run_chorus(args, True),
        "chorus alternating": lambda: run_chorus_paired(args),
    }
    times = {name: [] for name in configs}
    for _ in range(args.repeats):
        for name, run in configs.items():
            times[name].append(run())
    params = 784 * args.hidden + args.hidden + (args.layers - 1) * (args.hidden + 1) * args.hidden \
        + (args.hidden + 1) * 10
    print(f"MLP 784-{args.hidden}x{args.layers}-10 ({params / 1e6:.2f}M parameters), "
          f"{args.ranks} ranks x batch {args.batch}, 1 torch thread per rank, {args.steps} steps "
          f"(5 warm-up), median of {args.repeats} runs")
    print(f"{'':22s} {'step ms':>9s} {'samples/s':>10s}   runs (step ms)")
    median = {}
    paired = times.pop("chorus alternating")
    for name, values in times.items():
        median[name] = statistics.median(values)
        samples = args.batch * args.ranks / median[name] * 1e3
        runs = " ".join(f"{v:.2f}" for v in values)
        print(f"{name:22s} {median[name]:9.2f} {samples:10.1f}   {runs}")
    ratio = median["pytorch DDP (gloo)"] / median["chorus DDP"]
    chorus_overhead = median["chorus DDP"] / median["chorus no sync"] - 1
    torch_overhead = median["pytorch DDP (gloo)"] / median["pytorch no sync"] - 1
    print(f"throughput chorus / pytorch: {ratio:.2f}x (goal >= 1.3x)")
    print(f"chorus DDP step vs chorus no-sync: {100 * chorus_overhead:+.1f}% (goal <= +10%)")
    print(f"pytorch DDP step vs pytorch no-sync: {100 * torch_overhead:+.1f}%")
    runs = " ".join(f"{100 * (v - 1):+.1f}%" for v in paired)
    print(f"chorus DDP step vs unsynchronised steps in the same processes (--alternate-sync 1, "
          f"{2 * args.steps} steps): {100 * (statistics.median(paired) - 1):+.1f}% "
          f"(goal <= +10%; runs {runs})")


if __name__ == "__main__":
    main()

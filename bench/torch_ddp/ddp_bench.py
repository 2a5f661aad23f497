#!/usr/bin/python3
"""PyTorch DDP step time on the chorus and gloo backends, against the same training with no
gradient synchronisation at all (nosync) and DDP whose communication hook communicates nothing
(nocomm: torch's own DDP work, what no backend can remove), in one invocation; and chorus
DDP taking synchronised and unsynchronised (no_sync) steps in turn within each run (paired),
which measures the synchronisation's cost free of the spread between separate runs; and the
same with the hook that communicates nothing (paired-nocomm: torch DDP's own share of it).

    PYTHONPATH=<build>/python /usr/bin/python3 bench/torch_ddp/ddp_bench.py \\
        [--models mlp,transformer,lstm] [--ranks 2,4] [--modes chorus,gloo,nosync,nocomm,paired,paired-nocomm]
        [--steps 20] [--warmup 3] [--repeats 3] [--bucket-view] [--avg-hook [cpp|python]]

For every (model, ranks) cell the modes run interleaved, `repeats` times: chorus, gloo,
nosync, nocomm, chorus, gloo, ... Each run starts `ranks` fresh processes (worker.py, one torch
thread each, OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=1, a FileStore rendezvous in a temporary
directory); a run's figure is the slowest rank's mean step time over the timed steps, and a
cell's figure the median over its runs. Prints the table on stdout (progress on stderr) and
writes it as markdown to <out>/<date>-<time>-torch-ddp.md. Exit status 1 if any run failed.
Models and data: models.py; the timeline of one run: worker.py.
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
from openblas_env import openblas_env  # noqa: E402
try:
    import torch  # noqa: F401  (the workers need it; fail here with a clear message)
except ImportError:
    sys.exit("no torch in {}: run with /usr/bin/python3 (Debian's python3-torch)".format(sys.executable))
import report  # noqa: E402

MODES = ("chorus", "gloo", "nosync", "nocomm", "paired", "paired-nocomm")  # paired*: steps in turn
MODEL_NAMES = ("mlp", "transformer", "lstm")


class RunFailed(RuntimeError):
    pass


# glibc malloc serves blocks above its mmap threshold (128 KiB at start, raised as mmapped blocks
# are freed) with fresh mmaps and trims the heap top above the trim threshold; then every step
# page-faults its activations in again. Measured here: the plain LSTM step took 7x the CPU time
# (40 % of it system time) unless a DDP model's bucket allocations had raised the threshold, so
# nosync came out slower than DDP. Fixed thresholds give every mode the same, steady allocator; a
# value already set in the environment wins.
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(128 << 20)}


def rank_malloc_env():
    return {name: os.environ.get(name, value) for name, value in MALLOC_ENV.items()}


def add_ddp_options(parser):
    """The DDP options of this script, ddp_profile.py and worker.py (passed on by ddp_flags)."""
    parser.add_argument("--bucket-view", action="store_true",
                        help="DDP(gradient_as_bucket_view=True) in every DDP mode: gradients are views of "
                             "DDP's buckets, which saves copying them back after each all-reduce")
    parser.add_argument("--avg-hook", nargs="?", const="cpp", choices=["cpp", "python"],
                        help="chorus and paired modes average in the backend (ReduceOp.AVG) instead of DDP "
                             "dividing every gradient: cpp (the default) registers "
                             "chorus_torch.register_avg_hook, python chorus_torch.allreduce_avg_hook")


def ddp_flags(args):
    """add_ddp_options' options as worker.py's command-line flags."""
    return (["--bucket-view"] if args.bucket_view else []) + \
        (["--avg-hook", args.avg_hook] if args.avg_hook else [])


def rank_env(ranks):
    """Every rank's environment but RANK: one thread, the steady allocator, OpenBLAS's kernels."""
    env = dict(os.environ, **rank_malloc_env(), **openblas_env())
    env.update(WORLD_SIZE=str(ranks), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    return env


def start_ranks(cmd, ranks, tmp):
    env = rank_env(ranks)
    procs = []
    for r in range(ranks):
        with open(os.path.join(tmp, "out%d" % r), "w") as out, open(os.path.join(tmp, "err%d" % r), "w") as err:
            procs.append(subprocess.Popen(cmd, env=dict(env, RANK=str(r)), stdout=out, stderr=err))
    return procs


def wait_ranks(procs, timeout):
    """Waits for every rank; on the first failure or at the deadline kills the others."""
    deadline = time.monotonic() + timeout
    try:
        while any(p.poll() is None for p in procs):
            failed = [i for i, p in enumerate(procs) if p.poll() not in (None, 0)]
            if failed:
                return failed
            if time.monotonic() > deadline:
                raise RunFailed("timed out after {} s".format(timeout))
            time.sleep(0.1)
        return [i for i, p in enumerate(procs) if p.returncode != 0]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def launch(model, ranks, mode, args):
    """One run; returns {"step_s": slowest rank's mean, "loss": rank 0's, "info": rank 0's}."""
    with tempfile.TemporaryDirectory(prefix="torch-ddp-bench-") as tmp:
        cmd = [sys.executable, os.path.join(HERE, "worker.py"), "--model", model, "--mode", mode,
               "--store", os.path.join(tmp, "store"), "--steps", str(args.steps),
               "--warmup", str(args.warmup)] + ddp_flags(args)
        failed = wait_ranks(start_ranks(cmd, ranks, tmp), args.timeout)
        if failed:
            with open(os.path.join(tmp, "err%d" % failed[0])) as err:
                tail = "".join(err.readlines()[-8:])
            raise RunFailed("rank {} failed:\n{}".format(failed[0], tail))
        ranks_out = []
        for r in range(ranks):
            with open(os.path.join(tmp, "out%d" % r)) as out:
                text = out.read()
            try:
                ranks_out.append(json.loads(text.strip().splitlines()[-1]))
            except (ValueError, IndexError):
                raise RunFailed("rank {} printed no report: {!r}".format(r, text[-200:]))
    info = ranks_out[0]
    run = {"step_s": max(o["step_s"] for o in ranks_out), "loss": info["loss"], "info": info}
    if mode.startswith("paired"):
        run["unsynced_s"] = max(o["unsynced_s"] for o in ranks_out)
    return run


def run_cell(model, ranks, args, failures):
    """The interleaved repeats of one (model, ranks) cell: {mode: [run, ...]}."""
    runs = {mode: [] for mode in MODES}
    for repeat in range(args.repeats):
        for mode in args.modes:
            began = time.monotonic()
            try:
                run = launch(model, ranks, mode, args)
            except RunFailed as e:
                failures.append("{} ranks={} {} repeat {}: {}".format(model, ranks, mode, repeat + 1, e))
                print("  {} {} ranks {}: FAILED {}".format(model, mode, ranks, e), file=sys.stderr)
                continue
            runs[mode].append(run)
            print("  {} {} ranks {} repeat {}: {:.2f} ms/step ({:.0f} s)".format(
                model, mode, ranks, repeat + 1, run["step_s"] * 1e3, time.monotonic() - began),
                file=sys.stderr, flush=True)
    return runs


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODEL_NAMES), help="comma-separated: mlp,transformer,lstm")
    parser.add_argument("--ranks", default="2,4", help="comma-separated rank counts")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated: " + ",".join(MODES))
    parser.add_argument("--steps", type=int, default=20, help="timed steps per run")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps before them (DDP builds its buckets)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per mode and cell (median)")
    add_ddp_options(parser)
    parser.add_argument("--timeout", type=float, default=300, help="seconds per run")
    parser.add_argument("--out", default=os.path.join(HERE, "..", "results"),
                        help="directory of the markdown report ('' for none)")
    args = parser.parse_args()
    args.models = args.models.split(",")
    unknown = [m for m in args.models if m not in MODEL_NAMES]
    if unknown:
        parser.error("unknown model(s) {}; choose from {}".format(",".join(unknown), ",".join(MODEL_NAMES)))
    args.modes = args.modes.split(",")
    unknown = [m for m in args.modes if m not in MODES]
    if unknown or not args.modes:
        parser.error("unknown mode(s) {}; choose from {}".format(",".join(unknown), ",".join(MODES)))
    try:
        args.ranks = [int(r) for r in args.ranks.split(",")]
    except ValueError:
        parser.error("--ranks takes comma-separated integers")
    if min(args.ranks) < 2 or args.steps < 1 or args.warmup < 1 or args.repeats < 1:
        parser.error("need ranks >= 2, steps >= 1, warmup >= 1, repeats >= 1")
    if importlib.util.find_spec("chorus_torch") is None:
        parser.error("chorus_torch not importable: put <build>/python on PYTHONPATH")
    return args


def main():
    args = parse_args()
    args.malloc = " ".join("{}={}".format(k, v) for k, v in rank_malloc_env().items())
    began = time.monotonic()
    cells, failures = [], []
    for model in args.models:
        for ranks in args.ranks:
            cells.append((model, ranks, run_cell(model, ranks, args, failures)))
    minutes = (time.monotonic() - began) / 60
    text = report.markdown(cells, failures, args, minutes)
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, time.strftime("%Y-%m-%d-%H%M%S-torch-ddp.md", time.gmtime()))
        with open(path, "w") as f:
            f.write(text)
        print("written: " + os.path.relpath(path), file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

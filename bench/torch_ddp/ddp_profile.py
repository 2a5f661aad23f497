#!/usr/bin/python3
"""Where the CPU time of a DDP step goes: rank 0's CPU ms per step by category, for several modes.

    PYTHONPATH=<build>/python /usr/bin/python3 bench/torch_ddp/ddp_profile.py \\
        [--modes nosync,nocomm,chorus] [--model mlp] [--ranks 2] [--steps 60] [--freq 1000]
        [--bucket-view] [--avg-hook [cpp|python]]

Each mode is one run of worker.py (modes as in ddp_bench.py) with rank 0 under
`perf record -e cpu-clock --call-graph dwarf`, recording its timed steps only (the worker
switches perf on and off through perf's control fifo). Samples count CPU time whatever the
load on the machine, so compare modes by these figures rather than by step times when the
machine is shared. Samples are sorted by thread (main: the Python thread running the step;
other: every other thread of rank 0, among them Chorus's worker and the backend's completion
thread) and by what the call chain shows, e.g. torch's Reducer copying gradients into its
buckets (`ddp: grad -> bucket`) and back (`ddp: bucket -> grad`), Chorus's all-reduce kernels.
Needs `perf` and permission to use it (perf_event_paranoid <= 2 suffices for one's own process).
"""

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ddp_bench  # noqa: E402

# (category, test on the call chain: leaf first, "symbol (library)" per frame), first match wins.
CATEGORIES = [
    ("ddp: bucket -> grad", lambda c: "copy_bucket_to_grad" in c),
    ("ddp: grad -> bucket", lambda c: "mark_variable_ready" in c),
    ("chorus: all-reduce kernels", lambda c: "reduce_through_arena" in c or chorus_kernel(leaf(c))),
    ("chorus: other", lambda c: "chorus" in c),
    ("c10d other", lambda c: "c10d::" in c),
    ("matmul (addmm, BLAS)", lambda c: "openblas" in c or "addmm" in c or "::mm" in c),
    ("autograd: accumulate grad", lambda c: "AccumulateGrad" in c),
    ("optimizer / zero_grad", lambda c: "add__Tensor" in c or "mul__Tensor" in c or "zero_" in c),
    ("kernel (system)", lambda c: "[kernel.kallsyms]" in leaf(c)),
    ("python interpreter", lambda c: "python3" in leaf(c)),
]


def leaf(chain):
    return chain.split(" | ", 1)[0]


def chorus_kernel(frame):
    """Chorus's copy and reduction kernels (copy_avx2, reduce_into_avx2, ...)."""
    return frame.startswith("chorus::") and ("copy" in frame or "reduce" in frame)


def category(chain):
    for name, test in CATEGORIES:
        if test(chain):
            return name
    return "other"


def samples(script_output):
    """(is the main thread, call chain as one string) per sample of
    `perf script -F pid,tid,ip,sym,dso` (a sample's header is "pid/tid")."""
    main, frames = None, []
    for line in script_output.splitlines() + [""]:
        if not line.strip():
            if main is not None:
                yield main, " | ".join(frames)
            main, frames = None, []
        elif re.match(r"\s*\d+/\d+", line):
            pid, tid = line.split()[0].split("/")
            main = pid == tid
        else:
            m = re.match(r"\s*[0-9a-f]+ (.*) \((.*)\)$", line)
            if m:
                frames.append("{} ({})".format(m.group(1), os.path.basename(m.group(2))))


def profile(mode, args, tmp):
    """{(thread, category): CPU ms per step} of rank 0 in one run of `mode`."""
    ctl, ack, data = (os.path.join(tmp, name) for name in ("ctl", "ack", mode + ".data"))
    for fifo in (ctl, ack):
        if os.path.exists(fifo):
            os.unlink(fifo)
        os.mkfifo(fifo)
    worker = [sys.executable, os.path.join(HERE, "worker.py"), "--model", args.model, "--mode", mode,
              "--store", os.path.join(tmp, mode + ".store"), "--steps", str(args.steps), "--warmup", "3"]
    worker += ddp_bench.ddp_flags(args)
    perf = ["perf", "record", "-q", "-D", "-1", "--control=fifo:{},{}".format(ctl, ack), "-e", "cpu-clock",
            "-F", str(args.freq), "--call-graph", "dwarf,16384", "-o", data, "--"]
    env = ddp_bench.rank_env(args.ranks)
    procs = []
    for r in range(args.ranks):
        rank_env = dict(env, RANK=str(r))
        if r == 0:
            rank_env.update(PERF_CTL_FIFO=ctl, PERF_ACK_FIFO=ack)
        with open(os.path.join(tmp, "err%d" % r), "w") as err:
            procs.append(subprocess.Popen((perf if r == 0 else []) + worker, env=rank_env,
                                          stdout=subprocess.DEVNULL, stderr=err))
    failed = ddp_bench.wait_ranks(procs, args.timeout)
    if failed:
        with open(os.path.join(tmp, "err%d" % failed[0])) as err:
            sys.exit("{}: rank {} failed:\n{}".format(mode, failed[0], "".join(err.readlines()[-8:])))
    script = subprocess.run(["perf", "script", "-i", data, "-F", "pid,tid,ip,sym,dso"], check=True,
                            capture_output=True, text=True).stdout
    os.unlink(data)
    counts = collections.Counter()
    for main, chain in samples(script):
        counts[("main" if main else "other", category(chain))] += 1
    return {key: n * 1e3 / args.freq / args.steps for key, n in counts.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", default="nosync,nocomm,chorus", help="comma-separated modes of worker.py")
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=60, help="timed (profiled) steps per run")
    parser.add_argument("--freq", type=int, default=1000, help="samples per second of CPU time")
    ddp_bench.add_ddp_options(parser)
    parser.add_argument("--timeout", type=float, default=300, help="seconds per run")
    args = parser.parse_args()
    modes = args.modes.split(",")
    with tempfile.TemporaryDirectory(prefix="torch-ddp-profile-") as tmp:
        results = {mode: profile(mode, args, tmp) for mode in modes}
    largest = lambda k: max(r.get(k, 0) for r in results.values())  # noqa: E731
    keys = sorted({k for r in results.values() for k in r}, key=lambda k: (k[0], -largest(k)))
    print("rank 0 CPU ms per step, {} {} ranks, {} steps at {} Hz{}".format(
        args.model, args.ranks, args.steps, args.freq, ", gradient_as_bucket_view" if args.bucket_view else ""))
    print("{:<40}".format("thread: category") + "".join("{:>10}".format(m) for m in modes))
    for thread in ("main", "other"):
        for key in [k for k in keys if k[0] == thread] + [(thread, None)]:
            values = [sum(v for k, v in r.items() if k[0] == thread) if key[1] is None else r.get(key, 0)
                      for r in results.values()]
            label = "{}: {}".format(thread, key[1] or "TOTAL")
            print("{:<40}".format(label) + "".join("{:>10.2f}".format(v) for v in values))
    return 0


if __name__ == "__main__":
    sys.exit(main())

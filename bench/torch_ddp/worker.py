#!/usr/bin/python3
"""One rank of one benchmark run; started by ddp_bench.py with RANK and WORLD_SIZE set.

Modes: `chorus` and `gloo` train DistributedDataParallel on that backend; `nosync` trains the
plain model (no gradient synchronisation) and uses a gloo group only for the barriers that
line the ranks up before and after the timed steps, so that in every mode all ranks compete
for the cores during the whole timed window. `nocomm` trains DistributedDataParallel (on a
gloo group) with a communication hook that returns each bucket as it is: DDP's own work
(copying the gradients into its buckets and back, its autograd hooks) without any backend.
`paired` trains DistributedDataParallel on chorus taking synchronised steps and steps inside
`no_sync()` in turn (2 x `steps` timed steps), each unsynchronised step followed by an untimed
barrier so that every step starts with the ranks together: the two medians measure what the
synchronisation costs within one run, free of the differences between separate runs.
`paired-nocomm` does the same with nocomm's hook (on a gloo group): what DDP's own work adds
to a step, measured the same way.
A step is zero_grad + forward + cross-entropy + backward (DDP's all-reduces included) + SGD
step; data preparation is outside the step.

Timeline: `warmup` steps (DDP builds and rebuilds its buckets here), barrier, `steps` timed
steps, TRAIL untimed steps (so a rank that finishes early keeps loading its core while the
others finish their timed steps), barrier. Prints one JSON line on stdout: the mean step time
of this rank's timed steps (paired: the median of each kind of step), the last loss, and
(rank 0) what the run used.

Under `perf record --control=fifo:CTL,ACK -D -1` (ddp_profile.py) with PERF_CTL_FIFO=CTL and
PERF_ACK_FIFO=ACK in the environment, the rank enables perf for the timed steps only.
"""

import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402
from ddp_bench import MODES, add_ddp_options  # noqa: E402

TRAIL = 2


def loaded_blas():
    """Path of the BLAS library mapped into this process (Debian's torch picks it at run time),
    with OpenBLAS's kernels (openblas_get_corename) when it is OpenBLAS."""
    with open("/proc/self/maps") as maps:
        paths = sorted({line.split()[-1] for line in maps if "blas" in line.rsplit("/", 1)[-1]})
    names = []
    for path in paths:
        try:
            corename = ctypes.CDLL(path).openblas_get_corename
        except (OSError, AttributeError):
            names.append(path)
            continue
        corename.restype = ctypes.c_char_p
        names.append("{} ({} kernels)".format(path, corename().decode()))
    return ", ".join(names) or "unknown"


def no_communication(state, bucket):
    """A DDP communication hook that leaves the bucket as it is (each rank keeps its own gradients)."""
    del state
    done = torch.futures.Future()
    done.set_result(bucket.buffer())
    return done


def perf_control(command):
    """Sends `command` ("enable"/"disable") to the perf record this rank runs under, if any."""
    ctl, ack = os.environ.get("PERF_CTL_FIFO"), os.environ.get("PERF_ACK_FIFO")
    if not ctl:
        return
    with open(ctl, "w") as f:
        f.write(command + "\n")
    with open(ack) as f:
        f.read(5)  # perf answers "ack\n" once the command took effect


def train(args, rank):
    model = models.build(args.model)
    params = models.parameter_count(model)
    if args.mode != "nosync":
        ddp = torch.nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=args.bucket_view)
        model = ddp
    if args.mode.endswith("nocomm"):
        model.register_comm_hook(None, no_communication)
    elif args.avg_hook and args.mode in ("chorus", "paired"):
        import chorus_torch
        if args.avg_hook == "python":
            model.register_comm_hook(None, chorus_torch.allreduce_avg_hook)
        else:
            chorus_torch.register_avg_hook(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    data = models.batches(args.model, rank, 4)
    losses = []

    def step(i):
        x, y = data[i % len(data)]
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(models.logits(model, x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())

    for i in range(args.warmup):
        step(i)
    dist.barrier()
    if args.mode.startswith("paired"):
        synced, unsynced = paired_steps(args, step, ddp)
        return {"step_s": synced, "unsynced_s": unsynced, "loss": float(losses[-1]), "params": params}
    perf_control("enable")
    start, cpu_start = time.perf_counter(), time.process_time()
    for i in range(args.steps):
        step(args.warmup + i)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    perf_control("disable")
    for i in range(TRAIL):
        step(args.warmup + args.steps + i)
    dist.barrier()
    return {"step_s": elapsed / args.steps, "cpu_s": cpu / args.steps, "loss": float(losses[-1]),
            "params": params}


def paired_steps(args, step, ddp):
    """--mode paired and paired-nocomm: median synchronised and unsynchronised step times (s), in turn."""
    synced, unsynced = [], []
    for i in range(2 * args.steps):
        start = time.perf_counter()
        if i % 2 == 0:
            step(args.warmup + i)
            synced.append(time.perf_counter() - start)
        else:
            with ddp.no_sync():
                step(args.warmup + i)
            unsynced.append(time.perf_counter() - start)
            dist.barrier()  # untimed: the next step starts with the ranks together
    dist.barrier()
    return statistics.median(synced), statistics.median(unsynced)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=sorted(models.MODELS), required=True)
    parser.add_argument("--mode", choices=MODES, required=True)
    parser.add_argument("--store", required=True, help="path of the FileStore for this run")
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--warmup", type=int, required=True)
    add_ddp_options(parser)
    args = parser.parse_args()
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)
    if args.mode in ("chorus", "paired"):
        import chorus_torch  # noqa: F401  (registers the backend)
    backend = "chorus" if args.mode in ("chorus", "paired") else "gloo"
    dist.init_process_group(backend, init_method="file://" + args.store, rank=rank, world_size=size)
    report = dict(train(args, rank), rank=rank)
    params = report.pop("params")
    if rank == 0:
        report.update(params=params, torch=torch.__version__, blas=loaded_blas(),
                      threads=torch.get_num_threads(), data=models.data_source(args.model))
    print(json.dumps(report), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

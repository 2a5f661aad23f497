#!/usr/bin/python3
"""One rank of one benchmark run; started by ddp_bench.py with RANK and WORLD_SIZE set.

Modes: `chorus` and `gloo` train DistributedDataParallel on that backend; `nosync` trains the
plain model (no gradient synchronisation) and uses a gloo group only for the barriers that
line the ranks up before and after the timed steps, so that in every mode all ranks compete
for the cores during the whole timed window. A step is zero_grad + forward + cross-entropy +
backward (DDP's all-reduces included) + SGD step; data preparation is outside the step.

Timeline: `warmup` steps (DDP builds and rebuilds its buckets here), barrier, `steps` timed
steps, TRAIL untimed steps (so a rank that finishes early keeps loading its core while the
others finish their timed steps), barrier. Prints one JSON line on stdout: the mean step time
of this rank's timed steps, the last loss, and (rank 0) what the run used.
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402

TRAIL = 2


def loaded_blas():
    """Path of the BLAS library mapped into this process (Debian's torch picks it at run time)."""
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "blas" in line.rsplit("/", 1)[-1]}
    return ", ".join(sorted(paths)) or "unknown"


def train(args, rank):
    model = models.build(args.model)
    params = models.parameter_count(model)
    if args.mode != "nosync":
        model = torch.nn.parallel.DistributedDataParallel(model)
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
    start, cpu_start = time.perf_counter(), time.process_time()
    for i in range(args.steps):
        step(args.warmup + i)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    for i in range(TRAIL):
        step(args.warmup + args.steps + i)
    dist.barrier()
    return elapsed / args.steps, cpu / args.steps, float(losses[-1]), params


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=sorted(models.MODELS), required=True)
    parser.add_argument("--mode", choices=["chorus", "gloo", "nosync"], required=True)
    parser.add_argument("--store", required=True, help="path of the FileStore for this run")
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--warmup", type=int, required=True)
    args = parser.parse_args()
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)
    if args.mode == "chorus":
        import chorus_torch  # noqa: F401  (registers the backend)
    backend = "gloo" if args.mode == "nosync" else args.mode
    dist.init_process_group(backend, init_method="file://" + args.store, rank=rank, world_size=size)
    step_s, cpu_s, loss, params = train(args, rank)
    report = {"rank": rank, "step_s": step_s, "cpu_s": cpu_s, "loss": loss}
    if rank == 0:
        report.update(params=params, torch=torch.__version__, blas=loaded_blas(),
                      threads=torch.get_num_threads(), data=models.data_source(args.model))
    print(json.dumps(report), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

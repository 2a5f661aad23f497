#!/usr/bin/python3
"""PyTorch's own DDP on gloo, for comparison with chorus-train (bench/ddp/compare.py).

Launched by `python3 -m torch.distributed.run --nproc_per_node N torch_ddp.py ...`. Trains
the same model as `chorus-train --model mlp` (784-H x L-10, ReLU, SGD momentum 0.9, lr 0.05)
on the same Fashion-MNIST data with the same per-rank batch, one torch thread per rank, and
prints one line that compare.py parses:
    summary steps=S samples_per_s=X step_ms_median=Y
Step times are taken on rank 0 after a warm-up, each step ending after the optimizer step.
"""
import argparse
import gzip
import os
import statistics
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

DATA = os.environ.get("CHORUS_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")


def load_images():
    with gzip.open(os.path.join(DATA, "train-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
    with gzip.open(os.path.join(DATA, "train-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    return torch.from_numpy(images.copy()), torch.from_numpy(labels.astype(np.int64))


def mlp(hidden, layers):
    modules, width = [], 784
    for _ in range(layers):
        modules += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    modules.append(nn.Linear(width, 10))
    return nn.Sequential(*modules)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--no-sync", action="store_true", help="no DDP: same compute, no all-reduce")
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1)
    images, labels = load_images()
    model = mlp(args.hidden, args.layers)
    if not args.no_sync:
        model = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    generator = torch.Generator().manual_seed(1)
    order = torch.randperm(len(labels), generator=generator)
    times, losses = [], []
    for step in range(args.steps):
        start = (step * size + rank) * args.batch % (len(labels) - args.batch)
        index = order[start:start + args.batch]
        x = (images[index].float() / 255.0 - 0.2860) / 0.3530
        begin = time.perf_counter()
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), labels[index])
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - begin)
        losses.append(loss.item())
    steady = times[args.warmup:] if len(times) > args.warmup else times
    median = statistics.median(steady)
    if rank == 0:
        print(f"summary steps={args.steps} samples_per_s={args.batch * size / median:.1f} "
              f"step_ms_median={median * 1e3:.2f} first_loss={losses[0]:.4f} "
              f"last_loss={losses[-1]:.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""DDP training step time with the chorus and gloo backends, against the same
training with no gradient synchronisation at all (the overlap bound).

    PYTHONPATH=<build>/python /usr/bin/python3 bench/torch_ddp/ddp_bench.py \
        [--models mlp,transformer,lstm] [--ranks 2,4] [--steps 20] [--repeats 3]

For every (model, ranks) it runs, in this order and in one invocation: DDP on
chorus, DDP on gloo, and "nosync" (the same model and data without DDP; ranks
still run side by side so they share the cores the same way). Each rank is a
process with OMP_NUM_THREADS=1. A run times `repeats` blocks of `steps` steps
after warm-up; the printed step time is the median block's mean, on rank 0.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist


def make_model(name):
    """(model, batch maker, loss) for one rank's share of the global batch."""
    torch.manual_seed(0)
    if name == "mlp":
        layers = []
        for i in range(4):
            layers += [torch.nn.Linear(1024, 1024), torch.nn.ReLU()] if i < 3 else [torch.nn.Linear(1024, 10)]
        model = torch.nn.Sequential(*layers)
        return model, lambda: (torch.randn(32, 1024), torch.randint(0, 10, (32,))), 32
    if name == "transformer":
        return TinyLM(), lambda: (torch.randint(0, 1000, (8, 64)), torch.randint(0, 1000, (8, 64))), 8
    if name == "lstm":
        return TinyLSTM(), lambda: (torch.randint(0, 1000, (16, 32)), torch.randint(0, 1000, (16, 32))), 16
    raise ValueError(name)


class TinyLM(torch.nn.Module):
    """A 2-layer transformer encoder LM: d_model 128, 4 heads, vocab 1000."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(1000, 128)
        layer = torch.nn.TransformerEncoderLayer(128, 4, 512, batch_first=True)
        self.body = torch.nn.TransformerEncoder(layer, 2)
        self.head = torch.nn.Linear(128, 1000)

    def forward(self, tokens):
        return self.head(self.body(self.embed(tokens))).flatten(0, 1)


class TinyLSTM(torch.nn.Module):
    """A 2-layer LSTM LM: embedding 128, hidden 256, vocab 1000."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(1000, 128)
        self.lstm = torch.nn.LSTM(128, 256, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(256, 1000)

    def forward(self, tokens):
        return self.head(self.lstm(self.embed(tokens))[0]).flatten(0, 1)


def worker(args):
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)
    if args.mode != "nosync":
        if args.mode == "chorus":
            import chorus_torch  # noqa: F401
        dist.init_process_group(args.mode, init_method="file://" + args.store, rank=rank, world_size=size)
    model, batch, per_rank = make_model(args.model)
    if args.mode != "nosync":
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = [batch() for _ in range(4)]

    def step(i):
        x, y = data[i % len(data)]
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y.flatten()).backward()
        opt.step()

    for i in range(3):
        step(i)
    blocks = []
    for _ in range(args.repeats):
        if args.mode != "nosync":
            dist.barrier()
        start = time.perf_counter()
        for i in range(args.steps):
            step(i)
        blocks.append((time.perf_counter() - start) / args.steps)
    if rank == 0:
        print(json.dumps({"step_s": statistics.median(blocks), "per_rank": per_rank}), flush=True)
    if args.mode != "nosync":
        dist.destroy_process_group()


def launch(model, ranks, mode, args):
    """Runs one configuration on `ranks` processes; returns rank 0's report."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, WORLD_SIZE=str(ranks), OMP_NUM_THREADS="1")
        cmd = [sys.executable, __file__, "--worker", "--model", model, "--mode", mode,
               "--store", os.path.join(tmp, "store"), "--steps", str(args.steps),
               "--repeats", str(args.repeats)]
        procs = [subprocess.Popen(cmd, env=dict(env, RANK=str(r)), stdout=subprocess.PIPE, text=True)
                 for r in range(ranks)]
        outputs = [p.communicate(timeout=900)[0] for p in procs]
        if any(p.returncode for p in procs):
            raise RuntimeError("{} {} ranks {} failed".format(model, mode, ranks))
        return json.loads(outputs[0].strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="mlp,transformer,lstm")
    parser.add_argument("--ranks", default="2,4")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    print("{:<12}{:>6}{:>9}{:>12}{:>12}{:>14}{:>14}".format(
        "model", "ranks", "backend", "step ms", "samples/s", "vs nosync", "gloo/chorus"))
    for model in args.models.split(","):
        for ranks in [int(r) for r in args.ranks.split(",")]:
            runs = {mode: launch(model, ranks, mode, args) for mode in ("chorus", "gloo", "nosync")}
            for mode, run in runs.items():
                step = run["step_s"]
                ratio = step / runs["nosync"]["step_s"]
                speed = runs["gloo"]["step_s"] / step if mode == "chorus" else float("nan")
                print("{:<12}{:>6}{:>9}{:>12.2f}{:>12.1f}{:>14.3f}{:>14.3f}".format(
                    model, ranks, mode, step * 1e3, run["per_rank"] * ranks / step, ratio, speed),
                    flush=True)


if __name__ == "__main__":
    sys.exit(main())

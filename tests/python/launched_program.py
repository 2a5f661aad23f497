"""A PyTorch program as users write one for chorusrun: env:// rendezvous (torch's own TCPStore on
MASTER_ADDR:MASTER_PORT), the "chorus" backend, then an all-reduce, one DDP step and an
all-gather, each checked against a closed form or a single-process reference.

    chorusrun -n 3 launched_program.py

Prints "rank R of W: ok" and exits 0 when every check holds; an AssertionError otherwise.
"""

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import chorus_torch  # noqa: F401  (registers the backend)


def check_all_reduce(rank, world):
    tensor = torch.arange(6, dtype=torch.float32) + rank
    dist.all_reduce(tensor)
    expected = world * torch.arange(6, dtype=torch.float32) + world * (world - 1) / 2
    assert torch.equal(tensor, expected), (rank, tensor, expected)


def batch_of(rank):
    """Rank `rank`'s inputs and targets, the same whichever process computes them."""
    generator = torch.Generator().manual_seed(1000 + rank)
    return torch.randn(4, 3, generator=generator), torch.randn(4, 2, generator=generator)


def check_ddp_step(rank, world):
    torch.manual_seed(7)
    reference = torch.nn.Linear(3, 2)
    model = DistributedDataParallel(torch.nn.Linear(3, 2))
    model.module.load_state_dict(reference.state_dict())
    inputs, targets = batch_of(rank)
    torch.nn.functional.mse_loss(model(inputs), targets).backward()
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    # One process, every rank's batch: the mean of the per-rank losses has DDP's mean gradient.
    losses = [torch.nn.functional.mse_loss(reference(x), y) for x, y in map(batch_of, range(world))]
    (sum(losses) / world).backward()
    torch.optim.SGD(reference.parameters(), lr=0.1).step()
    for got, want in zip(model.module.parameters(), reference.parameters()):
        assert torch.allclose(got, want, atol=1e-6), (rank, got, want)


def check_all_gather(rank, world):
    parts = [torch.empty(2, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(parts, torch.tensor([rank, 10 * rank]))
    for r, part in enumerate(parts):
        assert part.tolist() == [r, 10 * r], (rank, r, part)


def main():
    torch.set_num_threads(1)
    dist.init_process_group("chorus")  # env:// from chorusrun's RANK, WORLD_SIZE, MASTER_*
    rank, world = dist.get_rank(), dist.get_world_size()
    assert (rank, world) == (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    check_all_reduce(rank, world)
    check_ddp_step(rank, world)
    check_all_gather(rank, world)
    dist.destroy_process_group()
    # One write of the whole line: the ranks share chorusrun's output, and print() may write
    # the text and its newline separately, so two ranks' lines could interleave.
    os.write(1, "rank {} of {}: ok\n".format(rank, world).encode())


if __name__ == "__main__":
    main()

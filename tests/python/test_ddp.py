"""DistributedDataParallel on the chorus backend: after N steps the parameters
equal a single-process run on the same global batch (within tolerance) and the
same DDP run on gloo."""

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from harness import run_ranks

STEPS = 6
GLOBAL_BATCH = 12  # divisible by 2 and 3


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32),
                               torch.nn.ReLU(), torch.nn.Linear(32, 4))


def _batch(step):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(GLOBAL_BATCH, 8, generator=g), torch.randn(GLOBAL_BATCH, 4, generator=g)


def _train(model, step_inputs):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for x, y in step_inputs:
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def _ddp_rank(rank, size, bucket_mb):
    # A small bucket cap splits the gradients over several buckets (several all-reduces).
    model = DistributedDataParallel(_model(), bucket_cap_mb=bucket_mb)
    per = GLOBAL_BATCH // size
    shards = []
    for step in range(STEPS):
        x, y = _batch(step)
        shards.append((x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]))
    return _train(model, shards)


def _reference():
    return _train(_model(), [_batch(step) for step in range(STEPS)])


@pytest.mark.parametrize("size", [2, 3])
def test_ddp_matches_single_process_and_gloo(size):
    reference = _reference()
    ours = run_ranks(_ddp_rank, size, "chorus", args=(0.001,))
    gloo = run_ranks(_ddp_rank, size, "gloo", args=(0.001,))
    for rank in range(size):
        for mine, ref, theirs in zip(ours[rank], reference, gloo[rank]):
            assert torch.allclose(mine, ref, rtol=1e-4, atol=1e-5), (mine - ref).abs().max()
            assert torch.allclose(mine, theirs, rtol=1e-5, atol=1e-6), (mine - theirs).abs().max()
    # Every rank holds the same parameters.
    for rank in range(1, size):
        assert all(torch.equal(a, b) for a, b in zip(ours[0], ours[rank]))


"""PyTorch's own sharding on the chorus backend (torch 1.13, CPU).

ZeroRedundancyOptimizer trains like gloo and like one process; FSDP is blocked by torch
itself on a CPU-only build (each block asserted with torch's error), and the part of it that
runs on CPU, its flat-parameter sharding and its collectives (`_all_gather_base` of the
shards, its default `reduce_scatter_hook`), trains like one process on chorus, where gloo
has neither collective."""

import pytest
import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel

import fsdp_pieces
from harness import run_ranks

STEPS = 5
GLOBAL_BATCH = 12  # divisible by 2 and 3

# (optimizer class, its options, parameters_as_bucket_view)
CONFIGS = [
    (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}, False),
    (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}, True),
    (torch.optim.Adam, {"lr": 0.01}, False),
    (torch.optim.Adam, {"lr": 0.01}, True),
]


def _model():
    # 8 parameters of uneven sizes, 1,345 elements: no rank's partition equals another's.
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 24), torch.nn.Tanh(), torch.nn.Linear(24, 40),
                               torch.nn.ReLU(), torch.nn.Linear(40, 3),
                               torch.nn.LayerNorm(3))


def _batch(step):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(GLOBAL_BATCH, 8, generator=g), torch.randn(GLOBAL_BATCH, 3, generator=g)


def _local(step, rank, size):
    per = GLOBAL_BATCH // size
    x, y = _batch(step)
    return x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]


def _reference(optimizer_class, options):
    """One process, the whole batch: parameters and optimizer state after STEPS steps."""
    model = _model()
    opt = optimizer_class(model.parameters(), **options)
    for step in range(STEPS):
        x, y = _batch(step)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()], opt.state_dict()["state"]


def _zero_rank(rank, size):
    """Every config: DDP + ZeroRedundancyOptimizer for STEPS steps. Returns per config the
    parameters, the elements this rank's optimizer steps, and (rank 0) the consolidated state."""
    results = []
    for optimizer_class, options, bucket_view in CONFIGS:
        model = DistributedDataParallel(_model())
        zero = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=optimizer_class,
                                       parameters_as_bucket_view=bucket_view, **options)
        for step in range(STEPS):
            x, y = _local(step, rank, size)
            zero.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            zero.step()
        owned = sum(p.numel() for group in zero.optim.param_groups for p in group["params"])
        zero.consolidate_state_dict(to=0)
        state = zero.state_dict()["state"] if rank == 0 else None
        results.append(([p.detach().clone() for p in model.parameters()], owned, state))
    return results


def _close_state(mine, reference):
    assert sorted(mine) == sorted(reference)
    for index, entries in reference.items():
        for key, value in entries.items():
            if torch.is_tensor(value) and value.numel() > 1:
                assert torch.allclose(mine[index][key], value, rtol=1e-4, atol=1e-5), (index, key)
            else:
                assert float(mine[index][key]) == float(value), (index, key)


@pytest.mark.parametrize("size", [2, 3])
def test_zero_redundancy_optimizer_matches_gloo_and_single_process(size):
    """SGD with momentum and Adam, with and without the bucket view: after 5 steps every rank
    holds gloo's parameters and the one-process run's, each rank's optimizer steps only its
    partition, and the consolidated optimizer state is the one-process optimizer's."""
    ours = run_ranks(_zero_rank, size, "chorus", timeout=240)
    gloo = run_ranks(_zero_rank, size, "gloo", timeout=240)
    total = sum(p.numel() for p in _model().parameters())
    for c, (optimizer_class, options, _) in enumerate(CONFIGS):
        reference, reference_state = _reference(optimizer_class, options)
        for rank in range(size):
            params, owned, _ = ours[rank][c]
            for mine, ref, theirs in zip(params, reference, gloo[rank][c][0]):
                assert torch.allclose(mine, theirs, rtol=1e-5, atol=1e-6), (c, rank)
                assert torch.allclose(mine, ref, rtol=1e-4, atol=1e-5), (c, rank)
            assert 0 < owned < total, (c, rank, owned)
            assert owned == gloo[rank][c][1]
        assert sum(ours[rank][c][1] for rank in range(size)) == total
        _close_state(ours[0][c][2], reference_state)


def _overlap_rank(rank, size):
    from torch.distributed.algorithms.ddp_comm_hooks.ddp_zero_hook import hook_with_zero_step
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    model = DistributedDataParallel(_model())
    zero = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.SGD, lr=0.1,
                                   overlap_with_ddp=True)
    try:
        model.register_comm_hook(None, hook_with_zero_step(allreduce_hook, model, zero))
    except RuntimeError as e:
        return str(e)
    return None


def test_zero_overlap_with_ddp_is_nccl_only():
    """torch 1.13 refuses ZeroRedundancyOptimizer(overlap_with_ddp=True)'s hook on every
    backend but NCCL and HCCL (the error the README quotes)."""
    for error in run_ranks(_overlap_rank, 2, "chorus", timeout=120):
        assert error is not None and "requires NCCL/HCCL backend" in error, error


def _fsdp_constructor_rank(rank, size):
    fsdp = fsdp_pieces.import_fsdp()
    try:
        fsdp.FullyShardedDataParallel(_model())
    except AssertionError as e:
        return str(e)
    return None


def test_fsdp_is_blocked_on_cpu_by_torch():
    """The two errors the README quotes: the import under Python 3.11, and (past it) the
    constructor on a chorus group, which asks for a CUDA device before any collective."""
    error = fsdp_pieces.plain_import_error()
    if error is not None:  # Python 3.11 (Debian 12); 3.10 imports it
        assert error.startswith("ValueError: " + fsdp_pieces.IMPORT_ERROR), error
    for error in run_ranks(_fsdp_constructor_rank, 2, "chorus", timeout=120):
        assert error == "Torch not compiled with CUDA enabled", error


def _flat_handle(model):
    """FSDP's FlatParamHandle over the whole model (one FULL_SHARD unit), sharded."""
    fsdp = fsdp_pieces.import_fsdp()
    from torch.distributed.fsdp.flat_param import (FlatParamHandle, HandleConfig,
                                                   HandleShardingStrategy)
    del fsdp
    config = HandleConfig(HandleShardingStrategy.FULL_SHARD, False, None, None)
    handle = FlatParamHandle(list(model.parameters()), model, torch.device("cpu"), config)
    handle.shard(dist.distributed_c10d._get_default_group())
    return handle


def _fsdp_pieces_rank(rank, size):
    """FSDP's FULL_SHARD step from its own pieces: the handle's `_all_gather_flat_param`
    (`dist._all_gather_base`) before the forward, the default `reduce_scatter_hook`
    (`dist._reduce_scatter_base`, pre- and post-divided) after the backward, SGD on the shard."""
    from torch.distributed.algorithms._comm_hooks import default_hooks
    model = _model()
    handle = _flat_handle(model)
    flat = handle.flat_param
    shard = flat.data
    state = default_hooks.DefaultState(dist.distributed_c10d._get_default_group())
    opt = torch.optim.SGD([flat], lr=0.1, momentum=0.9)
    for step in range(STEPS):
        x, y = _local(step, rank, size)
        opt.zero_grad(set_to_none=True)
        handle._all_gather_flat_param(torch.empty(shard.numel() * size))
        handle._unflatten(as_params=False)  # the module's parameters: views of the whole
        torch.nn.functional.mse_loss(model(x), y).backward()
        grad = torch.nn.functional.pad(flat.grad, [0, shard.numel() * size - flat.grad.numel()])
        out = torch.empty_like(shard)
        default_hooks.reduce_scatter_hook(state, grad, out)
        flat.data, flat.grad = shard, out
        opt.step()
    whole = torch.empty(shard.numel() * size)
    dist._all_gather_base(whole, shard)
    return [v.clone() for v in handle._get_unflat_views(flat, whole[:sum(flat._numels)])]


def _gloo_lacks_rank(rank, size):
    errors = []
    for call in (lambda: dist._all_gather_base(torch.empty(4), torch.ones(2)),
                 lambda: dist._reduce_scatter_base(torch.empty(2), torch.ones(4))):
        try:
            call()
            errors.append(None)
        except RuntimeError as e:
            errors.append(str(e))
    return errors


@pytest.mark.parametrize("size", [2, 3])
def test_fsdp_sharding_and_collectives_train_like_one_process(size):
    """FSDP's flat parameter (1,345 elements: padded on 2 and 3 ranks), gathered and
    reduce-scattered by FSDP's own code on chorus, trains like one process; gloo (1.13) has
    neither collective."""
    ours = run_ranks(_fsdp_pieces_rank, size, "chorus", timeout=120)
    reference, _ = _reference(torch.optim.SGD, {"lr": 0.1, "momentum": 0.9})
    for rank in range(size):
        for mine, ref in zip(ours[rank], reference):
            assert torch.allclose(mine, ref, rtol=1e-4, atol=1e-5), (mine - ref).abs().max()
    if size == 2:
        for gather, scatter in run_ranks(_gloo_lacks_rank, 2, "gloo", timeout=120):
            assert "no support for _allgather_base" in gather, gather
            assert "does not support _reduce_scatter_base" in scatter, scatter

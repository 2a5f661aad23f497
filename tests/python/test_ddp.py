"""DistributedDataParallel on the chorus backend: after N steps the parameters
equal a single-process run on the same global batch (within tolerance) and the
same DDP run on gloo."""

import os
import re
import time
from datetime import timedelta

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


def _register(model, hook):
    """`hook`: None (DDP's own averaging), "python" (chorus_torch.allreduce_avg_hook) or "cpp"
    (chorus_torch.register_avg_hook)."""
    import chorus_torch
    if hook == "python":
        model.register_comm_hook(None, chorus_torch.allreduce_avg_hook)
    elif hook == "cpp":
        chorus_torch.register_avg_hook(model)


def _ddp_rank(rank, size, bucket_mb, hook=None, bucket_view=False):
    # A small bucket cap splits the gradients over several buckets (several all-reduces).
    model = DistributedDataParallel(_model(), bucket_cap_mb=bucket_mb,
                                    gradient_as_bucket_view=bucket_view)
    _register(model, hook)
    per = GLOBAL_BATCH // size
    shards = []
    for step in range(STEPS):
        x, y = _batch(step)
        shards.append((x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]))
    return _train(model, shards)


def _reference():
    return _train(_model(), [_batch(step) for step in range(STEPS)])


@pytest.mark.parametrize("hook,bucket_view", [(None, False), ("python", False), ("python", True),
                                              ("cpp", False), ("cpp", True)])
@pytest.mark.parametrize("size", [2, 3])
def test_ddp_matches_single_process_and_gloo(size, hook, bucket_view):
    """DDP on chorus (with an averaging hook, ReduceOp.AVG in the backend instead of DDP's own
    division, when `hook`) trains like the single process and like gloo without a hook."""
    reference = _reference()
    ours = run_ranks(_ddp_rank, size, "chorus", args=(0.001, hook, bucket_view))
    gloo = run_ranks(_ddp_rank, size, "gloo", args=(0.001, None, bucket_view))
    for rank in range(size):
        for mine, ref, theirs in zip(ours[rank], reference, gloo[rank]):
            assert torch.allclose(mine, ref, rtol=1e-4, atol=1e-5), (mine - ref).abs().max()
            assert torch.allclose(mine, theirs, rtol=1e-5, atol=1e-6), (mine - theirs).abs().max()
    # Every rank holds the same parameters.
    for rank in range(1, size):
        assert all(torch.equal(a, b) for a, b in zip(ours[0], ours[rank]))


def _wide_model():
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(8, 160), torch.nn.Tanh(), torch.nn.Linear(160, 160),
                               torch.nn.ReLU(), torch.nn.Linear(160, 4))


def _ddp_wide_rank(rank, size, hook=None, shm_full=False):
    # Default buckets: one of ~100 KB, past the size CHORUS_TORCH_SHARED_BUCKETS moves.
    if shm_full:
        # No file may grow past 4 KiB: creating a shared segment fails (EFBIG) on rank 0,
        # which makes alloc_shared fail on every rank alike.
        import resource
        import signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))
    model = DistributedDataParallel(_wide_model(), gradient_as_bucket_view=hook is not None)
    _register(model, hook)
    per = GLOBAL_BATCH // size
    shards = []
    for step in range(STEPS):
        x, y = _batch(step)
        shards.append((x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]))
    params = _train(model, shards)
    group = dist.distributed_c10d._get_default_group()
    return params, group.last_algorithm() if hasattr(group, "last_algorithm") else None


@pytest.mark.parametrize("shared,hook,shm_full,expected", [
    ("0", None, False, "shm_direct"),
    ("1", None, False, "shm_window"),
    ("0", "python", False, "shm_window"),
    ("0", "python", True, "shm_direct"),
    ("0", "cpp", False, "shm_window"),
    ("0", "cpp", True, "shm_direct"),
])
def test_ddp_buckets_in_shared_memory(shared, hook, shm_full, expected, monkeypatch):
    """CHORUS_TORCH_SHARED_BUCKETS=1, or an averaging hook (either) without it, moves
    DDP's buckets into host-shared memory: the all-reduces run in place in the peers' buckets
    (shm_window) and train exactly as gloo. When the host's shared memory cannot hold them,
    the hook leaves them where they are and DDP trains the same (shm_direct)."""
    monkeypatch.setenv("CHORUS_TORCH_SHARED_BUCKETS", shared)
    ours = run_ranks(_ddp_wide_rank, 2, "chorus", args=(hook, shm_full))
    gloo = run_ranks(_ddp_wide_rank, 2, "gloo")
    reference = _train(_wide_model(), [_batch(step) for step in range(STEPS)])
    for rank in range(2):
        params, algorithm = ours[rank]
        assert algorithm == expected, algorithm
        for mine, ref, theirs in zip(params, reference, gloo[rank][0]):
            assert torch.allclose(mine, ref, rtol=1e-4, atol=1e-5), (mine - ref).abs().max()
            assert torch.allclose(mine, theirs, rtol=1e-5, atol=1e-6), (mine - theirs).abs().max()


def _bad_setting_rank(rank, size):
    return None


def test_shared_buckets_setting_is_checked(monkeypatch):
    monkeypatch.setenv("CHORUS_TORCH_SHARED_BUCKETS", "yes")
    with pytest.raises(AssertionError, match="CHORUS_TORCH_SHARED_BUCKETS"):
        run_ranks(_bad_setting_rank, 2, "chorus", timeout=60)


def _misuse_rank(rank, size):
    """register_avg_hook's refusals, each with the error's message."""
    import chorus_torch
    errors = []
    for target in ("module", "gloo group", "second hook"):
        model = DistributedDataParallel(_model())
        try:
            if target == "module":
                chorus_torch.register_avg_hook(model.module)
            elif target == "gloo group":
                chorus_torch.register_avg_hook(model, dist.new_group(backend="gloo"))
            else:
                chorus_torch.register_avg_hook(model)
                chorus_torch.register_avg_hook(model)
        except Exception as e:  # noqa: BLE001 - the message is what is checked
            errors.append(str(e))
        else:
            errors.append(None)
    return errors


def test_register_avg_hook_refuses_misuse():
    """A model that is not DDP, a group that is not chorus, and a second hook each fail with an
    error naming the problem (on every rank of a 2-rank job)."""
    for errors in run_ranks(_misuse_rank, 2, "chorus", timeout=60):
        module, gloo, second = errors
        assert module is not None and "needs a DistributedDataParallel model" in module, module
        assert gloo is not None and "needs a chorus process group" in gloo, gloo
        assert second is not None and "can only be called once" in second, second


def _absent_peer_rank(rank, size, hook, directory):
    """One step together, then rank 1 stays out of the next: rank 0's backward must fail."""
    model = DistributedDataParallel(_model(), gradient_as_bucket_view=True)
    _register(model, hook)
    x, y = _batch(0)
    torch.nn.functional.mse_loss(model(x), y).backward()
    if rank == 1:
        # Stay alive (a timeout, not a dead peer) until rank 0 has seen its failure.
        until = time.monotonic() + 60
        while not os.path.exists(os.path.join(directory, "done")) and time.monotonic() < until:
            time.sleep(0.02)
        return None
    loss = torch.nn.functional.mse_loss(model(x), y)
    start = time.monotonic()
    try:
        loss.backward()
        error = None
    except RuntimeError as e:
        error = str(e)
    elapsed = time.monotonic() - start
    open(os.path.join(directory, "done"), "w").close()
    return elapsed, error


@pytest.mark.parametrize("hook", [None, "python", "cpp"])
def test_ddp_step_fails_in_time_without_its_peer(hook, tmp_path):
    """A rank whose peer stays out of a DDP step gets the all-reduce's failure out of
    backward() within the group's timeout, naming the absent rank, with any hook."""
    timeout = 2.0
    results = run_ranks(_absent_peer_rank, 2, "chorus", args=(hook, str(tmp_path)), timeout=60,
                        init_timeout=timedelta(seconds=timeout))
    elapsed, error = results[0]
    assert error is not None, "backward() did not fail"
    assert timeout - 0.5 <= elapsed <= timeout + 3.0, (elapsed, error)
    assert re.search(r"\brank 1\b", error), error

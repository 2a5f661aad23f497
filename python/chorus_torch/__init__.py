"""The torch.distributed backend "chorus".

Importing this package registers the backend, after which

    import chorus_torch
    torch.distributed.init_process_group("chorus", ...)

runs every collective of that process group on a Chorus communicator
(CPU tensors; see python/README.md for what is supported).
"""

import torch.distributed as _dist
from torch.nn.parallel import DistributedDataParallel as _DistributedDataParallel

from . import _C
from ._bootstrap import create_process_group as _create

ProcessGroupChorus = _C.ProcessGroupChorus

__all__ = ["ProcessGroupChorus", "allreduce_avg_hook", "register_avg_hook"]


def allreduce_avg_hook(process_group, bucket):
    """A DistributedDataParallel communication hook: each bucket is averaged by one all-reduce
    with ReduceOp.AVG, whose division Chorus folds into the reduction.

        model.register_comm_hook(None, chorus_torch.allreduce_avg_hook)

    `register_avg_hook(model)` registers the same hook in C++, with no Python per bucket (about
    1.5% of the MLP benchmark's step); this one is for programs that wrap or compose hooks.

    Without a hook, DDP divides every gradient by the world size itself before a SUM
    all-reduce: a pass over all gradients each step (with gradient_as_bucket_view=True a
    separate one, about 1 ms per 12 MB here). `process_group` is the hook's state: the group
    to average over, None for DDP's own (the default group).

    On a chorus group, a bucket of at least 64 KiB is moved into host-shared memory on its
    first all-reduce (as CHORUS_TORCH_SHARED_BUCKETS=1 does for any all-reduced tensor), so
    its all-reduces run in place in the peers' buckets. Safe here without the setting: the
    bucket is DDP's own, and nothing outside DDP points into it by raw pointer. When the
    host's shared memory cannot hold it, the bucket stays where it is."""
    group = process_group if process_group is not None else _dist.group.WORLD
    buffer = bucket.buffer()
    if isinstance(group, ProcessGroupChorus):
        group._share_bucket(buffer)
    work = _dist.all_reduce(buffer, op=_dist.ReduceOp.AVG, group=group, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])


def register_avg_hook(model, process_group=None):
    """Registers on `model` (a DistributedDataParallel) what `allreduce_avg_hook` does, as a
    C++ communication hook: each bucket is averaged by one all-reduce with ReduceOp.AVG over
    `process_group` (None: DDP's own, the default group), moved into host-shared memory first
    as the Python hook does.

        model = DistributedDataParallel(model, gradient_as_bucket_view=True)
        chorus_torch.register_avg_hook(model)

    Unlike `model.register_comm_hook(None, allreduce_avg_hook)`, no bucket runs Python code:
    the Python hook takes the GIL three times per bucket (the hook's call, its `.then`
    callback on the backend's completion thread, DDP reading the callback's result). The
    group must be a chorus group; DDP takes one hook, so this fails if `model` has one."""
    if not isinstance(model, _DistributedDataParallel):
        raise TypeError("chorus_torch.register_avg_hook needs a DistributedDataParallel model, got "
                        + type(model).__name__)
    group = process_group if process_group is not None else _dist.group.WORLD
    if not isinstance(group, ProcessGroupChorus):
        raise TypeError("chorus_torch.register_avg_hook needs a chorus process group, got "
                        + type(group).__name__)
    _C._register_avg_hook(model.reducer, group)
    model.logger._set_comm_hook_name("chorus_torch.register_avg_hook")


if not hasattr(_dist.Backend, "CHORUS"):
    _dist.Backend.register_backend("chorus", _create)

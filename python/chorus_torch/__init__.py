"""The torch.distributed backend "chorus".

Importing this package registers the backend, after which

    import chorus_torch
    torch.distributed.init_process_group("chorus", ...)

runs every collective of that process group on a Chorus communicator
(CPU tensors; see python/README.md for what is supported).
"""

import torch.distributed as _dist

from . import _C
from ._bootstrap import create_process_group as _create

ProcessGroupChorus = _C.ProcessGroupChorus

__all__ = ["ProcessGroupChorus", "allreduce_avg_hook"]


def allreduce_avg_hook(process_group, bucket):
    """A DistributedDataParallel communication hook: each bucket is averaged by one all-reduce
    with ReduceOp.AVG, whose division Chorus folds into the reduction.

        model.register_comm_hook(None, chorus_torch.allreduce_avg_hook)

    Without a hook, DDP divides every gradient by the world size itself before a SUM
    all-reduce: a pass over all gradients each step (with gradient_as_bucket_view=True a
    separate one, about 1 ms per 12 MB here). `process_group` is the hook's state: the group
    to average over, None for DDP's own (the default group)."""
    group = process_group if process_group is not None else _dist.group.WORLD
    work = _dist.all_reduce(bucket.buffer(), op=_dist.ReduceOp.AVG, group=group, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])

if not hasattr(_dist.Backend, "CHORUS"):
    _dist.Backend.register_backend("chorus", _create)

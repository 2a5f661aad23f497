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

__all__ = ["ProcessGroupChorus"]

if not hasattr(_dist.Backend, "CHORUS"):
    _dist.Backend.register_backend("chorus", _create)

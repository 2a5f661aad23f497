"""torch 1.13's FSDP package, imported past its Python 3.11 failure, for the sharding tests.

Under Python 3.11 `import torch.distributed.fsdp` raises

    ValueError: mutable default <class '...TensorProperties'> for field tensor_properties is
    not allowed: use default_factory

because 1.13's `TensorProperties` dataclass gives torch.dtype/layout/memory_format objects
(unhashable, which 3.11 takes for mutable) as plain defaults; torch 2.0 gives them as
default_factory. `import_fsdp()` imports the package with exactly that change, made by
`dataclasses` while the import runs and undone after it, so the tests can reach what FSDP
itself does on a CPU-only torch.
"""

import dataclasses
import importlib
import subprocess
import sys

IMPORT_ERROR = "mutable default"


def plain_import_error():
    """The error `import torch.distributed.fsdp` raises in a fresh interpreter, or None."""
    code = ("try:\n    import torch.distributed.fsdp\nexcept Exception as e:\n"
            "    print(type(e).__name__ + ': ' + str(e))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout.strip()
    return out or None


def import_fsdp():
    """torch.distributed.fsdp, with unhashable dataclass defaults turned into factories."""
    original = dataclasses._get_field

    def get_field(cls, name, *rest):
        field = cls.__dict__.get(name)
        if (isinstance(field, dataclasses.Field) and field.default is not dataclasses.MISSING
                and field.default.__class__.__hash__ is None):
            value = field.default
            field.default = dataclasses.MISSING
            field.default_factory = lambda: value
        return original(cls, name, *rest)

    dataclasses._get_field = get_field
    try:
        return importlib.import_module("torch.distributed.fsdp")
    finally:
        dataclasses._get_field = original

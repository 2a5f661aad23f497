"""The OpenBLAS kernels every benchmark rank that runs torch gets (scripts/openblas-coretype.sh).

Debian 12's OpenBLAS falls back to its generic kernels on CPUs it does not know, which makes
torch's matrix products 3-4x slower; the benchmarks would then measure that, not
communication. `openblas_env()` is what to add to a rank's environment.
"""

import functools
import os
import subprocess

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "openblas-coretype.sh")


@functools.lru_cache(maxsize=None)
def openblas_env():
    """{"OPENBLAS_CORETYPE": name} when this machine needs one and the environment sets none."""
    if "OPENBLAS_CORETYPE" in os.environ:
        return {}
    core = subprocess.run([SCRIPT], capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    return {"OPENBLAS_CORETYPE": core} if core else {}

"""scripts/openblas-coretype.sh: names OpenBLAS kernels exactly when OpenBLAS would fall back to its
generic ones on a CPU that allows better, and OpenBLAS runs the named kernels."""

import os
import subprocess

import pytest
import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCRIPT = os.path.join(ROOT, "scripts", "openblas-coretype.sh")
PROBE = """import ctypes
lib = ctypes.CDLL("libopenblas.so.0")
lib.openblas_get_corename.restype = ctypes.c_char_p
print(lib.openblas_get_corename().decode())
"""


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    env.update(extra)
    return env


def _core(**extra):
    return subprocess.run(["/usr/bin/python3", "-c", PROBE], env=_env(**extra), check=True,
                          capture_output=True, text=True, timeout=60).stdout.strip()


def _named():
    """What the script prints, run as it is meant to be: without OPENBLAS_CORETYPE."""
    return subprocess.run([SCRIPT], env=_env(), check=True, capture_output=True, text=True,
                          timeout=60).stdout.strip()


def _flags():
    with open("/proc/cpuinfo") as f:
        return set(next(line for line in f if line.startswith("flags")).split(":", 1)[1].split())


def test_names_kernels_only_where_openblas_falls_back():
    try:
        own = _core()
    except subprocess.CalledProcessError:
        pytest.skip("no libopenblas.so.0")
    named = _named()
    if own != "Prescott" or "avx2" not in _flags():
        assert named == "", (own, named)
        return
    assert named in ("COOPERLAKE", "SKYLAKEX", "HASWELL"), named
    # OpenBLAS takes the name and runs those kernels instead of the generic ones.
    assert _core(OPENBLAS_CORETYPE=named).upper() == named


def test_named_kernels_compute_the_same_products(tmp_path):
    """torch's matrix product with the named kernels equals the generic kernels' (float32 sums
    in another order: within rounding)."""
    named = _named()
    if not named:
        pytest.skip("this machine's OpenBLAS picks its own kernels")
    code = ("import torch; g = torch.Generator().manual_seed(3); a = torch.randn(200, 300, generator=g);"
            "b = torch.randn(300, 170, generator=g); torch.save(a @ b, '{}')")
    out = {}
    for name, env in (("generic", _env()), ("named", _env(OPENBLAS_CORETYPE=named))):
        path = tmp_path / (name + ".pt")
        subprocess.run(["/usr/bin/python3", "-c", code.format(path)], env=env, check=True, timeout=120)
        out[name] = torch.load(path)
    assert torch.allclose(out["generic"], out["named"], rtol=1e-4, atol=1e-4)

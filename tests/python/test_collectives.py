"""Every collective on the chorus backend, at 1..4 ranks, checked against
independently computed values and against the gloo backend's results."""

import pytest
import torch

from collective_suite import suite
from expected_values import expected
from harness import run_ranks


def _close(actual, want, name):
    assert actual.dtype == want.dtype, "{}: dtype {} != {}".format(name, actual.dtype, want.dtype)
    assert actual.shape == want.shape, "{}: shape {} != {}".format(name, actual.shape, want.shape)
    if name.endswith("/avg") and want.dtype in (torch.float16, torch.bfloat16):
        assert torch.allclose(actual.float(), want.float(), rtol=1e-2), name
    else:
        assert torch.equal(actual, want), "{}:\n{}\n!=\n{}".format(name, actual, want)


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_against_independent_values(size):
    results = run_ranks(suite, size, "chorus", args=("chorus",))
    for rank, got in enumerate(results):
        want = expected(rank, size)
        for name, value in got.items():
            _close(value, want[name], "rank {} {}".format(rank, name))
    # Every case ran somewhere (reduce and gather only on their roots).
    names = set().union(*[set(r) for r in results])
    assert names == set(expected(0, size)), set(expected(0, size)) ^ names


@pytest.mark.parametrize("size", [2, 3])
def test_against_gloo(size):
    ours = run_ranks(suite, size, "chorus", args=("gloo",))
    gloo = run_ranks(suite, size, "gloo", args=("gloo",))
    for rank in range(size):
        assert set(ours[rank]) == set(gloo[rank])
        for name, value in gloo[rank].items():
            _close(ours[rank][name], value, "rank {} {} vs gloo".format(rank, name))

"""Point-to-point with tags and any-source, async handles, sub-groups, the
backend name, the errors for unsupported requests, and an argument error on one
rank that leaves the group usable for all."""

import pytest
import torch
import torch.distributed as dist

from harness import run_ranks


def _p2p(rank, size):
    out = {}
    if rank == 0:
        # Tags: the receiver takes tag 7 before tag 3, though 3 was sent first.
        sends = []
        for r in range(1, size):
            sends += [dist.isend(torch.full((4,), 3.0), dst=r, tag=3),
                      dist.isend(torch.full((4,), 7.0), dst=r, tag=7)]
        got = torch.zeros(2, dtype=torch.int64)
        out["sources"] = sorted(dist.recv(got) for _ in range(size - 1))
        for req in sends:
            req.wait()
        reqs = [dist.isend(torch.arange(5, dtype=torch.float64) * r, dst=r) for r in range(1, size)]
        for req in reqs:
            req.wait()
    else:
        late, early = torch.zeros(4), torch.zeros(4)
        dist.recv(early, src=0, tag=7)
        dist.recv(late, src=0, tag=3)
        out["tags"] = (early[0].item(), late[0].item())
        dist.send(torch.full((2,), rank, dtype=torch.int64), dst=0)
        buf = torch.zeros(10, dtype=torch.float64)[::2]  # non-contiguous receive
        req = dist.irecv(buf, src=0)
        req.wait()
        out["irecv"] = buf.clone()
        out["irecv_done"] = req.is_completed()
    return out


def test_point_to_point():
    size = 3
    results = run_ranks(_p2p, size)
    assert results[0]["sources"] == [1, 2]
    for r in range(1, size):
        assert results[r]["tags"] == (7.0, 3.0)
        assert torch.equal(results[r]["irecv"], torch.arange(5, dtype=torch.float64) * r)
        assert results[r]["irecv_done"]


def _async_and_groups(rank, size):
    out = {"backend": dist.get_backend()}
    t = torch.ones(1000) * rank
    work = dist.all_reduce(t, async_op=True)
    assert work.wait()
    out["async_done"] = work.is_completed()
    out["async_value"] = t[0].item()
    fut = dist.all_reduce(torch.ones(3), async_op=True).get_future()
    out["future"] = fut.wait()[0].tolist()
    if size > 1:
        evens = dist.new_group([r for r in range(size) if r % 2 == 0], backend="chorus")
        odds = dist.new_group([r for r in range(size) if r % 2 == 1], backend="chorus")
        mine = evens if rank % 2 == 0 else odds
    else:
        mine = dist.new_group([0], backend="chorus")  # a one-rank group
    s = torch.tensor([float(rank)])
    dist.all_reduce(s, group=mine)
    out["group_sum"] = s.item()
    out["group_backend"] = dist.get_backend(mine)
    dist.barrier()
    return out


@pytest.mark.parametrize("size", [1, 5])
def test_async_and_groups(size):
    results = run_ranks(_async_and_groups, size)
    total = sum(range(size))
    for rank, got in enumerate(results):
        assert got["backend"] == "chorus" and got["group_backend"] == "chorus"
        assert got["async_done"] and got["async_value"] == total
        assert got["future"] == [float(size)] * 3
        assert got["group_sum"] == sum(r for r in range(size) if r % 2 == rank % 2)


def _errors(rank, size):
    messages = {}
    cases = {
        "premul": lambda: dist.all_reduce(torch.ones(2), op=dist.ReduceOp.BXOR),
        "dtype": lambda: dist.all_reduce(torch.ones(2, dtype=torch.int16)),
        "complex_max": lambda: dist.all_reduce(torch.ones(2, dtype=torch.complex64),
                                               op=dist.ReduceOp.MAX),
    }
    for name, call in cases.items():
        try:
            call()
            messages[name] = None
        except RuntimeError as exc:
            messages[name] = str(exc)
    # The communicator still works after argument errors.
    t = torch.ones(1)
    dist.all_reduce(t)
    messages["after"] = t.item()
    return messages


def test_unsupported_requests_name_what_is_missing():
    for got in run_ranks(_errors, 2):
        assert "bitwise" in got["premul"]
        assert "does not support dtype Short" in got["dtype"]
        assert "complex" in got["complex_max"]
        assert got["after"] == 2.0



def _bad_all_to_all_on_rank_0(rank, size):
    out = {"error": None}
    if rank == 0:
        # Rank 0 sends itself 1 row but expects 2 from itself: only it can see that, and it
        # must fail before anything is sent, so the peers (which skip the call) never notice.
        try:
            dist.all_to_all_single(torch.zeros(4), torch.ones(3), [2, 1, 1], [1, 1, 1])
        except RuntimeError as exc:
            out["error"] = str(exc)
    dist.barrier()
    t = torch.full((2,), float(rank + 1))
    dist.all_reduce(t)
    out["after"] = t.tolist()
    return out


def test_an_argument_error_leaves_the_group_usable():
    results = run_ranks(_bad_all_to_all_on_rank_0, 3)
    assert "rank 0 sends 1 elements to itself but expects 2" in results[0]["error"]
    for got in results:
        assert got["after"] == [6.0, 6.0]

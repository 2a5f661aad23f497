"""The answers to collective_suite's cases, computed from the inputs alone."""

import torch

from collective_suite import N, INT_TYPES, FLOAT_TYPES, make_input


def _reduce(values, name, dtype):
    """Element-wise reduction over ranks, in float64/int64, then cast to dtype."""
    wide = torch.stack([v.double() if dtype.is_floating_point else v.long() for v in values])
    if name == "sum":
        result = wide.sum(0)
    elif name == "product":
        result = wide.prod(0)
    elif name == "min":
        result = wide.min(0).values
    elif name == "max":
        result = wide.max(0).values
    else:  # avg: floats divide once; integers truncate the 64-bit sum toward zero
        total = wide.sum(0)
        result = total / len(values) if dtype.is_floating_point else torch.div(
            total, len(values), rounding_mode="trunc")
    return result.to(dtype)


def _reductions(size, exp):
    for dtype in INT_TYPES + FLOAT_TYPES:
        for name in ("sum", "product", "min", "max", "avg"):
            inputs = [make_input(r, N, dtype, small=(name == "product")) for r in range(size)]
            exp["allreduce/{}/{}".format(dtype, name)] = _reduce(inputs, name, dtype)
        exp["reduce/{}".format(dtype)] = _reduce([make_input(r, N, dtype) for r in range(size)],
                                                 "sum", dtype)
    for dtype in (torch.complex64, torch.complex128):
        exp["allreduce/{}/sum".format(dtype)] = sum(make_input(r, N, dtype) for r in range(size))
    bools = torch.stack([make_input(r, N, torch.bool) for r in range(size)])
    exp["allreduce/bool/sum"] = bools.any(0)
    exp["allreduce/bool/max"] = bools.any(0)
    exp["allreduce/bool/min"] = bools.all(0)
    exp["allreduce/big"] = sum(make_input(r, 100003, torch.float64) for r in range(size)).float()
    exp["allreduce/noncontiguous"] = sum(
        make_input(r, 48, torch.float32).view(6, 8).t() for r in range(size)).contiguous()
    exp["allreduce_coalesced/0"] = sum(make_input(r, 5, torch.float32) for r in range(size))
    exp["allreduce_coalesced/1"] = sum(make_input(r, 12, torch.float32) for r in range(size)).view(3, 4)


def _movement(size, exp):
    for dtype in INT_TYPES + FLOAT_TYPES + [torch.bool, torch.complex64]:
        exp["broadcast/{}".format(dtype)] = make_input(size - 1, N, dtype)
        exp["allgather/{}".format(dtype)] = torch.stack([make_input(r, N, dtype) for r in range(size)])
    exp["allgather_base"] = torch.cat([make_input(r, N, torch.float32) for r in range(size)])
    exp["allgather_coalesced"] = torch.cat([torch.cat([make_input(r, 3, torch.float32),
                                                       make_input(r, 4, torch.float32)])
                                            for r in range(size)])
    exp["gather"] = torch.stack([make_input(r, N, torch.float32) for r in range(size)])


def _per_rank(rank, size, exp):
    """Cases whose answer differs by rank."""
    exp["scatter"] = make_input(rank, N, torch.int64) * 10
    # Equal all-to-all: block j of rank r's rows goes to rank j.
    blocks = [make_input(r, size * 2, torch.float32).view(size, 2) + 100 * r for r in range(size)]
    exp["alltoall_single/equal"] = torch.stack([blocks[r][rank] for r in range(size)])
    rows = []
    for r in range(size):
        send = [(r + j) % 3 for j in range(size)]
        src = make_input(r, sum(send) * 3, torch.int32).view(-1, 3) + 100 * r
        start = sum(send[:rank])
        rows.append(src[start:start + send[rank]])
    exp["alltoall_single/uneven"] = torch.cat(rows)
    exp["alltoall_list"] = torch.cat([torch.full((r + rank + 1,), float(10 * r + rank))
                                      for r in range(size)])
    inputs = [make_input(r, N, torch.float64) * (rank + 1) for r in range(size)]
    exp["reduce_scatter/sum"] = sum(inputs).float()
    exp["reduce_scatter/max"] = torch.stack(inputs).max(0).values.float()
    whole = [make_input(r, size * N, torch.float64) for r in range(size)]
    exp["reduce_scatter_tensor"] = sum(whole)[rank * N:(rank + 1) * N].bfloat16()


def expected(rank, size):
    exp = {}
    _reductions(size, exp)
    _movement(size, exp)
    _per_rank(rank, size, exp)
    return exp

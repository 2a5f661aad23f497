"""One rank's run of every collective, and the independently computed answers.

suite(rank, size, backend) runs each operation on inputs from make_input and
returns {case name: result tensor}. expected(size) computes the same cases
from the inputs alone, without any communication. Cases the gloo backend of
torch 1.13 lacks (bf16, bool, complex, AVG, reduce-scatter, all-to-all lists)
run only on chorus.
"""

import torch
import torch.distributed as dist

N = 37  # odd, so no algorithm divides it evenly
INT_TYPES = [torch.int8, torch.uint8, torch.int32, torch.int64]
FLOAT_TYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
GLOO_TYPES = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.float32,
              torch.float64]
OPS = {"sum": dist.ReduceOp.SUM, "product": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
       "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}


def make_input(rank, n, dtype, small=False):
    """Rank-dependent small integers (1..5, or 1..2 when `small`, so products fit)."""
    idx = torch.arange(n, dtype=torch.int64)
    values = (idx + rank) % 2 + 1 if small else (idx * 3 + rank * 5) % 5 + 1
    if dtype == torch.bool:
        return (idx + rank) % 3 == 0
    if dtype.is_complex:
        return torch.complex(values.double(), -values.double() * rank).to(dtype)
    return values.to(dtype)


def _dtypes(backend):
    return GLOO_TYPES if backend == "gloo" else INT_TYPES + FLOAT_TYPES


def _reductions(rank, size, backend, out):
    for dtype in _dtypes(backend):
        for name, op in OPS.items():
            if name == "avg" and backend == "gloo":
                continue
            t = make_input(rank, N, dtype, small=(name == "product"))
            dist.all_reduce(t, op=op)
            out["allreduce/{}/{}".format(dtype, name)] = t
        t = make_input(rank, N, dtype)
        dist.reduce(t, dst=size - 1, op=dist.ReduceOp.SUM)
        if rank == size - 1:
            out["reduce/{}".format(dtype)] = t
    if backend != "gloo":
        for dtype in (torch.complex64, torch.complex128):
            t = make_input(rank, N, dtype)
            dist.all_reduce(t)
            out["allreduce/{}/sum".format(dtype)] = t
        for name in ("sum", "max", "min"):
            t = make_input(rank, N, torch.bool)
            dist.all_reduce(t, op=OPS[name])
            out["allreduce/bool/{}".format(name)] = t
    big = make_input(rank, 100003, torch.float32)
    dist.all_reduce(big)
    out["allreduce/big"] = big
    t = make_input(rank, 48, torch.float32).view(6, 8).t()  # non-contiguous
    dist.all_reduce(t)
    out["allreduce/noncontiguous"] = t.contiguous()
    pair = [make_input(rank, 5, torch.float32), make_input(rank, 12, torch.float32).view(3, 4)]
    dist.all_reduce_coalesced(pair)
    out["allreduce_coalesced/0"], out["allreduce_coalesced/1"] = pair


def _movement(rank, size, backend, out):
    types = _dtypes(backend) + ([] if backend == "gloo" else [torch.bool, torch.complex64])
    for dtype in types:
        t = make_input(rank, N, dtype)
        dist.broadcast(t, src=size - 1)
        out["broadcast/{}".format(dtype)] = t
        parts = [torch.zeros(N, dtype=dtype) for _ in range(size)]
        dist.all_gather(parts, make_input(rank, N, dtype))
        out["allgather/{}".format(dtype)] = torch.stack(parts)
    if backend != "gloo":  # gloo in torch 1.13 has no _allgather_base
        whole = torch.zeros(size * N, dtype=torch.float32)
        dist.all_gather_into_tensor(whole, make_input(rank, N, torch.float32))
        out["allgather_base"] = whole
    lists = [[torch.zeros(3), torch.zeros(2, 2, dtype=torch.float32)] for _ in range(size)]
    dist.all_gather_coalesced(lists, [make_input(rank, 3, torch.float32),
                                      make_input(rank, 4, torch.float32).view(2, 2)])
    out["allgather_coalesced"] = torch.cat([t.reshape(-1) for pair in lists for t in pair])
    root = 1 % size
    gathered = [torch.zeros(N) for _ in range(size)] if rank == root else None
    dist.gather(make_input(rank, N, torch.float32), gathered, dst=root)
    if rank == root:
        out["gather"] = torch.stack(gathered)
    piece = torch.zeros(N, dtype=torch.int64)
    chunks = [make_input(r, N, torch.int64) * 10 for r in range(size)] if rank == 0 else None
    dist.scatter(piece, chunks, src=0)
    out["scatter"] = piece


def _alltoall(rank, size, backend, out):
    # Equal blocks: rows of 2 elements, `size` rows each way.
    src = make_input(rank, size * 2, torch.float32).view(size, 2) + 100 * rank
    dst = torch.zeros_like(src)
    dist.all_to_all_single(dst, src)
    out["alltoall_single/equal"] = dst
    # Uneven: rank r sends (r + j) % 3 rows of 3 to rank j.
    send_splits = [(rank + j) % 3 for j in range(size)]
    recv_splits = [(j + rank) % 3 for j in range(size)]
    src = make_input(rank, sum(send_splits) * 3, torch.int32).view(-1, 3) + 100 * rank
    dst = torch.zeros(sum(recv_splits), 3, dtype=torch.int32)
    dist.all_to_all_single(dst, src, recv_splits, send_splits)
    out["alltoall_single/uneven"] = dst
    if backend == "gloo":
        return
    inputs = [torch.full((rank + j + 1,), float(10 * rank + j)) for j in range(size)]
    outputs = [torch.zeros(j + rank + 1) for j in range(size)]
    dist.all_to_all(outputs, inputs)
    out["alltoall_list"] = torch.cat(outputs)
    for name in ("sum", "max"):
        result = torch.zeros(N, dtype=torch.float32)
        dist.reduce_scatter(result, [make_input(rank, N, torch.float32) * (j + 1)
                                     for j in range(size)], op=OPS[name])
        out["reduce_scatter/{}".format(name)] = result
    result = torch.zeros(N, dtype=torch.bfloat16)
    dist.reduce_scatter_tensor(result, make_input(rank, size * N, torch.bfloat16))
    out["reduce_scatter_tensor"] = result


def suite(rank, size, backend):
    out = {}
    _reductions(rank, size, backend, out)
    _movement(rank, size, backend, out)
    _alltoall(rank, size, backend, out)
    dist.barrier()
    return out

"""Timeouts on the chorus backend.

The timeout given at creation bounds every collective; the `timeout` of an
operation's options, and the one given to Work.wait(), bound one operation. An
operation that passes its timeout fails naming itself and the timeout, and breaks
its group: later calls fail at once, on this rank and (through the abort) on its
peers. In every case one rank stays out of the call, and the others must fail in
time; the skipping rank waits (sleeping) for their files before it leaves, so
that they see a timeout rather than a dead peer.
"""

import os
import re
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch._C._distributed_c10d as c10d

from harness import run_ranks

# What a loaded two-core machine may add to a deadline before the failure shows.
SLACK_S = 3.0
# Per-call timeouts in these tests: short, yet far above scheduling noise.
PER_CALL = timedelta(milliseconds=250)
PER_CALL_S = PER_CALL.total_seconds()


def _mark(directory, rank):
    open(os.path.join(directory, "done.{}".format(rank)), "w").close()


def _await_marks(directory, ranks, limit=60.0):
    until = time.monotonic() + limit
    while not all(os.path.exists(os.path.join(directory, "done.{}".format(r))) for r in ranks):
        assert time.monotonic() < until, "the other ranks never finished"
        time.sleep(0.02)


def _timed(call):
    """(seconds the call took, its RuntimeError's message or None)."""
    start = time.monotonic()
    try:
        call()
        error = None
    except RuntimeError as exc:
        error = str(exc)
    return time.monotonic() - start, error


def _check_fast_failure(elapsed, error, *needles):
    assert error is not None, "the call did not fail"
    assert elapsed < SLACK_S, "took {:.2f} s to fail: {}".format(elapsed, error)
    for needle in needles:
        assert needle in error, "{!r} not in {!r}".format(needle, error)


# --- the creation timeout ---------------------------------------------------------------------

def _skip_barrier(rank, size, directory):
    missing = size - 1
    if rank == missing:
        _await_marks(directory, range(missing))
        return {}
    out = {"barrier": _timed(dist.barrier),
           "later": _timed(lambda: dist.all_reduce(torch.ones(1)))}
    _mark(directory, rank)
    return out


def test_creation_timeout_names_the_missing_rank(tmp_path):
    creation = 2.0
    results = run_ranks(_skip_barrier, 3, args=(str(tmp_path),), timeout=60,
                        init_timeout=timedelta(seconds=creation))
    for rank, got in enumerate(results[:2]):
        elapsed, error = got["barrier"]
        assert error is not None, "rank {}: the barrier did not fail".format(rank)
        # Rank 1 may learn it from rank 0's abort, a little before its own deadline.
        assert creation - 0.5 <= elapsed <= creation + SLACK_S, (rank, elapsed, error)
        assert re.search(r"\branks? (\d+, )*2\b", error), "rank {}: {!r}".format(rank, error)
        _check_fast_failure(*got["later"])


# --- per-call timeouts through the options, for every collective ------------------------------

def _options(cls, **fields):
    opts = cls()
    opts.timeout = PER_CALL
    for name, value in fields.items():
        setattr(opts, name, value)
    return opts


def _collectives(size):
    """name -> call(group) issuing it with a per-call timeout. Rank 0 always receives
    something from rank 1 in it (roots are chosen so), so it cannot finish alone."""
    def x(n=4):
        return torch.ones(n)

    def xs():
        return [x() for _ in range(size)]

    return {
        "broadcast": lambda g: g.broadcast([x()], _options(c10d.BroadcastOptions, rootRank=1)),
        "allreduce": lambda g: g.allreduce([x()], _options(c10d.AllreduceOptions)),
        "allreduce_coalesced": lambda g: g.allreduce_coalesced(
            [x(), x(2)], _options(c10d.AllreduceCoalescedOptions)),
        "reduce": lambda g: g.reduce([x()], _options(c10d.ReduceOptions, rootRank=0)),
        "allgather": lambda g: g.allgather([xs()], [x()], _options(c10d.AllgatherOptions)),
        "_allgather_base": lambda g: g._allgather_base(x(4 * size), x(),
                                                       _options(c10d.AllgatherOptions)),
        "allgather_coalesced": lambda g: g.allgather_coalesced(
            [[x()] for _ in range(size)], [x()], _options(c10d.AllgatherOptions)),
        "gather": lambda g: g.gather([xs()], [x()], _options(c10d.GatherOptions, rootRank=0)),
        "scatter": lambda g: g.scatter([x()], [], _options(c10d.ScatterOptions, rootRank=1)),
        "reduce_scatter": lambda g: g.reduce_scatter([x()], [xs()],
                                                     _options(c10d.ReduceScatterOptions)),
        "_reduce_scatter_base": lambda g: g._reduce_scatter_base(
            x(), x(4 * size), _options(c10d.ReduceScatterOptions)),
        "alltoall_base": lambda g: g.alltoall_base(x(2 * size), x(2 * size), [], [],
                                                   _options(c10d.AllToAllOptions)),
        "alltoall": lambda g: g.alltoall(xs(), xs(), _options(c10d.AllToAllOptions)),
        "barrier": lambda g: g.barrier(_options(c10d.BarrierOptions)),
    }


def _per_call_every_op(rank, size, directory):
    calls = _collectives(size)
    groups = {name: dist.new_group(backend="chorus") for name in calls}
    out = {}
    if rank == 0:
        for name, call in calls.items():
            group = groups[name]
            out[name] = _timed(lambda: call(group).wait())
            out[name + "/later"] = _timed(lambda: group.allreduce([torch.ones(1)]).wait())
        _mark(directory, rank)
    else:
        _await_marks(directory, [0])
        for name in calls:  # rank 0's abort reached this rank's side of each group
            out[name] = _timed(lambda: groups[name].allreduce([torch.ones(1)]).wait())
    return out


def test_per_call_timeout_of_every_collective(tmp_path):
    size = 2
    results = run_ranks(_per_call_every_op, size, args=(str(tmp_path),), timeout=120)
    limit = "{} ms".format(int(PER_CALL_S * 1000))
    for name in _collectives(size):
        elapsed, error = results[0][name]
        assert error is not None, "{}: did not fail".format(name)
        assert PER_CALL_S - 0.01 <= elapsed <= PER_CALL_S + SLACK_S, (name, elapsed, error)
        for needle in (name.upper(), limit, "per-call timeout"):
            assert needle in error, "{}: {!r} not in {!r}".format(name, needle, error)
        _check_fast_failure(*results[0][name + "/later"], "unusable", name.upper())
        _check_fast_failure(*results[1][name], "rank 0")


# --- Work.wait(timeout), works nobody waits on, point-to-point, timeouts that do not pass ------

def _poll_until_completed(work, limit):
    start = time.monotonic()
    while not work.is_completed():
        assert time.monotonic() - start < limit, "the work never completed"
        time.sleep(0.005)
    return time.monotonic() - start


def _future_error(work):
    try:
        work.get_future().wait()
    except RuntimeError as exc:
        return str(exc)
    return None


def _wait_and_watchdog(rank, size, directory):
    out = {}
    # Timeouts that do not pass change nothing.
    t = torch.full((3,), float(rank + 1))
    work = dist.all_reduce(t, async_op=True)
    out["wait_ok"] = work.wait(timedelta(seconds=60))
    pg = dist.distributed_c10d._get_default_group()
    opts = c10d.AllreduceOptions()
    opts.timeout = timedelta(seconds=60)
    pg.allreduce([t], opts).wait()
    opts.timeout = timedelta(0)  # rejected before anything is sent: the group stays usable
    out["zero"] = _timed(lambda: pg.allreduce([t], opts))
    dist.all_reduce(t)
    out["value"] = t.tolist()
    waited = dist.new_group(backend="chorus")
    watched = dist.new_group(backend="chorus")
    received = dist.new_group(backend="chorus")
    if rank == 0:
        # wait(timeout): the tighter bound wins over the per-call one.
        work = dist.all_reduce(torch.ones(2), group=waited, async_op=True)
        out["wait"] = _timed(lambda: work.wait(PER_CALL))
        out["wait/completed"] = work.is_completed()
        out["wait/future"] = _future_error(work)
        out["wait/later"] = _timed(lambda: dist.barrier(group=waited))
        # Nobody waits: the watchdog fails the barrier at its deadline, although an
        # operation without a timeout sits before it in the queue.
        first = dist.all_reduce(torch.ones(2), group=watched, async_op=True)
        barrier = watched.barrier(_options(c10d.BarrierOptions))
        out["watched"] = _poll_until_completed(barrier, 60)
        out["watched/error"] = _future_error(barrier)
        out["watched/first"] = _poll_until_completed(first, SLACK_S)
        out["watched/first_error"] = _future_error(first)
        # Point-to-point: a receive whose sender never sends.
        recv = dist.irecv(torch.zeros(3), src=1, group=received)
        out["recv"] = _timed(lambda: recv.wait(PER_CALL))
        out["recv/later"] = _timed(lambda: dist.send(torch.ones(1), dst=1, group=received))
        _mark(directory, rank)
    else:
        _await_marks(directory, [0])
        out["recv/peer"] = _timed(lambda: dist.recv(torch.zeros(1), src=0, group=received))
    return out


def test_wait_timeout_and_watchdog(tmp_path):
    results = run_ranks(_wait_and_watchdog, 2, args=(str(tmp_path),), timeout=120)
    for got in results:
        assert got["wait_ok"] is True
        assert got["value"] == [12.0] * 3  # (1 + 2), doubled twice
        _check_fast_failure(*got["zero"], "allreduce", "must be positive")
    got = results[0]
    elapsed, error = got["wait"]
    assert error is not None and PER_CALL_S - 0.01 <= elapsed <= PER_CALL_S + SLACK_S, got["wait"]
    assert "ALLREDUCE" in error and "250 ms" in error and "wait()" in error, error
    assert got["wait/completed"], "a timed-out work is complete (failed)"
    assert "ALLREDUCE" in got["wait/future"] and "wait()" in got["wait/future"], got["wait/future"]
    _check_fast_failure(*got["wait/later"], "unusable")
    assert PER_CALL_S - 0.01 <= got["watched"] <= PER_CALL_S + SLACK_S, got["watched"]
    assert "BARRIER" in got["watched/error"] and "per-call timeout" in got["watched/error"]
    assert "unusable" in got["watched/first_error"] and "BARRIER" in got["watched/first_error"]
    elapsed, error = got["recv"]
    assert error is not None and PER_CALL_S - 0.01 <= elapsed <= PER_CALL_S + SLACK_S, got["recv"]
    assert "RECV" in error and "wait()" in error, error
    _check_fast_failure(*got["recv/later"], "send", "unusable")
    _check_fast_failure(*results[1]["recv/peer"], "rank 0")

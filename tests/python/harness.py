"""Runs a function on N ranks, each a fresh (spawned, not forked) process in its own process group.

    results = run_ranks(fn, world_size, backend="chorus", args=(...))

Every rank calls dist.init_process_group(backend) through a FileStore in a fresh
temporary directory (no ports to pick), with `init_timeout` as the group's timeout
when given, runs fn(rank, world_size, *args), and sends back its return value. A
rank that raises makes run_ranks raise with that rank's traceback; a rank that
hangs is killed after `timeout` seconds.
"""

import multiprocessing
import os
import pickle
import tempfile
import time
import traceback

import torch
import torch.distributed as dist

import chorus_torch  # noqa: F401  (registers the backend)

_CONTEXT = multiprocessing.get_context("spawn")


def _arrive_together(directory, rank, world_size, limit=60.0):
    """Returns once every rank called it (each leaves a file, then polls for the others').

    Interpreters start seconds apart on a loaded machine; with a short creation
    timeout the rendezvous itself would time out unless ranks start it together."""
    open(os.path.join(directory, "arrived.{}".format(rank)), "w").close()
    until = time.monotonic() + limit
    while not all(os.path.exists(os.path.join(directory, "arrived.{}".format(r)))
                  for r in range(world_size)):
        if time.monotonic() > until:
            raise TimeoutError("ranks did not all start within {} s".format(limit))
        time.sleep(0.01)


def _rank_main(fn, rank, world_size, backend, store_path, args, queue, init_timeout):
    try:
        torch.set_num_threads(1)
        options = {}
        if init_timeout is not None:
            options["timeout"] = init_timeout
            _arrive_together(os.path.dirname(store_path), rank, world_size)
        dist.init_process_group(backend, init_method="file://" + store_path,
                                rank=rank, world_size=world_size, **options)
        try:
            result = fn(rank, world_size, *args)
        finally:
            dist.destroy_process_group()
        # Plain pickle copies tensors by value (no shared memory that dies with us).
        queue.put((rank, True, pickle.dumps(result)))
    except BaseException:  # report everything, including assertion failures
        queue.put((rank, False, traceback.format_exc()))


def run_ranks(fn, world_size, backend="chorus", args=(), timeout=120, init_timeout=None):
    """Returns the list of per-rank return values, indexed by rank.

    `init_timeout` (a timedelta) is passed to init_process_group as its timeout."""
    with tempfile.TemporaryDirectory() as tmp:
        store_path = os.path.join(tmp, "store")
        queue = _CONTEXT.Queue()
        procs = [_CONTEXT.Process(target=_rank_main,
                                  args=(fn, r, world_size, backend, store_path, args, queue,
                                        init_timeout))
                 for r in range(world_size)]
        for p in procs:
            p.start()
        results, failures = {}, []
        try:
            for _ in range(world_size):
                rank, ok, value = queue.get(timeout=timeout)
                if ok:
                    results[rank] = pickle.loads(value)
                else:
                    failures.append("rank {}:\n{}".format(rank, value))
                    break
        except Exception as exc:  # queue.Empty: some rank hung
            failures.append("ranks timed out after {} s ({!r})".format(timeout, exc))
        finally:
            for p in procs:
                p.join(timeout=5 if not failures else 0.5)
                if p.is_alive():
                    p.kill()
                    p.join()
        if failures:
            raise AssertionError("\n".join(failures))
        return [results[r] for r in range(world_size)]

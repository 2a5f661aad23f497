"""Starts N local ranks of a command with the torch.distributed environment variables.

Debian's torch 1.13 `python3 -m torch.distributed.run` fails on Python 3.11 while setting up
its log redirects (AttributeError in elastic/multiprocessing/api.py: to_map), so the
benchmark starts the ranks itself: RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1,
MASTER_PORT (a free port), OMP_NUM_THREADS=1.
"""
import os
import socket
import subprocess


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(nranks, command, timeout):
    """Runs `command` as nranks processes; returns rank 0's stdout. Raises on any failure."""
    port = free_port()
    procs = []
    for rank in range(nranks):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(nranks),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True))
    outputs = []
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=timeout)
            outputs.append(out)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    failed = [p.returncode for p in procs if p.returncode != 0]
    if failed:
        raise RuntimeError(f"{command[0]}: ranks exited with {failed}")
    return outputs[0]

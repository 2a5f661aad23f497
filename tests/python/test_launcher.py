"""PyTorch programs launched by chorusrun, as users run them: `chorusrun -n N program.py`.

torch's env:// rendezvous binds MASTER_PORT on rank 0 while Chorus joins chorusrun's own store
(CHORUS_STORE_PORT); launched_program.py checks an all-reduce, a DDP step and an all-gather.
CHORUSRUN names the launcher (set by ctest). The .py runs under chorusrun's default interpreter,
the one this build's torch backend is for.
"""

import os
import secrets
import socket
import subprocess

import pytest

CHORUSRUN = os.environ["CHORUSRUN"]
PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launched_program.py")
JOB_SECONDS = 100  # chorusrun --timeout: a hung job fails the test with 124, well before ctest's


def chorusrun(args, env=None):
    return subprocess.Popen([CHORUSRUN, "--timeout", str(JOB_SECONDS), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def finish(process):
    out, err = process.communicate(timeout=JOB_SECONDS + 20)
    return process.returncode, out, err


def expect_ranks_ok(out, ranks, world):
    assert sorted(out.splitlines()) == sorted(
        "rank {} of {}: ok".format(r, world) for r in ranks), out


@pytest.mark.parametrize("world", [2, 3])
def test_one_node(world):
    code, out, err = finish(chorusrun(["-n", str(world), PROGRAM]))
    assert code == 0, err
    expect_ranks_ok(out, range(world), world)


def free_port_with_next():
    """A port P such that P and P + 1 are free now (MASTER_PORT and the store's default)."""
    for _ in range(100):
        with socket.socket() as first, socket.socket() as second:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            try:
                second.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port
    raise RuntimeError("no two consecutive free ports")


def test_two_nodes_on_loopback():
    """Two chorusrun processes, node ranks 0 and 1, two ranks each, torchrun's spellings."""
    env = dict(os.environ, CHORUS_AUTH_TOKEN=secrets.token_hex(32))
    common = ["--nnodes", "2", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
              "--master_port", str(free_port_with_next())]
    node1 = chorusrun(common + ["--node_rank", "1", PROGRAM], env)  # waits for node 0's store
    node0 = chorusrun(common + ["--node-rank", "0", PROGRAM], env)
    results = [finish(node0), finish(node1)]
    for node, (code, out, err) in enumerate(results):
        assert code == 0, "node {}: {}".format(node, err)
        expect_ranks_ok(out, range(2 * node, 2 * node + 2), 4)


def test_launcher_secret_stays_out_of_the_c10d_store(monkeypatch):
    """With CHORUS_AUTH_TOKEN (chorusrun gives every rank the job's), rank 0 publishes only its
    store's address in torch's unauthenticated store; without it, a fresh secret goes along."""
    from chorus_torch import _bootstrap
    from torch.distributed import HashStore

    store = HashStore()
    monkeypatch.setenv("CHORUS_AUTH_TOKEN", "launcher-token")
    server, address, secret = _bootstrap._publish(store, "k", "127.0.0.1")
    assert secret == "launcher-token"
    assert store.get("k").decode() == "127.0.0.1:{}".format(server.port)
    assert _bootstrap._read(store, "k", 1) == (address, "launcher-token")
    monkeypatch.delenv("CHORUS_AUTH_TOKEN")
    with pytest.raises(RuntimeError, match="CHORUS_AUTH_TOKEN, which is not set on rank 1"):
        _bootstrap._read(store, "k", 1)
    server, address, secret = _bootstrap._publish(store, "k2", "127.0.0.1")
    assert len(secret) == 64 and store.get("k2").decode() == address + " " + secret
    assert _bootstrap._read(store, "k2", 1) == (address, secret)

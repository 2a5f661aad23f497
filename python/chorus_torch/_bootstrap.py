"""Bootstrap of a Chorus communicator through the c10d store torch hands us.

Rank 0 starts a Chorus store server on a port the kernel picks (so nothing can
race for it) and publishes its "host:port" under a key of the c10d store; the
other ranks read it and join. Every connection proves knowledge of a secret:
CHORUS_AUTH_TOKEN when rank 0 has it (chorusrun gives every rank the job's),
which then never leaves the ranks' environments; else a fresh random one that
rank 0 publishes next to the address.

Security note: torch does not authenticate the c10d store. Without
CHORUS_AUTH_TOKEN, anyone who can reach it (MASTER_ADDR:MASTER_PORT) can read
the secret and join the Chorus job, so only run on networks you trust -- the
same exposure torch's own backends have.
"""

import os
import secrets

from . import _C


def _publish_key(store, rank):
    """A key unique to this group creation.

    Each rank counts the groups it created on this store; every rank creates
    groups in the same order, so the n-th creation of every rank shares a key
    even when one store serves several groups (new_group, re-initialisation).
    """
    generation = store.add("chorus/created/{}".format(rank), 1)
    return "chorus/bootstrap/{}".format(generation)


def _host():
    """CHORUS_STORE_ADDR (chorusrun's), else MASTER_ADDR (the rendezvous host), else loopback."""
    return os.environ.get("CHORUS_STORE_ADDR") or os.environ.get("MASTER_ADDR") or "127.0.0.1"


def _publish(store, key, host):
    """Rank 0: starts the store server and publishes where it is (and the secret, unless
    CHORUS_AUTH_TOKEN is it). Returns (server, address, secret)."""
    token = os.environ.get("CHORUS_AUTH_TOKEN")
    secret = token or secrets.token_hex(32)
    server = _C.StoreServer(host, secret)
    address = _join_address(host, server.port)
    store.set(key, address if token else "{} {}".format(address, secret))
    return server, address, secret


def _read(store, key, rank):
    """Another rank: (address, secret) of rank 0's store server."""
    address, _, secret = store.get(key).decode().partition(" ")
    secret = secret or os.environ.get("CHORUS_AUTH_TOKEN")
    if not secret:
        raise RuntimeError("chorus: rank 0 authenticates with its CHORUS_AUTH_TOKEN, which is "
                           "not set on rank {}: give every rank the same one".format(rank))
    return address, secret


def _join_address(host, port):
    return "[{}]:{}".format(host, port) if ":" in host else "{}:{}".format(host, port)


def create_process_group(store, rank, size, timeout):
    """The creator registered with torch.distributed.Backend.register_backend."""
    key = _publish_key(store, rank)
    server = None
    if rank == 0:
        server, address, secret = _publish(store, key, _host())
    else:
        address, secret = _read(store, key, rank)
    return _C.ProcessGroupChorus(rank, size, address, secret, timeout, server)

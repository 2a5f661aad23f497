"""Bootstrap of a Chorus communicator through the c10d store torch hands us.

Rank 0 starts a Chorus store server on a port the kernel picks (so nothing can
race for it), draws a fresh random secret, and publishes "host:port secret"
under a key of the c10d store; the other ranks read it and join.

Security note: the secret travels through the c10d store, which torch does not
authenticate. Anyone who can reach the c10d store (MASTER_ADDR:MASTER_PORT) can
read it and join the Chorus job, so only run on networks you trust -- the same
exposure torch's own backends have.
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
    """MASTER_ADDR when set (the launcher's rendezvous host), else loopback."""
    return os.environ.get("MASTER_ADDR") or "127.0.0.1"


def _join_address(host, port):
    return "[{}]:{}".format(host, port) if ":" in host else "{}:{}".format(host, port)


def create_process_group(store, rank, size, timeout):
    """The creator registered with torch.distributed.Backend.register_backend."""
    key = _publish_key(store, rank)
    server = None
    if rank == 0:
        secret = secrets.token_hex(32)
        host = _host()
        server = _C.StoreServer(host, secret)
        address = _join_address(host, server.port)
        store.set(key, "{} {}".format(address, secret))
    else:
        address, secret = store.get(key).decode().split(" ", 1)
    return _C.ProcessGroupChorus(rank, size, address, secret, timeout, server)

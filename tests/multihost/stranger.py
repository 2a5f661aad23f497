#!/usr/bin/env python3
"""stranger.py HOST:PORT...: what a stranger on the job's network may do to its ports.

To each port it opens three connections: one that sends random bytes, one that sends
all-ones bytes (as a length field: the largest value), and one that says nothing. It holds
them for three seconds, then closes them all, and prints what it reached. Exit status 1
when it could reach no port at all (then it has tested nothing).
"""
import os
import socket
import sys
import time


def attack(target):
    host, port = target.rsplit(":", 1)
    held = []
    for payload in (os.urandom(256), b"\xff" * 256, b""):
        s = socket.create_connection((host, int(port)), timeout=5)
        if payload:
            s.sendall(payload)
        held.append(s)
    return held


def main():
    held, reached = [], []
    for target in sys.argv[1:]:
        try:
            held += attack(target)
            reached.append(target)
        except OSError as e:
            print(f"stranger: {target}: {e}")
    time.sleep(3)
    for s in held:
        s.close()
    print(f"stranger: connected 3 times to each of {' '.join(reached) or 'nothing'}")
    return 0 if reached else 1


if __name__ == "__main__":
    sys.exit(main())

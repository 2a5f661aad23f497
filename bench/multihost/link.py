#!/usr/bin/env python3
"""The link between two simulated hosts, measured with nothing on top: a simultaneous two-way
TCP stream (GB/s per direction) and the round trip of an 8-byte message (us, median).

    ip netns exec NS1 link.py serve PORT &        # on one host
    ip netns exec NS0 link.py measure ADDR PORT   # on the other: prints one JSON line

One connection carries the stream both ways (a sender and a receiver thread at each end, 4 MiB
writes) for --seconds; a second one bounces 8 bytes --pings times."""
import argparse
import json
import socket
import statistics
import struct
import threading
import time

CHUNK = 4 << 20
TIMEOUT = 60  # seconds any accept or transfer may take before the measurement gives up


def stream_both_ways(sock, seconds):
    """Sends for `seconds` while receiving; returns (bytes sent, bytes received, elapsed)."""
    sent = [0]
    payload = bytes(CHUNK)
    stop = time.monotonic() + seconds

    def send():
        while time.monotonic() < stop:
            sock.sendall(payload)
            sent[0] += CHUNK
        sock.shutdown(socket.SHUT_WR)

    start = time.monotonic()
    sender = threading.Thread(target=send)
    sender.start()
    received = 0
    buffer = bytearray(CHUNK)
    while True:
        n = sock.recv_into(buffer)
        if n == 0:
            break
        received += n
    sender.join()
    return sent[0], received, time.monotonic() - start


def serve(port, seconds):
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", port))
    listener.listen(2)
    listener.settimeout(TIMEOUT)
    conn, _ = listener.accept()
    conn.settimeout(TIMEOUT)
    stream_both_ways(conn, seconds)
    conn.close()
    ping, _ = listener.accept()
    ping.settimeout(TIMEOUT)
    ping.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        data = ping.recv(8)
        if not data:
            break
        ping.sendall(data)


def connect(addr, port):
    for _ in range(100):
        try:
            return socket.create_connection((addr, port), timeout=TIMEOUT)
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"link.py: cannot connect to {addr}:{port}")


def measure(addr, port, seconds, pings):
    sock = connect(addr, port)
    sent, received, elapsed = stream_both_ways(sock, seconds)
    sock.close()
    ping = connect(addr, port)
    ping.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtts = []
    message = struct.pack("q", 0)
    for _ in range(pings):
        t = time.perf_counter()
        ping.sendall(message)
        got = b""
        while len(got) < 8:
            got += ping.recv(8 - len(got))
        rtts.append(time.perf_counter() - t)
    ping.close()
    print(json.dumps({"send_GBps": sent / elapsed / 1e9, "recv_GBps": received / elapsed / 1e9,
                      "two_way_GBps": min(sent, received) / elapsed / 1e9,
                      "rtt_us": statistics.median(rtts) * 1e6}))


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["serve", "measure"])
    p.add_argument("args", nargs="+")
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--pings", type=int, default=2000)
    a = p.parse_args()
    if a.mode == "serve":
        serve(int(a.args[0]), a.seconds)
    else:
        measure(a.args[0], int(a.args[1]), a.seconds, a.pings)


if __name__ == "__main__":
    main()

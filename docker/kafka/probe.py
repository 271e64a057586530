#!/usr/bin/env python3
"""Ask a Kafka broker for cluster metadata; exit 0 once it answers with a broker.

Stdlib only, so the broker script can check readiness before any virtualenv
exists. It speaks the Kafka wire protocol directly: one Metadata request
(API key 3, version 4, still served by Kafka 3.x and 4.x) for no particular
topic, and it accepts the broker as ready when the response lists at least
one broker. A listening socket alone is not enough: a KRaft broker accepts
connections before it has joined the quorum and can serve metadata.

    python3 probe.py 127.0.0.1:9092 [--timeout 1.0]
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys

METADATA_API_KEY = 3
METADATA_VERSION = 4
CLIENT_ID = b"hetsched-probe"


def metadata_request(correlation_id: int) -> bytes:
    header = struct.pack(">hhi", METADATA_API_KEY, METADATA_VERSION, correlation_id)
    header += struct.pack(">h", len(CLIENT_ID)) + CLIENT_ID
    body = struct.pack(">ib", -1, 0)  # topics = null (all), allow_auto_topic_creation = false
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def read_exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        data += chunk
    return data


def broker_count(host: str, port: int, timeout_s: float) -> int:
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(metadata_request(correlation_id=1))
        (size,) = struct.unpack(">i", read_exact(sock, 4))
        response = read_exact(sock, size)
        correlation_id, _throttle_ms, brokers = struct.unpack(">iii", response[:12])
        if correlation_id != 1:
            raise ConnectionError(f"unexpected correlation id {correlation_id}")
        return brokers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("address", help="host:port of the broker")
    parser.add_argument("--timeout", type=float, default=1.0, help="socket timeout in seconds")
    args = parser.parse_args()
    host, _, port = args.address.rpartition(":")
    try:
        count = broker_count(host or "127.0.0.1", int(port), args.timeout)
    except (OSError, ConnectionError, struct.error, ValueError) as exc:
        print(f"not ready: {exc}", file=sys.stderr)
        return 1
    if count < 1:
        print("not ready: metadata lists no broker", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Readiness probe for the secured broker: TLS, SASL/PLAIN login, then metadata.

Stdlib only, like probe.py (whose Metadata request it reuses): it verifies the
broker certificate against the test CA, authenticates with SaslHandshake v1 +
SaslAuthenticate v0 (PLAIN), and accepts the broker as ready once the Metadata
response lists a broker. The password is read from a file, never an argument.

    python3 probe_secure.py 127.0.0.1:9094 --cafile ca.pem --username admin \
        --password-file admin.password [--timeout 2]
"""

from __future__ import annotations

import argparse
import socket
import ssl
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from probe import CLIENT_ID, metadata_request, read_exact

SASL_HANDSHAKE_API_KEY = 17
SASL_AUTHENTICATE_API_KEY = 36


def _request(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation_id, len(CLIENT_ID)) + CLIENT_ID
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def _response(sock: ssl.SSLSocket, correlation_id: int) -> bytes:
    (size,) = struct.unpack(">i", read_exact(sock, 4))  # type: ignore[arg-type]
    data = read_exact(sock, size)  # type: ignore[arg-type]
    (got,) = struct.unpack(">i", data[:4])
    if got != correlation_id:
        raise ConnectionError(f"unexpected correlation id {got}")
    return data[4:]


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def broker_count(
    host: str, port: int, cafile: str, user: str, password: str, timeout: float
) -> int:
    context = ssl.create_default_context(cafile=cafile)
    with socket.create_connection((host, port), timeout=timeout) as raw_sock, \
            context.wrap_socket(raw_sock, server_hostname=host) as sock:
        sock.sendall(_request(SASL_HANDSHAKE_API_KEY, 1, 1, _string("PLAIN")))
        (error,) = struct.unpack(">h", _response(sock, 1)[:2])
        if error:
            raise ConnectionError(f"SASL handshake refused (error {error})")
        token = b"\0" + user.encode() + b"\0" + password.encode()
        auth = struct.pack(">i", len(token)) + token
        sock.sendall(_request(SASL_AUTHENTICATE_API_KEY, 0, 2, auth))
        (error,) = struct.unpack(">h", _response(sock, 2)[:2])
        if error:
            raise ConnectionError(f"SASL authentication failed (error {error})")
        request = metadata_request(correlation_id=3)
        sock.sendall(request)
        body = _response(sock, 3)
        _throttle_ms, brokers = struct.unpack(">ii", body[:8])
        return brokers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("address")
    parser.add_argument("--cafile", required=True)
    parser.add_argument("--username", required=True)
    parser.add_argument("--password-file", required=True)
    parser.add_argument("--timeout", type=float, default=2.0)
    args = parser.parse_args()
    host, _, port = args.address.rpartition(":")
    try:
        password = Path(args.password_file).read_text().strip()
        count = broker_count(host or "127.0.0.1", int(port), args.cafile, args.username,
                             password, args.timeout)
    except (OSError, ConnectionError, struct.error, ValueError) as exc:
        print(f"not ready: {type(exc).__name__}", file=sys.stderr)
        return 1
    return 0 if count >= 1 else 1


if __name__ == "__main__":
    sys.exit(main())

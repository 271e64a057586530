"""Check that this node can reach Kafka (exit 0), or say why not (exit 1); or ask a running node.

Run: ``hetsched-node health [--timeout-s 10]``. Uses ``KAFKA_BOOTSTRAP`` (or the
embedded broker's port) like every other client of the project, and the same
metadata probe as the running processes' ``/health`` (:func:`schemas.kafka.probe`).

``hetsched-node health --url http://127.0.0.1:9101`` asks a running node
(started with ``--metrics-port 9101``) instead: its ``/health`` says whether it
reaches Kafka, since when, and the last error (exit 0 when ok, 1 otherwise).
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap", help="host:port[,host:port] (default: KAFKA_BOOTSTRAP)")
    parser.add_argument("--timeout-s", type=float, default=10.0, help="give up after (10)")
    parser.add_argument("--url", help="a running node's metrics URL: print its /health")


def run(args: argparse.Namespace) -> int:
    if args.url:
        return _ask(args.url, args.timeout_s)
    import asyncio

    from schemas.backoff import describe
    from schemas.kafka import bootstrap_servers, probe

    servers = args.bootstrap or bootstrap_servers()
    try:
        brokers = asyncio.run(probe(servers, timeout_s=args.timeout_s))
    except Exception as exc:  # any failure means "not healthy"; say which
        print(f"kafka at {servers}: unreachable ({describe(exc)})")
        return 1
    print(f"kafka at {servers}: ok, {brokers} broker(s)")
    return 0


def _ask(url: str, timeout_s: float) -> int:
    """Print a running node's ``/health`` (200 ok, 503 Kafka unreachable)."""
    import urllib.error
    import urllib.request

    where = url.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(where, timeout=timeout_s) as r:
            print(r.read().decode())
            return 0
    except urllib.error.HTTPError as exc:  # 503: the node runs but does not reach Kafka
        print(exc.read().decode())
        return 1
    except OSError as exc:
        print(f"{where}: {getattr(exc, 'reason', None) or exc}")
        return 1

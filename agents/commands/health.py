"""Check that this node can reach the Kafka cluster (exit 0) or say why not (exit 1).

Run: ``hetsched-node health [--timeout-s 10]``. Uses ``KAFKA_BOOTSTRAP`` (or the
embedded broker's port) like every other client of the project.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap", help="host:port[,host:port] (default: KAFKA_BOOTSTRAP)")
    parser.add_argument("--timeout-s", type=float, default=10.0, help="give up after (10)")


def run(args: argparse.Namespace) -> int:
    import asyncio

    from aiokafka import AIOKafkaConsumer

    from schemas.kafka import aiokafka_kwargs, bootstrap_servers

    servers = args.bootstrap or bootstrap_servers()

    async def probe() -> set[str]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=servers,
            request_timeout_ms=int(args.timeout_s * 1000),
            **aiokafka_kwargs(),
        )
        await consumer.start()
        try:
            return await consumer.topics()
        finally:
            await consumer.stop()

    try:
        topics = asyncio.run(asyncio.wait_for(probe(), args.timeout_s))
    except Exception as exc:  # any failure means "not healthy"; say which
        print(f"kafka at {servers}: unreachable ({type(exc).__name__}: {exc})")
        return 1
    print(f"kafka at {servers}: ok, {len(topics)} topics")
    return 0

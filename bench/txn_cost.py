"""Client CPU of one Kafka transaction, standard asyncio loop vs uvloop.

Each hop of the service (router, scheduler) commits a transaction per partition
per fetch, so at moderate rates a submission pays two small transactions of
client CPU (AddPartitionsToTxn, Produce, EndTxn round trips, plus the read
committed fetch). This bench measures that cost alone: ``--n`` transactions of
one 200-byte record each, with a read-committed consumer polled after each one,
in a fresh process per loop kind, the kinds alternated ``--pairs`` times so a
noisy machine affects both alike. It prints process CPU and wall time per
transaction and the uvloop/asyncio CPU ratio per pair.

    .venv/bin/python bench/txn_cost.py --bootstrap 127.0.0.1:9092 --pairs 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
import uuid

TOPIC = "hetsched-bench-txn-cost"


async def measure(bootstrap: str, n: int) -> dict[str, float]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap,
                                transactional_id=f"txn-cost-{uuid.uuid4().hex}")
    consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=None,
                                isolation_level="read_committed", auto_offset_reset="latest")
    await producer.start()
    await consumer.start()
    try:
        async def one() -> None:
            async with producer.transaction():
                await producer.send(TOPIC, b"x" * 200, partition=0)
            await consumer.getmany(timeout_ms=0)

        for _ in range(20):  # warm-up: coordinator lookup, partition metadata
            await one()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for _ in range(n):
            await one()
        cpu1, wall1 = time.process_time(), time.perf_counter()
    finally:
        await consumer.stop()
        await producer.stop()
    return {"cpu_ms": 1000 * (cpu1 - cpu0) / n, "wall_ms": 1000 * (wall1 - wall0) / n}


def child(loop: str, bootstrap: str, n: int) -> None:
    from schemas.event_loop import use_event_loop

    use_event_loop(loop)
    print(json.dumps(asyncio.run(measure(bootstrap, n))))


def run_child(loop: str, bootstrap: str, n: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, "--child", loop, "--bootstrap", bootstrap,
                          "--n", str(n)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--n", type=int, default=400, help="transactions per measurement")
    parser.add_argument("--pairs", type=int, default=5, help="asyncio/uvloop pairs, alternated")
    parser.add_argument("--child", choices=["asyncio", "uvloop"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.bootstrap, args.n)
        return
    ratios = []
    print("| pair | asyncio CPU ms/txn | uvloop CPU ms/txn | ratio | asyncio wall | uvloop wall |")
    print("| --- | --- | --- | --- | --- | --- |")
    for pair in range(1, args.pairs + 1):
        base = run_child("asyncio", args.bootstrap, args.n)
        uv = run_child("uvloop", args.bootstrap, args.n)
        ratios.append(uv["cpu_ms"] / base["cpu_ms"])
        print(f"| {pair} | {base['cpu_ms']:.3f} | {uv['cpu_ms']:.3f} | {ratios[-1]:.2f} | "
              f"{base['wall_ms']:.2f} | {uv['wall_ms']:.2f} |", flush=True)
    print(f"\nuvloop/asyncio CPU per transaction: median {statistics.median(ratios):.2f} "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f}) over {len(ratios)} pairs")


if __name__ == "__main__":
    main()
